"""Clean open of a job directory with very many seen URLs (10^8 by default), generated.

Building a 10^8 directory by crawling it takes hours and ~15 GB; what a clean open reads
is the saved seen index, the queue files and the checkpoint, so this script generates a
directory in the state a long crawl reaches after a compaction: N seen fingerprints
(random 20-byte values, which is what sha1 fingerprints look like to the index) added with
the public ``Frontier.mark_seen``, and a modest number of pending requests pushed with
``push_many``. It then measures, each in a fresh process: ``Frontier(path)`` (time, peak
RSS against the RSS once open), ``diskfrontier inspect`` and ``diskfrontier peek -n 20``.

    python benchmarks/bench_open_seen.py                    # 10^8 seen, 10^5 pending
    python benchmarks/bench_open_seen.py --seen 1e7 --keep /tmp/big

It needs about 24 bytes of disk and ~40 bytes of memory per seen URL while generating
(10^8: ~4 GB of disk, ~4 GB of RAM), and takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import benchresults

MB = 1e6
BATCH = 1_000_000

CHILD_OPEN = """
import json, os, resource, sys, time
from diskfrontier import Frontier
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = rss()
t = time.perf_counter()
f = Frontier(sys.argv[1])
took = time.perf_counter() - t
after, peak = rss(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
stats = f.stats()
f.close()
print(json.dumps({"open_s": took, "rss_before": before, "rss_open": after, "peak": peak,
                  "seen": stats["seen"], "pending": stats["pending"], "recovery": stats["recovery"]}))
"""


def generate(path: str, seen: int, pending: int) -> float:
    from diskfrontier import Frontier, Request

    started = time.perf_counter()
    with Frontier(path) as frontier:
        for start in range(0, pending, 10_000):
            frontier.push_many(Request(f"https://host{i % 1000}.example.com/item-{i}.html", priority=-(i % 6))
                               for i in range(start, min(pending, start + 10_000)))
        left = seen - pending
        while left > 0:
            n = min(BATCH, left)
            raw = os.urandom(20 * n)
            frontier.mark_seen(raw[i:i + 20] for i in range(0, len(raw), 20))
            left -= n
            print(f"  {seen - left:,} seen, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return time.perf_counter() - started


def timed(argv: list[str]) -> tuple[float, int, str]:
    wrapper = ("import resource, subprocess, sys, time, json; t = time.perf_counter(); "
               "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "print(json.dumps([time.perf_counter() - t, "
               "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, p.stdout[-2000:], p.returncode]))")
    run = subprocess.run([sys.executable, "-c", wrapper, *argv], capture_output=True, text=True, check=True)
    wall, peak, out, rc = json.loads(run.stdout)
    if rc != 0:
        raise SystemExit(f"{argv} failed: {out}")
    return wall, peak, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seen", type=lambda s: int(float(s)), default=10**8)
    parser.add_argument("--pending", type=lambda s: int(float(s)), default=10**5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="generate in DIR and keep it")
    parser.add_argument("--generate", nargs=3, help=argparse.SUPPRESS)
    benchresults.add_argument(parser, "bench_open_seen")
    args = parser.parse_args()
    if args.generate:
        where, seen, pending = args.generate
        print(f"generated in {generate(where, int(seen), int(pending)):.0f} s", file=sys.stderr)
        return
    work = args.keep or tempfile.mkdtemp(prefix="dfopen-")
    path = os.path.join(work, f"seen-{args.seen}")
    try:
        if not os.path.exists(path):  # in a process of its own: a child of a big process inherits its maxrss
            print(f"generating {args.seen:,} seen, {args.pending:,} pending in {path}", file=sys.stderr)
            command = [sys.executable, __file__, "--generate", path, str(args.seen), str(args.pending)]
            subprocess.run(command, check=True)
        disk = sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names)
        opens = [json.loads(subprocess.run([sys.executable, "-c", CHILD_OPEN, path],
                                           capture_output=True, text=True, check=True).stdout)
                 for _ in range(args.repeat)]
        assert all(o["recovery"] == "clean" and o["seen"] == args.seen for o in opens), opens
        inspect = [timed(["diskfrontier", "inspect", path]) for _ in range(args.repeat)]
        peek = [timed(["diskfrontier", "peek", path, "-n", "20"]) for _ in range(args.repeat)]
        start = [timed(["diskfrontier", "--version"]) for _ in range(args.repeat)]
        med = statistics.median
        o = sorted(opens, key=lambda r: r["open_s"])[len(opens) // 2]
        print(f"clean open of a job directory with {args.seen:,} seen and {args.pending:,} pending "
              f"({disk / 1e9:.2f} GB on disk); medians of {args.repeat}")
        print(f"  Frontier(path)           {med(r['open_s'] for r in opens):7.2f} s   target <= 0.5 s at 10^7")
        print(f"  peak RSS / RSS once open {o['peak'] / o['rss_open']:7.2f}x  ({o['peak'] / MB:,.0f} MB / "
              f"{o['rss_open'] / MB:,.0f} MB; target <= 1.2x)")
        print(f"  RSS per seen fingerprint {(o['rss_open'] - o['rss_before']) / args.seen:7.1f} B")
        for name, runs, note in (("inspect", inspect, ""), ("peek -n 20", peek, ""),
                                 ("--version", start, "   (interpreter start and imports, in both rows above)")):
            print(f"  diskfrontier {name:<11} {med(w for w, _, _ in runs):7.2f} s   "
                  f"{med(p for _, p, _ in runs) / MB:,.0f} MB{note}")
        rows = [["Frontier(path)", f"{med(r['open_s'] for r in opens):.2f} s", "<= 0.5 s at 10^7"],
                ["peak RSS / RSS once open", f"{o['peak'] / o['rss_open']:.2f}x ({o['peak'] / MB:,.0f} MB / "
                 f"{o['rss_open'] / MB:,.0f} MB)", "<= 1.2x"],
                ["RSS per seen fingerprint", f"{(o['rss_open'] - o['rss_before']) / args.seen:.1f} B", ""]]
        rows += [[f"diskfrontier {name}", f"{med(w for w, _, _ in runs):.2f} s, "
                  f"{med(p for _, p, _ in runs) / MB:,.0f} MB", note.strip(" ()")]
                 for name, runs, note in (("inspect", inspect, ""), ("peek -n 20", peek, ""),
                                          ("--version", start, "interpreter start and imports, in both rows above"))]
        benchresults.write(args.results, "bench_open_seen", vars(args), [benchresults.table(
            f"clean open of a job directory with {args.seen:,} seen and {args.pending:,} pending "
            f"({disk / 1e9:.2f} GB on disk); medians of {args.repeat}",
            [("figure", None), ("measured", None), ("target", None)], rows)],
            {"disk": disk, "opens": opens,
             "commands": {name: [{"wall": w, "peak": p} for w, p, _ in runs]
                          for name, runs in (("inspect", inspect), ("peek", peek), ("version", start))}})
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
