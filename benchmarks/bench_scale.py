"""Scale benchmark: job directories of 10^6, 10^7 (and more) URLs, and the commands beside them.

For each size N it builds job directories with ``Frontier.push_many`` (batches of 10,000
new URLs, each followed by 1,000 of them again as duplicates) on the workload of
``bench_frontier.py`` (URLs over 1,000 hosts, priorities 0..-5), pops and marks done a
fraction of them, and then measures, each in a process of its own (wall time, and peak
RSS from ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` in a small wrapper process):

* a clean open (time, peak RSS against the RSS once open, RSS per seen fingerprint);
* an open after SIGKILL: a child opens the directory, pushes 10,000 requests, pops 1,000
  and kills itself with SIGKILL; a fresh process reopens it (requests re-queued a second);
* ``diskfrontier inspect`` and ``peek -n 20`` on the clean and on the killed directory,
  ``diskfrontier verify`` and ``diskfrontier export`` (to /dev/null);
* the longest single ``push()`` call during N per-call pushes, and their throughput
  against ``push_many``; ``close()`` once three quarters of the requests are done;
* pop+done throughput of a LIFO and a FIFO directory (the first 10% of N);
* with --scrapy, Scrapy's ``Scheduler`` with JOBDIR on the same workload (at sizes up
  to --scrapy-max): enqueue/s, next_request/s, open time and RSS.

    pip install -e '.[bench]'
    python benchmarks/bench_scale.py                              # --sizes 1e6
    python benchmarks/bench_scale.py --sizes 1e6,1e7 --scrapy     # Scrapy at 10^6 only
    python benchmarks/bench_scale.py --sizes 1e8 --keep /big/disk  # keep the directories

Command timings are wall times of a whole process (interpreter start and imports
included): the ``diskfrontier --version`` row is that constant, and "above startup"
figures subtract its peak RSS. Free disk is checked before each size; a size whose
estimated need does not fit is skipped, saying so. Linux only (/proc, ru_maxrss in KiB).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import benchresults

CHUNK = 10_000  # new URLs per push_many batch; each batch is followed by CHUNK // 10 duplicates
KILL_PUSHES = 10_000  # pushed by the child killed with SIGKILL
KILL_IN_FLIGHT = 1_000  # popped (in flight) by it when it is killed
TIMED_POP = 0.10  # fraction of N popped and marked done, timed
DONE_FOR_CLOSE = 0.75  # fraction of N done before the close() that is timed
DEFAULT_BYTES_PER_URL = 260  # disk of one job directory per URL before a size has been measured
MB = 1e6

WRAPPER = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"rc": p.returncode, "wall": wall, "peak": peak,
                  "stdout": p.stdout.decode(errors="replace")[-8000:],
                  "stderr": p.stderr.decode(errors="replace")[-4000:]}))
"""


# ---------------------------------------------------------------- the workload
def url(i: int) -> str:
    return f"https://host{i % 1000}.example.com/catalog/{i // 1000}/item-{i}.html?ref=list&page={i % 50}"


def priority(i: int) -> int:
    return -(i % 6)


def rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def dir_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            total += os.lstat(os.path.join(root, name)).st_size
    return total


# ---------------------------------------------------------------- children (each run in a process of its own)
def child_build(path: str, n: int, order: str, mode: str, done_frac: float) -> dict:
    """Push N URLs (+10% duplicates) with push_many or per-call push, pop+done some, close."""
    from diskfrontier import Frontier, Request

    pc = time.perf_counter
    started = pc()
    frontier = Frontier(path, order=order)
    push_s = worst = 0.0
    offered = slow = 0
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        batch = [Request(url(i), priority=priority(i)) for i in range(start, stop)]
        dups = [Request(url(i), priority=priority(i)) for i in range(start, stop, 10)]
        offered += len(batch) + len(dups)
        if mode == "many":
            for group in (batch, dups):
                t0 = pc()
                frontier.push_many(group)
                dt = pc() - t0
                push_s += dt
                worst = max(worst, dt)
        else:
            push = frontier.push
            for request in batch + dups:
                t0 = pc()
                push(request)
                dt = pc() - t0
                push_s += dt
                if dt > worst:
                    worst = dt
                if dt > 0.05:
                    slow += 1
    timed = int(n * TIMED_POP)
    pop, done = frontier.pop, frontier.done
    t0 = pc()
    for _ in range(timed):
        done(pop())
    pop_s = pc() - t0
    for _ in range(max(0, int(n * done_frac) - timed)):
        done(pop())
    pending, seen = len(frontier), frontier.stats()["seen"]
    t0 = pc()
    frontier.close()
    close_s = pc() - t0
    return {"push_rate": offered / push_s, "worst_ms": worst * 1000, "slow_calls": slow, "offered": offered,
            "pop_rate": timed / pop_s if pop_s else 0.0, "close_s": close_s, "pending": pending, "seen": seen,
            "disk": dir_bytes(path), "journal": os.path.getsize(os.path.join(path, "requests.urls")),
            "seconds": pc() - started}


def child_open(path: str) -> dict:
    """Open (time, RSS before/after, peak so far), then close."""
    import gc

    from diskfrontier import Frontier

    gc.collect()
    before = rss_now()
    t0 = time.perf_counter()
    frontier = Frontier(path)
    open_s = time.perf_counter() - t0
    after, peak = rss_now(), rss_peak()
    stats = frontier.stats()
    t0 = time.perf_counter()
    frontier.close()
    return {"open_s": open_s, "rss_before": before, "rss_open": after, "peak_open": peak,
            "pending": stats["pending"], "seen": stats["seen"], "recovery": stats["recovery"],
            "close_s": time.perf_counter() - t0}


def child_kill(path: str, n: int) -> dict:
    """Open, push KILL_PUSHES new URLs, pop KILL_IN_FLIGHT, and die by SIGKILL."""
    import signal

    from diskfrontier import Frontier, Request

    frontier = Frontier(path)
    for i in range(n, n + KILL_PUSHES):
        frontier.push(Request(url(i), priority=priority(i)))
    for _ in range(KILL_IN_FLIGHT):
        frontier.pop()
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    return {}


def _scrapy_scheduler(jobdir: str) -> Callable[[], Any]:
    """A function opening Scrapy's Scheduler on ``jobdir`` (scrapy is imported in the children only)."""
    from scrapy import Spider
    from scrapy.core.scheduler import Scheduler
    from scrapy.utils.test import get_crawler

    class BenchSpider(Spider):
        name = "bench"

    settings = {"JOBDIR": jobdir, "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
                "LOG_ENABLED": False}
    crawler = get_crawler(BenchSpider, settings)
    crawler.spider = BenchSpider.from_crawler(crawler)
    return lambda: _open_scheduler(Scheduler, crawler)


def _open_scheduler(scheduler_cls: Any, crawler: Any) -> Any:
    scheduler = scheduler_cls.from_crawler(crawler)
    scheduler.open(crawler.spider)
    return scheduler


def child_scrapy_build(jobdir: str, n: int) -> dict:
    """Scrapy's Scheduler with JOBDIR: enqueue N (+10% duplicates) per call, next_request 10% of N."""
    from scrapy import Request as ScrapyRequest

    pc = time.perf_counter
    scheduler = _scrapy_scheduler(jobdir)()
    push_s = worst = 0.0
    offered = 0
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        batch = [ScrapyRequest(url(i), priority=priority(i)) for i in range(start, stop)]
        batch += [ScrapyRequest(url(i), priority=priority(i)) for i in range(start, stop, 10)]
        offered += len(batch)
        enqueue = scheduler.enqueue_request
        for request in batch:
            t0 = pc()
            enqueue(request)
            dt = pc() - t0
            push_s += dt
            if dt > worst:
                worst = dt
    timed = int(n * TIMED_POP)
    t0 = pc()
    for _ in range(timed):
        scheduler.next_request()
    pop_s = pc() - t0
    pending = len(scheduler)
    t0 = pc()
    scheduler.close("shutdown")
    return {"push_rate": offered / push_s, "worst_ms": worst * 1000, "pop_rate": timed / pop_s,
            "close_s": pc() - t0, "pending": pending, "disk": dir_bytes(jobdir)}


def child_scrapy_open(jobdir: str) -> dict:
    import gc

    opener = _scrapy_scheduler(jobdir)
    gc.collect()
    before = rss_now()
    t0 = time.perf_counter()
    scheduler = opener()
    open_s = time.perf_counter() - t0
    after, peak = rss_now(), rss_peak()
    pending = len(scheduler)
    seen = len(scheduler.df.fingerprints)
    scheduler.close("shutdown")
    return {"open_s": open_s, "rss_before": before, "rss_open": after, "peak_open": peak, "pending": pending,
            "seen": seen}


CHILDREN: dict[str, Callable[..., dict]] = {
    "build": lambda path, n, order, mode, frac: child_build(path, int(n), order, mode, float(frac)),
    "open": child_open,
    "kill": lambda path, n: child_kill(path, int(n)),
    "scrapy-build": lambda path, n: child_scrapy_build(path, int(n)),
    "scrapy-open": child_scrapy_open,
}


# ---------------------------------------------------------------- measuring from the parent
class ChildFailed(RuntimeError):
    pass


def measure(cmd: list[str], expect_rc: int | None = 0) -> dict:
    """Run ``cmd`` under the wrapper: its wall time, peak RSS (bytes), exit code and output."""
    out = subprocess.run([sys.executable, "-c", WRAPPER, *cmd],
                         capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if expect_rc is not None and result["rc"] != expect_rc:
        raise ChildFailed(f"{' '.join(cmd[:6])}... exited {result['rc']}:\n{result['stderr']}")
    return result


def child(mode: str, *args: object, expect_rc: int | None = 0) -> dict:
    result = measure([sys.executable, os.path.abspath(__file__), "--child", mode, *map(str, args)], expect_rc)
    data = json.loads(result["stdout"].strip().splitlines()[-1]) if result["stdout"].strip() else {}
    return {**data, "wall": result["wall"], "peak": result["peak"]}


def cli(*args: str, expect_rc: int | None = 0) -> dict:
    return measure([sys.executable, "-m", "diskfrontier", *args], expect_rc)


def median_run(fn: Callable[[], dict], repeat: int) -> dict:
    """Each numeric field's median over ``repeat`` runs."""
    runs = [fn() for _ in range(repeat)]
    return {k: statistics.median(r[k] for r in runs) if isinstance(v, (int, float)) else v
            for k, v in runs[0].items()}


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def label(n: int) -> str:
    k = len(str(n)) - 1
    return f"10^{k}" if n == 10**k else f"{n:,}"


@dataclass
class Plan:
    bytes_per_url: float = DEFAULT_BYTES_PER_URL  # one job directory, per URL
    seconds_per_url: float | None = None  # the whole run of one size, per URL


def run_size(n: int, work: str, args: argparse.Namespace, plan: Plan) -> dict | None:
    lbl = label(n)
    dirs = {"lifo": os.path.join(work, f"lifo-{n}"), "fifo": os.path.join(work, f"fifo-{n}"),
            "push": os.path.join(work, f"push-{n}"), "scrapy": os.path.join(work, f"scrapy-{n}")}
    with_scrapy = args.scrapy and n <= args.scrapy_max
    alive = 3 if args.keep else 2  # the LIFO directory stays; the others are removed after use unless --keep
    need = plan.bytes_per_url * n * alive + (400 * n if with_scrapy else 0)
    free = shutil.disk_usage(work).free
    guess = f", about {plan.seconds_per_url * n / 60:.0f} min" if plan.seconds_per_url else ""
    if need * 1.1 > free:
        say(f"N={lbl}: SKIPPED: needs about {need / 1e9:.1f} GB of disk{guess}, {free / 1e9:.1f} GB free in {work}")
        return None
    say(f"N={lbl}: estimated {need / 1e9:.1f} GB of disk at the peak ({free / 1e9:.1f} GB free){guess}")
    started = time.perf_counter()
    r: dict = {}

    say(f"N={lbl}: building a LIFO directory with push_many")
    b = child("build", dirs["lifo"], n, "lifo", "many", TIMED_POP)
    r.update(build_s=b["wall"], build_peak=b["peak"] / MB, disk_lifo=b["disk"], journal=b["journal"],
             push_many_rate=b["push_rate"], push_many_worst_ms=b["worst_ms"], pop_lifo=b["pop_rate"])
    r["disk_per_url"] = b["disk"] / n
    say(f"N={lbl}: built in {b['wall']:.1f} s, {b['disk'] / 1e9:.2f} GB; measuring open and the commands")

    base = median_run(lambda: cli("--version"), args.repeat)
    r.update(startup_s=base["wall"], startup_mb=base["peak"] / MB)
    o = median_run(lambda: child("open", dirs["lifo"]), args.repeat)
    assert o["recovery"] == "clean", o
    r.update(open_s=o["open_s"], open_peak=o["peak_open"] / MB, open_steady=o["rss_open"] / MB,
             open_ratio=o["peak_open"] / o["rss_open"], rss_per_fp=(o["rss_open"] - o["rss_before"]) / o["seen"],
             seen=o["seen"], pending=o["pending"])

    def command(key: str, *argv: str) -> None:
        m = median_run(lambda: cli(*argv), args.repeat)
        r[f"{key}_s"], r[f"{key}_mb"] = m["wall"], m["peak"] / MB

    command("inspect_clean", "inspect", dirs["lifo"])
    command("peek_clean", "peek", dirs["lifo"], "-n", "20")
    if "verify" not in args.skip:
        v = cli("verify", dirs["lifo"])
        r.update(verify_s=v["wall"], verify_mb=v["peak"] / MB)
    if "export" not in args.skip:
        e = cli("export", dirs["lifo"], "-o", os.devnull)
        r.update(export_s=e["wall"], export_mb=e["peak"] / MB, export_rate=o["pending"] / e["wall"])

    say(f"N={lbl}: SIGKILL, then inspect/peek on the killed directory and the recovery")
    k = child("kill", dirs["lifo"], n, expect_rc=-9)
    r["kill_child_s"] = k["wall"]
    state = json.loads(cli("inspect", dirs["lifo"], "--json")["stdout"])
    assert state["state"].startswith("needs recovery"), state["state"]
    command("inspect_dirty", "inspect", dirs["lifo"])
    command("peek_dirty", "peek", dirs["lifo"], "-n", "20")
    r["inspect_dirty_b"] = (r["inspect_dirty_mb"] - r["startup_mb"]) * MB / state["pending"]
    r["peek_dirty_b"] = (r["peek_dirty_mb"] - r["startup_mb"]) * MB / state["pending"]
    rec = child("open", dirs["lifo"])
    assert rec["recovery"] == "rebuilt", rec
    r.update(recover_s=rec["open_s"], requeued=rec["pending"], requeue_rate=rec["pending"] / rec["open_s"],
             recover_mb=rec["peak"] / MB)

    if "fifo" not in args.skip:
        say(f"N={lbl}: building a FIFO directory with push_many")
        f = child("build", dirs["fifo"], n, "fifo", "many", TIMED_POP)
        r.update(build_fifo_s=f["wall"], disk_fifo=f["disk"], pop_fifo=f["pop_rate"])
        r["fifo_vs_lifo"] = f["pop_rate"] / r["pop_lifo"]
        if not args.keep:
            shutil.rmtree(dirs["fifo"], ignore_errors=True)

    if "push" not in args.skip:
        say(f"N={lbl}: {n:,} per-call push(), then pop+done {DONE_FOR_CLOSE:.0%} and close()")
        p = child("build", dirs["push"], n, "lifo", "each", DONE_FOR_CLOSE)
        r.update(build_push_s=p["wall"], disk_push=p["disk"], push_rate=p["push_rate"], push_worst_ms=p["worst_ms"],
                 push_slow=p["slow_calls"], close_s=p["close_s"], close_journal=p["journal"])
        r["many_vs_each"] = r["push_many_rate"] / p["push_rate"]
        if not args.keep:
            shutil.rmtree(dirs["push"], ignore_errors=True)

    if with_scrapy and "push" in args.skip:
        say(f"N={lbl}: Scrapy skipped (its push ratio needs the per-call push run, skipped with --skip push)")
    elif with_scrapy:
        say(f"N={lbl}: Scrapy's Scheduler with JOBDIR")
        s = child("scrapy-build", dirs["scrapy"], n)
        so = child("scrapy-open", dirs["scrapy"])
        r.update(scrapy_build_s=s["wall"], scrapy_push=s["push_rate"], scrapy_pop=s["pop_rate"],
                 scrapy_disk=s["disk"], scrapy_open_s=so["open_s"], scrapy_open_peak=so["peak_open"] / MB,
                 scrapy_open_steady=so["rss_open"] / MB, scrapy_rss_per_fp=(so["rss_open"] - so["rss_before"]) / n,
                 scrapy_worst_ms=s["worst_ms"])
        r["vs_scrapy_push"] = r["push_rate"] / s["push_rate"]
        r["vs_scrapy_pop"] = r["pop_lifo"] / s["pop_rate"]
        if not args.keep:
            shutil.rmtree(dirs["scrapy"], ignore_errors=True)
    if not args.keep:
        shutil.rmtree(dirs["lifo"], ignore_errors=True)
    r["total_s"] = time.perf_counter() - started
    plan.bytes_per_url = max(r.get(key, 0) for key in ("disk_lifo", "disk_fifo", "disk_push")) / n
    plan.seconds_per_url = r["total_s"] / n
    say(f"N={lbl}: done in {r['total_s'] / 60:.1f} min")
    return r


# ---------------------------------------------------------------- the report
def _s(v: float) -> str:
    return f"{v:.3f} s" if v < 10 else f"{v:,.1f} s"


def _ms(v: float) -> str:
    return f"{v:.1f} ms"


def _mb(v: float) -> str:
    return f"{v:,.1f} MB"


def _rate(v: float) -> str:
    return f"{v:,.0f}/s"


def _x(v: float) -> str:
    return f"{v:.2f}x"


def _b(v: float) -> str:
    return f"{v:,.1f} B"


def _n(v: float) -> str:
    return f"{v:,.0f}"


@dataclass
class Row:
    key: str
    title: str
    fmt: Callable[[float], str]
    target: str = ""
    check: Callable[[int, float], bool] | None = None
    from_n: int = 0  # the target applies at sizes from this one up


ROWS = [
    Row("open_s", "clean open: time", _s, "<= 0.5 s at 10^7", lambda n, v: v <= 0.5, 10**7),
    Row("open_steady", "clean open: RSS once open", _mb),
    Row("open_peak", "clean open: peak RSS", _mb),
    Row("open_ratio", "clean open: peak / steady RSS", _x, "<= 1.2x", lambda n, v: v <= 1.2),
    Row("rss_per_fp", "RSS per seen fingerprint (open)", _b, "<= 24 B at 10^6, <= 16 B at 10^7",
        lambda n, v: v <= (16 if n >= 10**7 else 24), 10**6),
    Row("requeued", "after SIGKILL: requests re-queued", _n),
    Row("recover_s", "after SIGKILL: open (rebuild) time", _s),
    Row("requeue_rate", "after SIGKILL: re-queued per second", _rate, ">= 500,000/s at 10^7",
        lambda n, v: v >= 500_000, 10**7),
    Row("recover_mb", "after SIGKILL: peak RSS of the reopen", _mb),
    Row("startup_s", "diskfrontier --version (startup): time", _s),
    Row("startup_mb", "diskfrontier --version (startup): RSS", _mb),
    Row("inspect_clean_s", "inspect, clean: time", _s, "< 0.3 s at 10^7", lambda n, v: v < 0.3, 10**7),
    Row("inspect_clean_mb", "inspect, clean: peak RSS", _mb),
    Row("inspect_dirty_s", "inspect, after SIGKILL: time", _s),
    Row("inspect_dirty_mb", "inspect, after SIGKILL: peak RSS", _mb),
    Row("inspect_dirty_b", "inspect, after SIGKILL: B/pending above startup", _b, "<= 16 B",
        lambda n, v: v <= 16),
    Row("peek_clean_s", "peek -n 20, clean: time", _s),
    Row("peek_clean_mb", "peek -n 20, clean: peak RSS", _mb),
    Row("peek_dirty_s", "peek -n 20, after SIGKILL: time", _s),
    Row("peek_dirty_mb", "peek -n 20, after SIGKILL: peak RSS", _mb),
    Row("peek_dirty_b", "peek -n 20, after SIGKILL: B/pending above startup", _b),
    Row("verify_s", "verify: time", _s),
    Row("verify_mb", "verify: peak RSS", _mb, "<= 300 MB at 10^7", lambda n, v: v <= 300, 10**7),
    Row("export_s", "export (to /dev/null): time", _s),
    Row("export_rate", "export: pending requests per second", _rate),
    Row("close_s", f"close() with {DONE_FOR_CLOSE:.0%} of N done: time", _s),
    Row("push_worst_ms", "longest single push() of N", _ms, "<= 50 ms", lambda n, v: v <= 50),
    Row("push_slow", "push() calls over 50 ms", _n),
    Row("push_many_worst_ms", "longest push_many() of 10,000", _ms),
    Row("push_rate", "push() per call: requests/s", _rate),
    Row("push_many_rate", "push_many(10,000): requests/s", _rate),
    Row("many_vs_each", "push_many / push throughput", _x, ">= 1.5x", lambda n, v: v >= 1.5),
    Row("pop_lifo", "pop+done/s, LIFO", _rate),
    Row("pop_fifo", "pop+done/s, FIFO", _rate),
    Row("fifo_vs_lifo", "pop+done FIFO / LIFO", _x, "within 10%", lambda n, v: abs(v - 1) <= 0.10),
    Row("scrapy_push", "Scrapy JOBDIR: enqueue_request/s", _rate),
    Row("scrapy_pop", "Scrapy JOBDIR: next_request/s", _rate),
    Row("vs_scrapy_push", "push/s: diskfrontier / Scrapy", _x, ">= 6x", lambda n, v: v >= 6),
    Row("vs_scrapy_pop", "pop+done/s: diskfrontier / Scrapy pop", _x, ">= 6x", lambda n, v: v >= 6),
    Row("scrapy_open_s", "Scrapy JOBDIR: open time", _s),
    Row("scrapy_open_steady", "Scrapy JOBDIR: RSS once open", _mb),
    Row("scrapy_open_peak", "Scrapy JOBDIR: peak RSS at open", _mb),
    Row("scrapy_rss_per_fp", "Scrapy JOBDIR: RSS per seen fingerprint", _b),
]


def met(row: Row, results: dict[int, dict]) -> str:
    if row.check is None:
        return ""
    measured = [n for n in sorted(results) if row.key in results[n]]
    if not measured:
        return "not measured"
    applicable = [n for n in measured if n >= row.from_n]
    if applicable:
        bad = [label(n) for n in applicable if not row.check(n, results[n][row.key])]
        return "yes" if not bad else "NO" if len(bad) == len(applicable) else f"NO at {', '.join(bad)}"
    n = measured[-1]
    return f"{'yes' if row.check(n, results[n][row.key]) else 'NO'} at {label(n)} ({label(row.from_n)} not run)"


def report(results: dict[int, dict], skipped: list[str], args: argparse.Namespace, elapsed: float, free: int) -> None:
    sizes = sorted(results)
    cols = [f"N={label(n)}" for n in sizes]
    head = ["figure", *cols, "target", "met?"]
    lines = []
    for row in ROWS:
        if not any(row.key in results[n] for n in sizes):
            continue
        values = [row.fmt(results[n][row.key]) if row.key in results[n] else "-" for n in sizes]
        lines.append([row.title, *values, row.target, met(row, results)])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines, strict=True)]

    def show(cells: list[str]) -> str:
        return " | ".join(c.ljust(w) if i in (0, len(cells) - 2, len(cells) - 1) else c.rjust(w)
                          for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    print(f"\nworkload: N unique URLs over 1,000 hosts, priorities 0..-5, +10% duplicates; push_many in batches "
          f"of {CHUNK:,}; {TIMED_POP:.0%} of N popped+done (timed); medians of {args.repeat} for open, inspect, "
          f"peek; command times are whole processes")
    print(show(head))
    print("-+-".join("-" * w for w in widths))
    for cells in lines:
        print(show(cells))

    for small, big in pairwise(sizes):
        print(f"\nscaling N={label(small)} -> N={label(big)} ({big / small:g}x N): ratio of each figure")
        for row in ROWS:
            if row.key in results[small] and row.key in results[big] and results[small][row.key]:
                print(f"  {row.title:<52} {results[big][row.key] / results[small][row.key]:>8.2f}x")

    print("\nbuild: disk and time")
    for n in sizes:
        r = results[n]
        parts = [f"LIFO directory {r['disk_lifo'] / 1e9:.2f} GB ({r['disk_per_url']:.0f} B/URL, journal "
                 f"{r['journal'] / 1e9:.2f} GB) built in {r['build_s']:.1f} s (peak RSS {r['build_peak']:.0f} MB)"]
        if "disk_fifo" in r:
            parts.append(f"FIFO {r['disk_fifo'] / 1e9:.2f} GB in {r['build_fifo_s']:.1f} s")
        if "disk_push" in r:
            parts.append(f"per-call push {r['disk_push'] / 1e9:.2f} GB in {r['build_push_s']:.1f} s")
        if "scrapy_disk" in r:
            parts.append(f"Scrapy JOBDIR {r['scrapy_disk'] / 1e9:.2f} GB in {r['scrapy_build_s']:.1f} s")
        parts.append(f"whole size {r['total_s'] / 60:.1f} min")
        print(f"  N={label(n)}: " + "; ".join(parts))
    for note in skipped:
        print(f"  {note}")
    if sizes:
        n = sizes[-1]
        r = results[n]
        per_url = max(r.get(key, 0) for key in ("disk_lifo", "disk_fifo", "disk_push")) / n
        big = next((b for b in (10**8, 10**9, 10**10) if b > n), 0)
        if big:
            print(f"  N={label(big)} (extrapolated linearly from N={label(n)}): about {per_url * big / 1e9:,.0f} GB a "
                  f"directory ({2 * per_url * big / 1e9:,.0f} GB at the peak of a run without --keep); its build "
                  f"with push_many about {r['build_s'] * big / n / 60:,.0f} min, the whole run of this script about "
                  f"{r['total_s'] * big / n / 3600:,.1f} h; {free / 1e9:,.0f} GB free now")
    print(f"  total run time {elapsed / 60:.1f} min")


def write_results(results: dict[int, dict], skipped: list[str], args: argparse.Namespace) -> None:
    """The figure table and the scaling ratios ``report`` prints, as data (benchmarks/results/bench_scale.json)."""
    sizes = sorted(results)
    rows = [[row.title, *[row.fmt(results[n][row.key]) if row.key in results[n] else None for n in sizes],
             row.target, met(row, results)]
            for row in ROWS if any(row.key in results[n] for n in sizes)]
    tables = [benchresults.table(
        f"N unique URLs over 1,000 hosts, priorities 0..-5, +10% duplicates; push_many in batches of {CHUNK:,}; "
        f"{TIMED_POP:.0%} of N popped+done (timed); medians of {args.repeat} for open, inspect, peek",
        [("figure", None), *[(f"N={label(n)}", None) for n in sizes], ("target", None), ("met?", None)], rows,
        ["Command times are whole processes, interpreter start and imports included.", *skipped])]
    for small, big in pairwise(sizes):
        tables.append(benchresults.table(
            f"scaling N={label(small)} -> N={label(big)} ({big / small:g}x N): ratio of each figure",
            [("figure", None), ("ratio", "{:.2f}x")],
            [[row.title, results[big][row.key] / results[small][row.key]] for row in ROWS
             if row.key in results[small] and row.key in results[big] and results[small][row.key]]))
    benchresults.write(args.results, "bench_scale", vars(args), tables,
                       {"sizes": {str(n): results[n] for n in sizes}, "skipped": skipped})


def parse_sizes(text: str) -> list[int]:
    return sorted({int(float(s)) for s in text.split(",") if s.strip()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=parse_sizes, default=[10**6], help="comma-separated N, e.g. 1e6,1e7")
    parser.add_argument("--scrapy", action="store_true", help="also run Scrapy's Scheduler with JOBDIR")
    parser.add_argument("--scrapy-max", type=lambda s: int(float(s)), default=10**6,
                        help="largest N for Scrapy (default 1e6)")
    parser.add_argument("--keep", metavar="DIR", help="build in DIR and keep the job directories")
    parser.add_argument("--workdir", metavar="DIR", help="build in DIR (default: a temporary directory)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of open, inspect and peek (medians)")
    parser.add_argument("--skip", type=lambda s: set(filter(None, s.split(","))), default=set(),
                        help="parts to leave out, comma-separated: fifo (the FIFO directory), push (the per-call "
                             "push run, close() time, and Scrapy), verify, export")
    benchresults.add_argument(parser, "bench_scale")
    args = parser.parse_args()
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        work = args.keep
    else:
        work = tempfile.mkdtemp(prefix="dfscale-", dir=args.workdir)
    started = time.perf_counter()
    results: dict[int, dict] = {}
    skipped: list[str] = []
    plan = Plan()
    try:
        for n in args.sizes:
            try:
                r = run_size(n, work, args, plan)
            except ChildFailed as exc:
                say(f"N={label(n)}: FAILED: {exc}")
                skipped.append(f"N={label(n)}: failed: {str(exc).splitlines()[0]}")
                continue
            if r is None:
                skipped.append(f"N={label(n)}: skipped, not enough free disk in {work}")
            else:
                results[n] = r
    except KeyboardInterrupt:
        say("interrupted: reporting the sizes that finished")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    free = shutil.disk_usage(args.keep or args.workdir or tempfile.gettempdir()).free
    report(results, skipped, args, time.perf_counter() - started, free)
    write_results(results, skipped, args)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(CHILDREN[sys.argv[2]](*sys.argv[3:])))
    else:
        main()
