"""The ``--big N`` figures of ``bench_frontier.py``: one job directory of N requests, and what happens to it.

Each step is a process of its own, run one after the other, once (these are single runs, not
medians); commands are timed as whole processes (interpreter start and imports included)
with their peak RSS, from ``getrusage(RUSAGE_CHILDREN)`` read by a small wrapper process
(``--rusage``) that runs nothing else:

1. ``diskfrontier --version``: the constant in every command's time;
   build: N URLs over 1,000 hosts (priorities 0..-5) with ``push_many`` in batches of
   10,000, each followed by 1,000 of them again as duplicates; a clean close;
2. ``diskfrontier inspect`` and ``diskfrontier peek -n 20`` on the clean directory;
3. live: a child opens it with ``Frontier(delay=1.0)`` and waits while ``inspect`` and
   ``peek -n 20`` run; then it calls ``pop(timeout=0)`` for a few seconds (finishing each
   request it gets) and reports its longest call;
4. kill: a child opens it, pops N/10 (in flight) and kills itself with SIGKILL;
   ``inspect`` and ``peek -n 20`` on the killed directory; then a process reopens it (the
   queues are rebuilt from the journal): requests re-queued per second;
5. ``diskfrontier compact`` of that directory (everything in it pending);
6. per-call pushes: a child pushes N (+10% duplicates) into a new directory one ``push()``
   at a time, timing each call; pops and finishes half of them; ``compact`` of that directory.

A step that fails is reported with its reason, and the steps that need its directory are
skipped, saying why.

    python benchmarks/frontier_big.py --child build JOBDIR N      # the children, run by big()
    python benchmarks/frontier_big.py --rusage CMD ARGS...         # CMD's wall time and peak RSS
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.abspath(__file__)
CHUNK = 10_000  # requests built at a time, and the push_many batch
LIVE_SECONDS = 3.0  # how long the live child keeps calling pop(timeout=0)
LIVE_DELAY = 1.0
SLOW_MS = 20.0  # a call slower than this is counted
BYTES_PER_URL = 300  # disk of one job directory per URL (about 260 here), for the free-space check
MB = 1e6


def url(i: int) -> str:
    return f"https://host{i % 1000}.example.com/catalog/{i // 1000}/item-{i}.html?ref=list&page={i % 50}"


def dir_bytes(path: str) -> int:
    return sum(os.lstat(os.path.join(root, name)).st_size for root, _dirs, files in os.walk(path) for name in files)


# ---------------------------------------------------------------------- children
def _batches(n: int) -> Any:
    """N requests (+10% duplicates), built CHUNK at a time: (new requests, duplicates) pairs."""
    from diskfrontier import Request

    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        yield ([Request(url(i), priority=-(i % 6)) for i in range(start, stop)],
               [Request(url(i), priority=-(i % 6)) for i in range(start, stop, 10)])


def child_build(path: str, n: int) -> dict:
    from diskfrontier import Frontier

    frontier = Frontier(path)
    seconds = offered = 0.0
    for batch, duplicates in _batches(n):
        started = time.perf_counter()
        frontier.push_many(batch)
        frontier.push_many(duplicates)
        seconds += time.perf_counter() - started
        offered += len(batch) + len(duplicates)
    pending = len(frontier)
    frontier.close()
    return {"pending": pending, "push_many_rate": offered / seconds, "disk": dir_bytes(path)}


def child_pushes(path: str, n: int) -> dict:
    """push() one call at a time, each timed; then pop+done half of them."""
    from diskfrontier import Frontier

    clock = time.perf_counter
    frontier = Frontier(path)
    push = frontier.push
    total = worst = 0.0
    calls = slow = 0
    for batch, duplicates in _batches(n):
        for request in batch + duplicates:
            started = clock()
            push(request)
            took = clock() - started
            total += took
            if took > worst:
                worst = took
            if took * 1000 > SLOW_MS:
                slow += 1
        calls += len(batch) + len(duplicates)
    pop, done = frontier.pop, frontier.done
    for _ in range(n // 2):
        done(pop())
    pending = len(frontier)
    frontier.close()
    return {"calls": calls, "worst_ms": worst * 1000, "slow": slow, "push_rate": calls / total, "pending": pending}


def child_live(path: str) -> dict:
    """Hold the directory open (say "ready", wait for a line), then pop(timeout=0) for LIVE_SECONDS."""
    from diskfrontier import Frontier

    frontier = Frontier(path, delay=LIVE_DELAY)
    print("ready", flush=True)
    sys.stdin.readline()
    clock = time.perf_counter
    pop, done = frontier.pop, frontier.done
    worst = worst_none = 0.0
    calls = got = slow = 0
    end = clock() + LIVE_SECONDS
    while True:
        started = clock()
        if started >= end:
            break
        request = pop(timeout=0.0)
        took = clock() - started
        calls += 1
        if took * 1000 > SLOW_MS:
            slow += 1
        if request is None:
            worst_none = max(worst_none, took)
            continue
        worst = max(worst, took)
        got += 1
        done(request)
    frontier.close()
    return {"calls": calls, "requests": got, "worst_ms": max(worst, worst_none) * 1000,
            "worst_request_ms": worst * 1000, "worst_none_ms": worst_none * 1000, "slow": slow}


def child_kill(path: str, n: int) -> dict:
    from diskfrontier import Frontier

    frontier = Frontier(path)
    for _ in range(n // 10):
        frontier.pop()
    os.kill(os.getpid(), signal.SIGKILL)
    return {}


def child_reopen(path: str) -> dict:
    from diskfrontier import Frontier

    started = time.perf_counter()
    frontier = Frontier(path)
    seconds = time.perf_counter() - started
    pending, recovery = len(frontier), frontier.recovery
    frontier.close()
    return {"open_s": seconds, "pending": pending, "recovery": recovery}


CHILDREN: dict[str, Callable[..., dict]] = {
    "build": lambda path, n: child_build(path, int(n)),
    "pushes": lambda path, n: child_pushes(path, int(n)),
    "live": child_live,
    "kill": lambda path, n: child_kill(path, int(n)),
    "reopen": child_reopen,
}


def rusage_main(argv: list[str]) -> None:
    """The wrapper: run argv, print its exit code, wall time, peak RSS and the ends of its output."""
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False)
    wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    print(json.dumps({"rc": done.returncode, "wall": wall, "peak": peak,
                      "stdout": done.stdout.decode(errors="replace")[-4000:],
                      "stderr": done.stderr.decode(errors="replace")[-2000:]}))


# ---------------------------------------------------------------------- the parent
class StepFailed(Exception):
    pass


def measured(argv: list[str], expect_rc: int | None = 0) -> dict:
    """Run argv under the wrapper: rc, wall, peak (bytes), stdout, stderr."""
    out = subprocess.run([sys.executable, HERE, "--rusage", *argv], capture_output=True, text=True, check=False)
    if out.returncode != 0 or not out.stdout.strip():
        raise StepFailed(f"the wrapper exited {out.returncode}: {_last_line(out.stderr)}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if expect_rc is not None and result["rc"] != expect_rc:
        raise StepFailed(f"exit {result['rc']}: {_last_line(result['stderr']) or _last_line(result['stdout'])}")
    return result


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else "no output"


def child(mode: str, *args: object, expect_rc: int | None = 0) -> dict:
    result = measured([sys.executable, HERE, "--child", mode, *map(str, args)], expect_rc)
    text = result["stdout"].strip()
    data = json.loads(text.splitlines()[-1]) if text else {}
    return {**data, "wall": result["wall"], "peak": result["peak"]}


def cli(*args: str) -> dict:
    """A diskfrontier command: wall, peak; "refused" (and its message) if it exits non-zero."""
    result = measured([sys.executable, "-m", "diskfrontier", *args], expect_rc=None)
    if result["rc"] != 0:
        return {"refused": _last_line(result["stderr"]) or f"exit {result['rc']}", "wall": result["wall"],
                "peak": result["peak"]}
    return {"wall": result["wall"], "peak": result["peak"]}


class Live:
    """A child holding a job directory open with Frontier(delay=1.0) until told to pop."""

    def __init__(self, path: str) -> None:
        self.proc = subprocess.Popen([sys.executable, HERE, "--child", "live", path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.proc.kill()
            _, err = self.proc.communicate()
            raise StepFailed(f"the live child did not open the directory: {_last_line(err)}")

    def pop_and_close(self) -> dict:
        out, err = self.proc.communicate("go\n", timeout=LIVE_SECONDS + 600)
        if self.proc.returncode != 0:
            raise StepFailed(f"the live child exited {self.proc.returncode}: {_last_line(err)}")
        return json.loads(out.strip().splitlines()[-1])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] --big: {text}", file=sys.stderr, flush=True)


def big(n: int, work: str) -> dict[str, Any]:
    """Every --big step on a job directory of ``n``: a dict of figures, each step's failure under
    ``errors[step]``."""
    r: dict[str, Any] = {"n": n, "errors": {}}
    errors: dict[str, str] = r["errors"]
    need = BYTES_PER_URL * n * 3  # two directories and a compaction's new journal
    free = shutil.disk_usage(work).free
    if need > free:
        reason = f"not enough free disk in {work}: about {need / 1e9:.1f} GB needed, {free / 1e9:.1f} GB free"
        errors.update(build=reason)
        return r
    jobdir, pushdir = os.path.join(work, "big"), os.path.join(work, "big-push")

    def step(name: str, func: Callable[[], None], needs: str | None = None) -> bool:
        if needs is not None and needs in errors:
            errors[name] = f"skipped: the {needs} step failed"
            return False
        say(name)
        try:
            func()
        except Exception as exc:  # the reason is reported in its row
            errors[name] = str(exc) or type(exc).__name__
            return False
        return True

    def build() -> None:
        b = child("build", jobdir, n)
        r.update(build_s=b["wall"], build_mb=b["peak"] / MB, push_many_rate=b["push_many_rate"],
                 pending=b["pending"], disk=b["disk"])

    def commands(state: str) -> None:
        for name, argv in (("inspect", ("inspect", jobdir)), ("peek", ("peek", jobdir, "-n", "20"))):
            r[f"{name}_{state}"] = cli(*argv)

    def startup() -> None:
        r["startup"] = cli("--version")

    def live() -> None:
        holder = Live(jobdir)
        try:
            commands("live")
            r["live"] = holder.pop_and_close()
        finally:
            holder.stop()

    def kill() -> None:
        child("kill", jobdir, n, expect_rc=-signal.SIGKILL)

    def reopen() -> None:
        o = child("reopen", jobdir)
        r["reopen"] = {**o, "rate": o["pending"] / o["open_s"]}

    def compact(key: str, path: str) -> Callable[[], None]:
        def run() -> None:
            r[key] = cli("compact", path)
        return run

    def pushes() -> None:
        r["pushes"] = child("pushes", pushdir, n)

    step("startup", startup)
    if step("build", build):
        step("clean", lambda: commands("clean"))
        step("live", live, needs="build")
        if step("kill", kill, needs="build"):
            step("killed", lambda: commands("killed"))
            step("reopen", reopen)
            step("compact", compact("compact_all", jobdir), needs="reopen")
    shutil.rmtree(jobdir, ignore_errors=True)
    if step("pushes", pushes):
        step("compact_half", compact("compact_half", pushdir))
    shutil.rmtree(pushdir, ignore_errors=True)
    return r


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--rusage":
        rusage_main(sys.argv[2:])
    elif len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(CHILDREN[sys.argv[2]](*sys.argv[3:])))
    else:
        sys.exit("usage: frontier_big.py --child MODE ARGS... | --rusage CMD ARGS... (run by bench_frontier.py)")
