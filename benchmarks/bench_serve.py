"""What ``diskfrontier serve`` costs to keep a large job directory's dashboard fresh.

One job directory of N requests (default 10^6) over 1,000 hosts: N/10 done, N/100 failed, closed
cleanly. ``serve`` reads it through ``JobDirSource`` (diskfrontier/live/sources.py), as its refresh
task does, in four states:

1. clean, no process holds it: the first read (checkpoint, host file, the latest failures), then a
   refresh while nothing changed (a few ``stat`` calls and the snapshot rebuilt);
2. killed (a child popped N/10 and was SIGKILLed): the first read scans the journal; then unchanged;
3. held by a live crawl that publishes no ``status.json``: each read of its files, and how many reads
   a refresh every second makes over ``--live`` seconds (at most a tenth of the time is spent);
4. held by a crawl that publishes ``status.json`` once a second: each read.

Each refresh figure is the median (and the longest) of ``--repeat`` refreshes; a first read is one
run. The holder children run ``Frontier`` in processes of their own.

    python benchmarks/bench_serve.py                # N = 1,000,000
    python benchmarks/bench_serve.py -n 100000 --results ''
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import benchresults

HERE = os.path.abspath(__file__)
CHUNK = 10_000


def url(i: int) -> str:
    return f"https://host{i % 1000}.example.com/catalog/{i // 1000}/item-{i}.html"


# ---------------------------------------------------------------------- children
def child_build(path: str, n: int) -> None:
    from diskfrontier import Frontier, Request

    with Frontier(path) as frontier:
        for start in range(0, n, CHUNK):
            frontier.push_many([Request(url(i), priority=-(i % 6)) for i in range(start, min(n, start + CHUNK))])
        for _ in range(n // 10):
            frontier.done(frontier.pop())
        for k in range(n // 100):
            frontier.fail(frontier.pop(), f"HTTP 503 Service Unavailable (attempt {k})")


def child_kill(path: str, n: int) -> None:
    from diskfrontier import Frontier

    frontier = Frontier(path)
    for _ in range(n // 10):
        frontier.pop()
    os.kill(os.getpid(), signal.SIGKILL)


def child_live(path: str, publish: str) -> None:
    """Hold the directory, pop and finish requests, and (publish=1) write status.json every second,
    until stdin closes."""
    import threading

    from diskfrontier import Frontier
    from diskfrontier.contract.snapshot import LATEST_FAILURES, snapshot
    from diskfrontier.files.atomic import write_json_atomic

    stop = threading.Event()
    with Frontier(path) as frontier:
        def work() -> None:
            while not stop.is_set():
                request = frontier.pop()
                if request is None:
                    return
                frontier.done(request)
                time.sleep(0.001)

        worker = threading.Thread(target=work)
        worker.start()
        print("ready", flush=True)
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
        while not stop.wait(1.0):
            if publish == "1":
                shot = snapshot(frontier.stats(), frontier.hosts(), frontier.failed()[-LATEST_FAILURES:],
                                frontier.next_ready(), source=path)
                write_json_atomic(os.path.join(path, "status.json"), shot)
        worker.join()


CHILDREN: dict[str, Callable[..., None]] = {
    "build": lambda path, n: child_build(path, int(n)),
    "kill": lambda path, n: child_kill(path, int(n)),
    "live": child_live,
}


def child(mode: str, *args: object, expect_rc: int = 0) -> None:
    done = subprocess.run([sys.executable, HERE, "--child", mode, *map(str, args)], capture_output=True, text=True,
                          check=False)
    if done.returncode != expect_rc:
        raise SystemExit(f"child {mode} exited {done.returncode}: {done.stderr[-2000:]}")


class Holder:
    """A child crawling the directory (and publishing status.json if asked) until stopped."""

    def __init__(self, path: str, publish: bool) -> None:
        self.proc = subprocess.Popen([sys.executable, HERE, "--child", "live", path, "1" if publish else "0"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit("the live child did not open the directory")

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(600)


# ---------------------------------------------------------------------- measuring
def timed(func: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = func()
    return time.perf_counter() - started, value


def refreshes(source: Any, repeat: int) -> dict[str, float]:
    """Median and longest of ``repeat`` reads of an unchanged source, in ms."""
    times = []
    for _ in range(repeat):
        took, reading = timed(source.read)
        assert not reading.reread or reading.origin == "status.json", reading.origin
        times.append(took * 1000)
    return {"median_ms": statistics.median(times), "max_ms": max(times)}


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def run(n: int, repeat: int, live: float, work: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from diskfrontier.live.sources import JobDirSource

    path = os.path.join(work, "job")
    say(f"building a job directory of {n:,} requests")
    build_s, _ = timed(lambda: child("build", path, n))
    figures: dict[str, Any] = {"n": n, "build_s": build_s,
                               "disk_bytes": sum(os.lstat(os.path.join(r, f)).st_size
                                                 for r, _d, fs in os.walk(path) for f in fs)}
    rows: list[list[Any]] = []

    def first_and_unchanged(state: str) -> None:
        source = JobDirSource(path)
        took, reading = timed(source.read)
        assert reading.reread
        again = refreshes(source, repeat)
        figures[state] = {"first_ms": took * 1000, **again}
        rows.append([state, "its files", took * 1000, again["median_ms"], again["max_ms"], None])
        say(f"{state}: first read {took * 1000:,.0f} ms, unchanged {again['median_ms']:.2f} ms")

    first_and_unchanged("clean, not held")

    for publish in (False, True):
        state = "held, status.json" if publish else "held, no status.json"
        holder = Holder(path, publish)
        try:
            time.sleep(1.5)  # a first status.json
            source = JobDirSource(path)
            reads = []
            full_reads = source.full_reads
            started = time.monotonic()
            while time.monotonic() - started < live:  # a refresh every second, as serve --interval 1
                took, reading = timed(source.read)
                reads.append(took * 1000)
                time.sleep(max(0.0, 1.0 - took))
            elapsed = time.monotonic() - started
            origin = reading.origin
            full = source.full_reads - full_reads
            busy = sum(reads) / 1000 / elapsed
        finally:
            holder.stop()
        figures[state] = {"median_ms": statistics.median(reads), "max_ms": max(reads), "refreshes": len(reads),
                          "full_reads": full, "busy_share": busy, "origin": origin}
        rows.append([state, "status.json" if origin == "status.json" else "its files",
                     None, statistics.median(reads), max(reads),
                     f"{full} full reads in {len(reads)} refreshes; {busy:.1%} of the time"])
        say(f"{state}: median {statistics.median(reads):,.1f} ms, {full} full reads of {len(reads)}, busy {busy:.1%}")

    say("killing a child that popped N/10")
    child("kill", path, n, expect_rc=-signal.SIGKILL)
    first_and_unchanged("killed, not held")

    table = benchresults.table(
        f"serve's refresh of a job directory of {n:,} requests (1,000 hosts, {n // 10:,} done, "
        f"{n // 100:,} failed)",
        [("state", None), ("read from", None), ("first read (ms)", "{:,.0f}"), ("refresh, median (ms)", "{:,.2f}"),
         ("refresh, longest (ms)", "{:,.1f}"), ("note", None)],
        rows,
        notes=["A refresh of a directory whose files did not change costs a few stat calls and the snapshot "
               "rebuilt from what the last read found; a changed one not held is read again in full.",
               "A held directory whose holder publishes no status.json is read from its files no sooner than 10 "
               "times the last read's duration after it; with status.json, serve reads that file only.",
               f"Live figures: a refresh every second for {live:g} s while a child pops and finishes requests; "
               f"the share of that window spent reading. After a full read of a held directory without "
               f"status.json none comes for ten times its duration, so over a long run the share stays under a "
               f"tenth (a short window that holds one full read shows more)."])
    return [table], figures


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        CHILDREN[sys.argv[2]](*sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=1_000_000, help="requests in the job directory")
    parser.add_argument("--repeat", type=int, default=20, help="refreshes of an unchanged directory")
    parser.add_argument("--live", type=float, default=20.0, help="seconds of refreshes beside a live crawl")
    parser.add_argument("--work", default=None, help="folder for the job directory (default: a temp folder)")
    benchresults.add_argument(parser, "bench_serve")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-serve-", dir=args.work)
    try:
        tables, figures = run(args.n, args.repeat, args.live, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for table in tables:
        print(f"\n{table['title']}")
        print(" | ".join(table["columns"]))
        for row in table["rows"]:
            print(" | ".join("-" if c is None else (f.format(c) if f and isinstance(c, (int, float)) else str(c))
                             for c, f in zip(row, table["formats"], strict=True)))
    benchresults.write(args.results, "bench_serve", vars(args), tables, figures)


if __name__ == "__main__":
    main()
