"""Run the crash child, kill it with SIGKILL at chosen moments, and check the promises against the reference
model (``reference.py``) driven by what the child logged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from reference import Reference

from diskfrontier import Frontier, Request

CHILD = os.path.join(os.path.dirname(__file__), "crash_child.py")
TORN = "#torn"  # written by the parent after a log line that a kill cut short


@dataclass
class Replayed:
    """The reference model driven by the child's log, and the calls whose outcome it refutes."""

    model: Reference
    torn_pops: list[str] = field(default_factory=list)  # how URLs handed out by pops whose lines a kill cut began
    refuted: list[str] = field(default_factory=list)  # calls no frontier may answer as this one did


def _pairs(text: str) -> list[tuple[str, int]]:
    """``url priority url priority ...`` as (url, priority) pairs; a pair cut short is left out."""
    parts = text.split()
    return [(url, int(priority)) for url, priority in zip(parts[::2], parts[1::2], strict=False)]


def read_log(log_path: str, order: str) -> Replayed:
    """Drive a reference model with what the child's log says it was told and answered.

    A push or done whose intent line is in the log and whose acknowledgement is not was cut
    by a kill: it may or may not have taken effect (``Reference.push_cut``, ``done_cut``).
    Every run but the last ends with a kill and the next one starts with ``R``; the last
    one is killed too (``Reference.crash``). A pop must hand out what is pending (its
    order is checked at the drain, for what was never in flight).
    """
    with open(log_path) as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    replayed = Replayed(Reference(order))
    model = replayed.model
    pushing: list[tuple[str, int]] = []  # the push or push_many under way: its URLs and priorities
    finishing: list[str] = []  # the done or done_many under way

    def pushed(pairs: list[tuple[str, int]]) -> None:
        for url, priority in pairs:
            if not model.push(url, priority):
                replayed.refuted.append(f"a push of {url} was accepted twice")

    def finished(cut: bool = False) -> None:
        for url in finishing:
            if url not in model.in_flight:
                replayed.refuted.append(f"done() of {url}, which no pop had handed out since the last restart")
            elif cut:
                model.done_cut(url)
            else:
                model.done(url)
        finishing.clear()

    def killed() -> None:
        for url, priority in pushing:
            model.push_cut(url, priority)
        pushing.clear()
        finished(cut=True)
        model.crash()

    for number, line in enumerate(lines):
        if line == TORN:
            continue
        kind, _, rest = line.partition(" ")
        if number + 1 < len(lines) and lines[number + 1] == TORN:
            # The kill cut this line short. An intent cut short: its call never started.
            # An acknowledgement cut short: its call had returned, for all it intended.
            if kind in ("P", "M"):
                pushed(pushing)
                pushing.clear()
            elif kind == "D":
                finished()
            elif kind == "O":
                replayed.torn_pops.append(rest)
            continue
        if kind in ("?P", "?M"):
            pushing[:] = _pairs(rest)
        elif kind in ("P", "M"):
            pushed(_pairs(rest))
            pushing.clear()
        elif kind == "X":
            url, result = rest.split()
            if model.push(url) != (result == "1"):
                replayed.refuted.append(f"a push of {url} answered {result == '1'} (seen before: {url in model.seen})")
        elif kind == "O":
            if not model.take(rest):
                replayed.refuted.append(f"a pop handed out {rest}, which was not pending")
        elif kind == "?D":
            finishing.append(rest)
        elif kind == "D":
            finished()  # (done_many: every request of the call at its first line)
        elif kind == "C":
            model.reopen(keep_places=False)  # a job directory re-queues what was in flight on top
        elif kind == "R" and number:
            killed()  # a new run: the one before ended with a kill (a no-op after a clean close)
    killed()  # the last run was killed too
    return replayed


def kill_when(proc: subprocess.Popen, log_path: str, marker: str, count: int, start: int,
              timeout: float = 20.0) -> bool:
    """SIGKILL ``proc`` once the log holds ``count`` lines starting with ``marker``."""
    deadline = time.monotonic() + timeout
    seen = 0
    position = start
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            assert proc.stderr is not None
            raise AssertionError(f"the crash child exited by itself: {proc.stderr.read().decode()[-2000:]}")
        with open(log_path, "rb") as f:
            f.seek(position)
            chunk = f.read()
        cut = chunk.rfind(b"\n") + 1
        position += cut
        seen += sum(1 for line in chunk[:cut].split(b"\n") if line.startswith(marker.encode()))
        if seen >= count:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            mark_torn_line(log_path)
            return True
        time.sleep(0.0005)
    proc.kill()
    proc.wait()
    mark_torn_line(log_path)
    return False


def mark_torn_line(log_path: str) -> None:
    """A write cut by SIGKILL can leave half a line: end it, and say so, before the next run writes."""
    with open(log_path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) != b"\n":
            f.write(f"\n{TORN}\n".encode())


def run_round(jobdir: str, log_path: str, seed: int, round_no: int, order: str, marker: str, count: int,
              fsync: bool = False) -> None:
    """Start the child on ``jobdir`` and kill it at the ``count``-th ``marker``."""
    open(log_path, "ab").close()
    start = os.path.getsize(log_path)
    args = [sys.executable, CHILD, jobdir, log_path, str(seed), str(round_no), order]
    if fsync:
        args.append("fsync")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert kill_when(proc, log_path, marker, count, start), f"the child never reached {count} x {marker!r}"


@dataclass
class Drained:
    """Everything a reopened frontier still had, in pop order."""

    order: list[Request]
    stats: dict


def drain(jobdir: str) -> Drained:
    """Open the job directory, pop everything (marking it done), and close."""
    with Frontier(jobdir) as frontier:
        stats = frontier.stats()
        out = []
        while (request := frontier.pop()) is not None:
            out.append(request)
            frontier.done(request)
    return Drained(out, stats)


def check_guarantees(replayed: Replayed, drained: Drained) -> dict[str, int]:
    """Assert no loss, no resurrection, nothing invented, no duplicate accepted, priorities and order, all
    against the reference model; return tallies."""
    model = replayed.model
    assert not replayed.refuted, f"the reference model refutes: {replayed.refuted[:3]}"
    urls = [r.url for r in drained.order]
    got = set(urls)
    assert len(urls) == len(got), "a request came back twice from one drain"
    promised = set(model.pending)  # acknowledged, not done: in flight at a kill included (at-least-once)
    cut = set(model.maybe_pushed) | set(model.maybe_done)  # a kill cut its push or done short: either way
    tallies = {"promised": len(promised), "came_back": len(got), "done": len(model.completed),
               "in_flight_returned": len(got & model.handed_out), "uncertain": len(model.maybe_pushed),
               "done_cut": len(model.maybe_done)}
    lost = promised - got
    assert not lost, f"no loss violated: {len(lost)} acknowledged requests never came back, e.g. {sorted(lost)[:3]}"
    resurrected = got & model.completed
    assert not resurrected, f"no resurrection violated: {sorted(resurrected)[:3]}"
    invented = got - promised - cut
    assert not invented, f"requests that were never pushed came back: {sorted(invented)[:3]}"
    model.settle(got)
    assert set(model.pending) == got
    wrong = [(r.url, r.priority) for r in drained.order if r.priority != model.pending[r.url][0]]
    assert not wrong, f"requests came back with another priority than they were pushed with: {wrong[:3]}"
    # Order: priorities never rise; what was never handed out comes back in the model's order
    # (LIFO: newest push first; FIFO: oldest first). What was in flight at a clean close was
    # re-queued on top, and at a kill went back to its place: the model does not say which.
    priorities = [r.priority for r in drained.order]
    assert priorities == sorted(priorities, reverse=True), "order violated: a lower priority came before a higher one"
    fresh = {url for url in got - model.handed_out if not url.startswith(tuple(replayed.torn_pops))}
    expected = [url for url in model.in_pop_order() if url in fresh]
    came = [url for url in urls if url in fresh]
    if came != expected:
        at = next(i for i, (a, b) in enumerate(zip(came, expected, strict=True)) if a != b)
        raise AssertionError(f"order violated: request {at} of those never handed out is {came[at]}, the model "
                             f"says {expected[at]}")
    return tallies


def dedupe_survives(jobdir: str, model: Reference) -> int:
    """Every URL the frontier ever accepted is still a duplicate; return how many were checked."""
    with Frontier(jobdir) as frontier:
        accepted = [url for url in sorted(model.seen) if frontier.push(Request(url))]
    assert not accepted, f"dedupe lost across restarts for {len(accepted)} URLs, e.g. {accepted[:3]}"
    return len(model.seen)


def kill_after_acks(args: list[str], acks: int) -> tuple[list[dict], dict | None]:
    """Run a child that logs each call as a JSON line ``B {op}`` when it begins and ``A {op}``
    when it returned; SIGKILL it once ``acks`` calls returned.

    Returns the calls it confirmed (the lines written before it died included) and the call
    it had begun and not confirmed, if any (a kill may land anywhere inside that one)."""
    child = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True, encoding="utf-8")
    assert child.stdout is not None
    lines = []
    count = 0
    for line in child.stdout:
        lines.append(line)
        count += line.startswith("A ")
        if count >= acks:
            break
    os.kill(child.pid, signal.SIGKILL)
    lines += child.stdout.readlines()  # what it wrote before it died
    child.wait()
    child.stdout.close()
    assert count >= acks, f"the child stopped after {count} calls"
    acked: list[dict] = []
    begun: dict | None = None
    for line in lines:
        if not line.endswith("\n"):
            break  # cut short by the kill: its call is the one under way, seen in its B line
        tag, _, body = line.partition(" ")
        op = json.loads(body)
        if tag == "B":
            begun = op
        else:
            begun = None
            acked.append(op)
    return acked, begun
