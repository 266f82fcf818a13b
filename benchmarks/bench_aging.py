"""A crawl that never stops: costs that follow the crawl's size, not its age.

For each size (pending requests P, cycles C), three job directories are made by child processes, side by
side in one run, each killed with SIGKILL at its end (no close):

* fresh: P requests pushed, nothing else;
* aged, before: P pushed, then C cycles (pop, done with a few in flight, push of a new URL) with
  ``maintenance=None``: no checkpoint, no compaction while it runs (what a job directory did before);
* aged, after: the same cycles with the default ``Maintenance()``: checkpoints and compactions in
  the background.

Then, on copies, each directory's recovery (the open after the kill, timed inside a process of its own),
``diskfrontier inspect`` and ``diskfrontier peek -n 20`` (whole commands), and its files less the seen
set (``requests.seen*``), also at each quarter of the cycles while they ran. The runs print the slowest
single push, pop and done and the cycle rate; the directory killed with no checkpoint gives the
recovery rate in journal records a second.

    python benchmarks/bench_aging.py               # P=10^5, C=10^6 (about 3 minutes)
    python benchmarks/bench_aging.py --full        # also P=10^6, C=10^7 (about 40 minutes)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import benchresults

HERE = os.path.dirname(os.path.abspath(__file__))
SEEN = ("requests.seen",)  # requests.seen, its sums and its saved index: the seen set


WORK = (".compact.", ".map.")  # what a compaction under way writes beside the old journal


def files_less_seen(job: str, *, work: bool = True) -> int:
    """Bytes of the job directory's files but the seen set's (and, without ``work``, a compaction's own)."""
    total = 0
    for root, _dirs, files in os.walk(job):
        if not work and any(part in root for part in WORK):
            continue
        for name in files:
            if root == job and (name.startswith(SEEN) or (not work and any(part in name for part in WORK))):
                continue
            total += os.lstat(os.path.join(root, name)).st_size
    return total


# ------------------------------------------------------------------ the child: one directory made, then killed
def child(job: str, pending: int, cycles: int, maintenance: bool) -> None:
    from diskfrontier import Frontier, Maintenance, Request

    frontier = Frontier(job, maintenance=Maintenance() if maintenance else None)
    n = 0
    while n < pending:
        batch = min(1000, pending - n)
        frontier.push_many(Request(f"https://h{(n + i) % 1000}.example/p/{n + i}") for i in range(batch))
        n += batch
    worst = {"push": 0.0, "pop": 0.0, "done": 0.0}
    over = {"push": 0, "pop": 0, "done": 0}
    ages = []
    inflight = []
    clock = time.perf_counter
    quarter = max(1, cycles // 4)
    started = clock()
    window_start, window_cycles, rates = started, 0, []
    for cycle in range(1, cycles + 1):
        a = clock()
        request = frontier.pop()
        b = clock()
        inflight.append(request)
        took_done = 0.0
        if len(inflight) > 4:
            c = clock()
            frontier.done(inflight.pop(0))
            took_done = clock() - c
        d = clock()
        frontier.push(Request(f"https://h{n % 1000}.example/p/{n}"))
        e = clock()
        n += 1
        for what, took in (("pop", b - a), ("done", took_done), ("push", e - d)):
            if took > worst[what]:
                worst[what] = took
            if took > 0.020:
                over[what] += 1
        window_cycles += 1
        if e - window_start >= 2.0:
            rates.append(window_cycles / (e - window_start))
            window_start, window_cycles = e, 0
        if cycle % quarter == 0:
            stats = frontier.stats()
            ages.append({"cycles": cycle, "files": files_less_seen(job), "files_out": files_less_seen(job, work=False),
                         "journal": stats["journal_bytes"],
                         "compactions": stats.get("compactions", 0), "checkpoints": stats.get("checkpoints", 0)})
    elapsed = clock() - started
    stats = frontier.stats()
    print(json.dumps({"elapsed": elapsed, "rate": cycles / elapsed if cycles else None,
                      "rate_median": statistics.median(rates) if rates else None, "worst": worst, "over": over,
                      "ages": ages,
                      "journal_records": frontier._state.pushes + frontier._state.dones,
                      "compactions": stats.get("compactions", 0), "checkpoints": stats.get("checkpoints", 0)}),
          flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # mid-run: no close


def make(job: str, pending: int, cycles: int, maintenance: bool) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", job, str(pending), str(cycles),
                           "on" if maintenance else "off"], capture_output=True, text=True, check=False)
    if done.returncode != -signal.SIGKILL or not done.stdout.strip():
        raise SystemExit(f"the child making {job} ended with {done.returncode}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ the measurements, on copies
SCAN = ("import sys, time\nfrom diskfrontier.jobdir.layout import Layout, read_meta, salt_of\n"
        "from diskfrontier.jobdir.replay import read_state\nsalt = salt_of(read_meta(Layout(sys.argv[1])))\n"
        "started = time.perf_counter()\nstate = read_state(sys.argv[1] + '/requests.urls', salt=salt, sizes=True,\n"
        "                   hosts=True, hold_after=time.time())\n"
        "print(time.perf_counter() - started, state.pushes + state.dones)\n")
OPEN = ("import sys, time\nfrom diskfrontier import Frontier\nstarted = time.perf_counter()\n"
        "f = Frontier(sys.argv[1], watch=False, maintenance=None)\nelapsed = time.perf_counter() - started\n"
        "print(elapsed, f.stats()['recovered_from'], len(f))\n")


def timed_copies(job: str, work: str, repeat: int) -> dict:
    recoveries, inspects, peeks, started_at = [], [], [], None
    script = shutil.which("diskfrontier") or "diskfrontier"
    for i in range(repeat):
        for what, out in (("open", recoveries), ("inspect", inspects), ("peek", peeks)):
            copy = os.path.join(work, f"copy-{what}-{i}")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(job, copy)
            os.sync()
            if what == "open":
                done = subprocess.run([sys.executable, "-c", OPEN, copy], capture_output=True, text=True, check=True)
                elapsed, started_at, _pending = done.stdout.split()
                out.append(float(elapsed))
            else:
                args = [script, "inspect", copy] if what == "inspect" else [script, "peek", copy, "-n", "20"]
                began = time.perf_counter()
                subprocess.run(args, capture_output=True, check=True)
                out.append(time.perf_counter() - began)
            shutil.rmtree(copy, ignore_errors=True)
    return {"recovery": statistics.median(recoveries), "inspect": statistics.median(inspects),
            "peek": statistics.median(peeks), "recovered_from": started_at}


def one_size(pending: int, cycles: int, work: str, repeat: int) -> dict:
    out = {}
    for name, count, upkeep in (("fresh", 0, True), ("before", cycles, False), ("after", cycles, True)):
        job = os.path.join(work, f"{name}-{pending}")
        shutil.rmtree(job, ignore_errors=True)
        print(f"  making {name} (P={pending:,}, C={count:,})...", file=sys.stderr, flush=True)
        made = make(job, pending, count, upkeep)
        made["files"] = files_less_seen(job)
        made["journal_bytes"] = os.path.getsize(os.path.join(job, "requests.urls"))
        if name == "before":  # the journal's scan alone, as a recovery from its start reads it (no seen set)
            scans = [subprocess.run([sys.executable, "-c", SCAN, job], capture_output=True, text=True,
                                    check=True).stdout.split() for _ in range(repeat)]
            made["scan_rate"] = statistics.median(int(n) / float(t) for t, n in scans)
        made.update(timed_copies(job, work, repeat))
        out[name] = made
        shutil.rmtree(job, ignore_errors=True)
    return out


# ------------------------------------------------------------------ the report
def verdict(value: float | None, limit: float, lower: bool = True) -> str:
    if value is None:
        return "not measured"
    met = value <= limit if lower else value >= limit
    if met:
        return "MET"
    return f"MISSED by {value / limit:.2f}x" if lower else f"MISSED ({value / limit:.0%} of the goal)"


def report(results: dict[tuple[int, int], dict], args: argparse.Namespace) -> None:
    tables = []
    for (pending, cycles), r in results.items():
        fresh, before, after = r["fresh"], r["before"], r["after"]
        mb = 1 << 20
        rows = [
            ["files less the seen set (MB)", fresh["files"] / mb, before["files"] / mb, after["files"] / mb,
             after["files"] / fresh["files"]],
            ["largest at any quarter (MB)", fresh["files"] / mb,
             max(a["files"] for a in before["ages"]) / mb, max(a["files"] for a in after["ages"]) / mb,
             max(a["files"] for a in after["ages"]) / fresh["files"]],
            ["largest at any quarter, less a compaction's own files (MB)", fresh["files"] / mb,
             max(a["files_out"] for a in before["ages"]) / mb, max(a["files_out"] for a in after["ages"]) / mb,
             max(a["files_out"] for a in after["ages"]) / fresh["files"]],
            ["recovery after the kill (s)", fresh["recovery"], before["recovery"], after["recovery"],
             after["recovery"] / fresh["recovery"]],
            ["diskfrontier inspect (s)", fresh["inspect"], before["inspect"], after["inspect"],
             after["inspect"] / fresh["inspect"]],
            ["diskfrontier peek -n 20 (s)", fresh["peek"], before["peek"], after["peek"],
             after["peek"] / fresh["peek"]],
        ]
        tables.append(benchresults.table(
            f"{pending:,} pending, {cycles:,} cycles: fresh, aged before (no upkeep), aged after (the default); "
            f"medians of {args.repeat}",
            [("figure", None), ("fresh", "{:,.2f}"), ("aged, before", "{:,.2f}"), ("aged, after", "{:,.2f}"),
             ("after / fresh", "{:.2f}x")], rows,
            notes=[f"after: {after['compactions']} compactions and {after['checkpoints']} checkpoints during the run; "
                   f"recovery read from byte {after['recovered_from']} (a checkpoint's state) on"]))
        worst_after = max(after["worst"].values())
        worst_before = max(before["worst"].values())
        records_per_s = before["journal_records"] / before["recovery"] if before["recovery"] else None
        goals = [
            ["recovery, aged / fresh", after["recovery"] / fresh["recovery"], "<= 2x",
             verdict(after["recovery"] / fresh["recovery"], 2)],
            ["recovery, aged (s)", after["recovery"], "<= 1 s" if pending <= 100_000 else "-",
             verdict(after["recovery"], 1.0) if pending <= 100_000 else "-"],
            ["inspect, aged / fresh", after["inspect"] / fresh["inspect"], "<= 2x",
             verdict(after["inspect"] / fresh["inspect"], 2)],
            ["peek -n 20, aged / fresh", after["peek"] / fresh["peek"], "<= 2x",
             verdict(after["peek"] / fresh["peek"], 2)],
            ["files less seen, aged / fresh, at every quarter",
             max(a["files"] for a in after["ages"] + [{"files": after["files"]}]) / fresh["files"], "<= 2x",
             verdict(max(a["files"] for a in after["ages"] + [{"files": after["files"]}]) / fresh["files"], 2)],
            ["slowest push, pop or done (ms), after", worst_after * 1000, "<= 20 ms", verdict(worst_after * 1000, 20)],
            ["slowest push, pop or done (ms), before", worst_before * 1000, "(shown)", "-"],
            ["calls over 20 ms, after / before", f"{sum(after['over'].values())} / {sum(before['over'].values())}",
             "-", "-"],
            ["cycle rate, after / before (medians of 2 s windows)",
             after["rate_median"] / before["rate_median"], ">= 0.9x",
             verdict(after["rate_median"] / before["rate_median"], 0.9, lower=False)],
            ["recovery with no checkpoint (journal records/s)", records_per_s, ">= 1,000,000",
             verdict(records_per_s, 1_000_000, lower=False)],
            ["the same, the journal's scan alone (records/s)", before["scan_rate"], ">= 1,000,000",
             verdict(before["scan_rate"], 1_000_000, lower=False)],
        ]
        tables.append(benchresults.table(
            f"goals at {pending:,} pending, {cycles:,} cycles",
            [("figure", None), ("measured", "{:,.2f}"), ("goal", None), ("status", None)], goals,
            notes=[f"cycle rates: before {before['rate_median']:,.0f}/s, after {after['rate_median']:,.0f}/s; "
                   f"the directory killed with no checkpoint held {before['journal_records']:,} journal records"]))
    for t in tables:
        print(f"\n{t['title']}")
        widths = [max(len(str(c)), 14) for c in t["columns"]]
        print("  ".join(f"{c:>{w}}" for c, w in zip(t["columns"], widths, strict=True)))
        for row in t["rows"]:
            cells = []
            for cell, fmt, w in zip(row, t["formats"], widths, strict=True):
                text = fmt.format(cell) if fmt and isinstance(cell, (int, float)) else str(cell)
                cells.append(f"{text:>{w}}")
            print("  ".join(cells))
        for note in t["notes"]:
            print(f"  {note}")
    benchresults.write(args.results, "bench_aging", vars(args), tables,
                       {f"{p}x{c}": r for (p, c), r in results.items()})


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        job, pending, cycles, upkeep = sys.argv[2:6]
        child(job, int(pending), int(cycles), upkeep == "on")
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="also 10^6 pending and 10^7 cycles")
    parser.add_argument("--pending", type=lambda s: int(float(s)), help="one size only: pending requests")
    parser.add_argument("--cycles", type=lambda s: int(float(s)), help="one size only: cycles")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement (medians)")
    parser.add_argument("--workdir", metavar="DIR", help="where to build (default: a temporary directory)")
    benchresults.add_argument(parser, "bench_aging")
    args = parser.parse_args()
    sizes = [(100_000, 1_000_000)] + ([(1_000_000, 10_000_000)] if args.full else [])
    if args.pending or args.cycles:
        sizes = [(args.pending or 100_000, args.cycles or 1_000_000)]
    work = args.workdir or tempfile.mkdtemp(prefix="bench-aging-")
    os.makedirs(work, exist_ok=True)
    results = {}
    try:
        for pending, cycles in sizes:
            print(f"P={pending:,}, C={cycles:,}", file=sys.stderr, flush=True)
            results[(pending, cycles)] = one_size(pending, cycles, work, args.repeat)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    report(results, args)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
