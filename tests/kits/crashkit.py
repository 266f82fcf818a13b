"""Run the crash child, kill it with SIGKILL at chosen moments, and check the promises."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from diskfrontier import Frontier, Request

CHILD = os.path.join(os.path.dirname(__file__), "crash_child.py")
TORN = "#torn"  # written by the parent after a log line that a kill cut short


@dataclass
class Model:
    """What the child was told, rebuilt from its log."""

    pushed: dict[str, int] = field(default_factory=dict)  # url -> priority, acknowledged
    push_order: dict[str, int] = field(default_factory=dict)
    uncertain: set[str] = field(default_factory=set)  # a push in progress at a kill
    done: set[str] = field(default_factory=set)
    done_called: set[str] = field(default_factory=set)  # done() entered; it may not have returned
    popped: set[str] = field(default_factory=set)
    popped_prefixes: list[str] = field(default_factory=list)  # "O" lines cut short by a kill
    duplicates_accepted: list[str] = field(default_factory=list)

    def read(self, log_path: str) -> None:
        with open(log_path) as f:
            lines = f.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        pending_intent: list[str] = []
        for number, line in enumerate(lines):
            if line == TORN:
                continue
            kind, _, rest = line.partition(" ")
            if number + 1 < len(lines) and lines[number + 1] == TORN:
                # The kill cut this line short. An intent cut short: its call never started.
                # An acknowledgement cut short: its call had returned, for all it intended.
                if kind in ("P", "M"):
                    for url in pending_intent:
                        self._ack(url, 0)
                    pending_intent = []
                elif kind == "O":
                    self.popped_prefixes.append(rest)
                continue
            if kind in ("?P", "?M"):
                pending_intent = rest.split()
            elif kind == "P":
                url, prio = rest.split()
                self._ack(url, int(prio))
                pending_intent = []
            elif kind == "M":
                parts = rest.split()
                for url, prio in zip(parts[::2], parts[1::2], strict=False):  # a line cut by a kill: its pairs
                    self._ack(url, int(prio))
                pending_intent = []
            elif kind == "X":
                url, result = rest.split()
                if result == "1":
                    self.duplicates_accepted.append(url)
            elif kind == "O":
                self.popped.add(rest)
            elif kind == "?D":
                self.done_called.add(rest)
            elif kind == "D":
                self.done.add(rest)
            elif kind == "R":
                # a new run: whatever push was in progress before it was cut by the kill
                self.uncertain.update(pending_intent)
                pending_intent = []
        self.uncertain.update(pending_intent)

    def _ack(self, url: str, priority: int) -> None:
        self.pushed[url] = priority
        self.push_order[url] = len(self.push_order)
        self.uncertain.discard(url)


def kill_when(proc: subprocess.Popen, log_path: str, marker: str, count: int, start: int,
              timeout: float = 20.0) -> bool:
    """SIGKILL ``proc`` once the log holds ``count`` lines starting with ``marker``."""
    deadline = time.monotonic() + timeout
    seen = 0
    position = start
    while time.monotonic() < deadline:
        if proc.poll() is not None:
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


def check_guarantees(model: Model, drained: Drained, order: str) -> dict[str, int]:
    """Assert no loss, no resurrection, nothing invented, and order; return tallies."""
    urls = [r.url for r in drained.order]
    got = set(urls)
    assert len(urls) == len(got), "a request came back twice from one drain"
    # done() called but cut by the kill: finished or not, either is allowed
    promised = set(model.pushed) - model.done - model.done_called
    lost = promised - got
    assert not lost, f"no loss violated: {len(lost)} acknowledged requests never came back, e.g. {sorted(lost)[:3]}"
    resurrected = got & model.done
    assert not resurrected, f"no resurrection violated: {sorted(resurrected)[:3]}"
    invented = got - set(model.pushed) - model.uncertain
    assert not invented, f"requests that were never pushed came back: {sorted(invented)[:3]}"
    assert not model.duplicates_accepted, f"a duplicate push was accepted: {model.duplicates_accepted[:3]}"
    # Order: priorities never rise; within a priority, requests that were never in flight
    # come back in LIFO (newest first) or FIFO (oldest first) push order.
    priorities = [r.priority for r in drained.order]
    assert priorities == sorted(priorities, reverse=True), "order violated: a lower priority came before a higher one"
    by_priority: dict[int, list[int]] = {}
    for request in drained.order:
        if (request.url in model.popped or request.url not in model.push_order
                or any(request.url.startswith(prefix) for prefix in model.popped_prefixes)):
            continue
        by_priority.setdefault(request.priority, []).append(model.push_order[request.url])
    for priority, seq in by_priority.items():
        expected = sorted(seq, reverse=(order == "lifo"))
        assert seq == expected, f"order violated within priority {priority}"
    return {"promised": len(promised), "came_back": len(got), "done": len(model.done),
            "in_flight_returned": len(got & model.popped), "uncertain": len(model.uncertain)}


def dedupe_survives(jobdir: str, model: Model) -> int:
    """Every URL ever acknowledged is still a duplicate; return how many were checked."""
    with Frontier(jobdir) as frontier:
        accepted = [url for url in model.pushed if frontier.push(Request(url))]
    assert not accepted, f"dedupe lost across restarts for {len(accepted)} URLs, e.g. {accepted[:3]}"
    return len(model.pushed)


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
