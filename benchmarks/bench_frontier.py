"""Side-by-side benchmark: diskfrontier against Scrapy's scheduler (JOBDIR) and raw queuelib.

Workload (the same for every contender, in one process run): N unique URLs over 1,000
hosts, priorities 0..-5, and 10% of them pushed a second time as duplicates. Each
contender pushes everything, is closed and reopened (open time), then pops everything
(diskfrontier also marks each one done). Request objects are built before timing.

    pip install -e '.[bench]'
    python benchmarks/bench_frontier.py            # N=200,000, 3 repeats, medians printed

A second table compares the two Scrapy schedulers themselves, on Scrapy requests with a
callback (as a spider yields them): Scrapy's ``Scheduler`` with JOBDIR against
``diskfrontier.scrapy.Scheduler``, which also writes a done record for each request the
engine has finished with (a stand-in engine here reports each one finished at once).

Figures are medians over the repeats; the machines are shared, so read the ratios.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import benchresults
import msgpack

from diskfrontier import Frontier, Request
from diskfrontier.request.codec import encode_request


def workload(n: int) -> tuple[list[str], list[int], list[int]]:
    urls = [f"https://host{i % 1000}.example.com/catalog/{i // 1000}/item-{i}.html?ref=list&page={i % 50}"
            for i in range(n)]
    priorities = [-(i % 6) for i in range(n)]
    duplicates = list(range(0, n, 10))
    return urls, priorities, duplicates


def dir_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
    return total


def bench_diskfrontier(urls, priorities, duplicates, work: str) -> dict:
    job = os.path.join(work, "df")
    requests = [Request(u, priority=p) for u, p in zip(urls, priorities, strict=True)]
    dups = [Request(urls[i], priority=priorities[i]) for i in duplicates]
    frontier = Frontier(job)
    t = time.perf_counter()
    for r in requests:
        frontier.push(r)
    for r in dups:
        frontier.push(r)
    push_s = time.perf_counter() - t
    pending = len(frontier)
    frontier.close()
    disk = dir_bytes(job)
    t = time.perf_counter()
    frontier = Frontier(job)
    open_s = time.perf_counter() - t
    t = time.perf_counter()
    popped = 0
    while (r := frontier.pop()) is not None:
        frontier.done(r)
        popped += 1
    pop_s = time.perf_counter() - t
    frontier.close()
    record = statistics.mean(len(encode_request(r)) for r in requests[:10000])
    return {"push": len(requests + dups) / push_s, "pop": popped / pop_s, "open": open_s,
            "disk_per_req": disk / pending, "record": record, "popped": popped}


@functools.cache
def _spider_class():
    """The benchmark's spider class, made once (callbacks must be methods of the very class)."""
    from scrapy import Spider

    class BenchSpider(Spider):
        name = "bench"

        def parse_item(self, response):
            pass

    return BenchSpider


def run_scheduler(scheduler_path: str, settings: dict, requests: list, engine: bool) -> dict:
    """Enqueue ``requests`` into a Scrapy scheduler, close and reopen it, and take them all out."""
    from types import SimpleNamespace

    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    spider_cls, scheduler_cls = _spider_class(), load_object(scheduler_path)

    def open_scheduler():
        crawler = get_crawler(spider_cls, settings)
        crawler.spider = spider_cls.from_crawler(crawler)
        if engine:  # a stand-in engine that has finished with every request at once
            crawler.engine = SimpleNamespace(_slot=SimpleNamespace(inprogress=set()))
        scheduler = scheduler_cls.from_crawler(crawler)
        scheduler.open(crawler.spider)
        return scheduler

    scheduler = open_scheduler()
    t = time.perf_counter()
    for r in requests:
        scheduler.enqueue_request(r)
    push_s = time.perf_counter() - t
    pending = len(scheduler)
    scheduler.close("shutdown")
    disk = dir_bytes(settings["JOBDIR"])
    t = time.perf_counter()
    scheduler = open_scheduler()
    open_s = time.perf_counter() - t
    t = time.perf_counter()
    popped = 0
    while scheduler.next_request() is not None:
        popped += 1
    pop_s = time.perf_counter() - t
    scheduler.close("finished")
    return {"push": len(requests) / push_s, "pop": popped / pop_s, "open": open_s,
            "disk_per_req": disk / max(1, pending), "popped": popped}


def _settings(work: str, name: str) -> dict:
    return {"JOBDIR": os.path.join(work, name), "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
            "LOG_ENABLED": False}


def bench_scrapy(urls, priorities, duplicates, work: str, disk_queue: str | None, name: str) -> dict:
    """Scrapy's scheduler with JOBDIR on plain requests (the workload of the first table)."""
    from scrapy import Request as ScrapyRequest

    settings = _settings(work, name)
    if disk_queue:
        settings["SCHEDULER_DISK_QUEUE"] = disk_queue
    requests = [ScrapyRequest(u, priority=p) for u, p in zip(urls, priorities, strict=True)]
    requests += [ScrapyRequest(urls[i], priority=priorities[i]) for i in duplicates]
    return run_scheduler("scrapy.core.scheduler.Scheduler", settings, requests, engine=False)


def bench_scheduler(urls, priorities, duplicates, work: str, scheduler_path: str, name: str) -> dict:
    """enqueue_request / next_request of a Scrapy scheduler on requests with a callback."""
    from scrapy import Request as ScrapyRequest

    spider = _spider_class()()
    requests = [ScrapyRequest(u, priority=p, callback=spider.parse_item) for u, p in zip(urls, priorities, strict=True)]
    requests += [ScrapyRequest(urls[i], priority=priorities[i], callback=spider.parse_item) for i in duplicates]
    return run_scheduler(scheduler_path, _settings(work, name), requests, engine=True)


def bench_queuelib(urls, priorities, duplicates, work: str) -> dict:
    from queuelib import LifoDiskQueue, PriorityQueue

    path = os.path.join(work, "ql")
    os.makedirs(path)
    records = [msgpack.packb([u]) for u in urls]
    pq = PriorityQueue(lambda p: LifoDiskQueue(os.path.join(path, f"p{p}")))
    t = time.perf_counter()
    for rec, p in zip(records, priorities, strict=True):
        pq.push(rec, -p)
    for i in duplicates:  # raw queues do not dedupe: the duplicates go in too
        pq.push(records[i], -priorities[i])
    push_s = time.perf_counter() - t
    pending = len(pq)
    active = pq.close()
    disk = dir_bytes(path)
    t = time.perf_counter()
    pq = PriorityQueue(lambda p: LifoDiskQueue(os.path.join(path, f"p{p}")), active)
    open_s = time.perf_counter() - t
    t = time.perf_counter()
    popped = 0
    while pq.pop() is not None:
        popped += 1
    pop_s = time.perf_counter() - t
    pq.close()
    return {"push": (len(records) + len(duplicates)) / push_s, "pop": popped / pop_s, "open": open_s,
            "disk_per_req": disk / pending, "popped": popped}


KILLED_CHILD = """
import os, signal, sys
from diskfrontier import Frontier, Request
f = Frontier(sys.argv[1])
n = int(sys.argv[2])
f.push_many(Request(f"https://host{i % 1000}.example.com/catalog/{i // 1000}/item-{i}.html?ref=list&page={i % 50}",
                    priority=-(i % 6)) for i in range(n))
for _ in range(n // 10):
    f.pop()
os.kill(os.getpid(), signal.SIGKILL)
"""


def bench_requeue_after_kill(n: int, work: str) -> dict:
    job = os.path.join(work, "killed")
    subprocess.run([sys.executable, "-c", KILLED_CHILD, job, str(n)], check=False)
    t = time.perf_counter()
    frontier = Frontier(job)
    open_s = time.perf_counter() - t
    pending = len(frontier)
    stats = frontier.stats()
    frontier.close()
    return {"requeue": pending / open_s, "open": open_s, "pending": pending, "recovery": stats["recovery"]}


RSS_CHILD = """
import sys, os, hashlib
def rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
n = int(sys.argv[2])
from diskfrontier.jobdir.seenindex import SeenIndex, key_of
fps = (hashlib.sha1(str(i).encode()).digest() for i in range(n))
before = rss()
if sys.argv[1] == 'diskfrontier':
    index = SeenIndex()
    for fp in fps:
        index.add(key_of(fp))
else:
    seen = set()
    for fp in fps:
        seen.add(fp)
print((rss() - before) / n)
"""


def rss_per_fingerprint(kind: str, n: int) -> float:
    out = subprocess.run([sys.executable, "-c", RSS_CHILD, kind, str(n)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def median_of(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=200_000, help="unique URLs (default 200,000)")
    parser.add_argument("--sqlite-n", type=int, default=20_000, help="URLs for Scrapy's SQLite queue (slow)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seen-n", type=int, default=1_000_000, help="fingerprints for the RSS measurement")
    parser.add_argument("--scheduler-n", type=int, default=100_000, help="URLs for the Scrapy scheduler table")
    benchresults.add_argument(parser, "bench_frontier")
    args = parser.parse_args()
    urls, priorities, duplicates = workload(args.n)
    small = workload(args.sqlite_n)
    medium = workload(args.scheduler_n)
    results: dict[str, list[dict]] = {"diskfrontier": [], "scrapy": [], "scrapy-sqlite": [], "queuelib": [], "kill": [],
                                      "sched-scrapy": [], "sched-df": []}
    for rep in range(args.repeat):
        work = tempfile.mkdtemp(prefix="dfbench-")
        try:
            results["diskfrontier"].append(bench_diskfrontier(urls, priorities, duplicates, work))
            results["scrapy"].append(bench_scrapy(urls, priorities, duplicates, work, None, "scrapy"))
            results["scrapy-sqlite"].append(
                bench_scrapy(*small, work, "scrapy.squeues.PickleLifoSQLiteQueue", "sqlite"))
            results["queuelib"].append(bench_queuelib(urls, priorities, duplicates, work))
            results["kill"].append(bench_requeue_after_kill(args.n, work))
            results["sched-scrapy"].append(
                bench_scheduler(*medium, work, "scrapy.core.scheduler.Scheduler", "sched-scrapy"))
            results["sched-df"].append(bench_scheduler(*medium, work, "diskfrontier.scrapy.Scheduler", "sched-df"))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"repeat {rep + 1}/{args.repeat} done", file=sys.stderr)
    rss_df = rss_per_fingerprint("diskfrontier", args.seen_n)
    rss_set = rss_per_fingerprint("set", args.seen_n)

    df = results["diskfrontier"]
    print(f"\nworkload: {args.n:,} unique URLs over 1,000 hosts, priorities 0..-5, +10% duplicates; "
          f"Scrapy SQLite queue with {args.sqlite_n:,}; medians of {args.repeat}")
    print(f"{'contender':<28}{'push/s':>12}{'pop/s':>12}{'open s':>10}{'disk B/req':>12}")
    for name, label in [("diskfrontier", "diskfrontier (pop+done)"), ("scrapy", "Scrapy Scheduler JOBDIR"),
                        ("scrapy-sqlite", "Scrapy + PickleLifoSQLite"), ("queuelib", "raw queuelib LIFO")]:
        runs = results[name]
        print(f"{label:<28}{median_of(runs, 'push'):>12,.0f}{median_of(runs, 'pop'):>12,.0f}"
              f"{median_of(runs, 'open'):>10.3f}{median_of(runs, 'disk_per_req'):>12,.1f}")
    sc = results["scrapy"]
    print("\nratios diskfrontier / Scrapy scheduler:")
    print(f"  push  {median_of(df, 'push') / median_of(sc, 'push'):.2f}x   (target >= 3x)")
    print(f"  pop   {median_of(df, 'pop') / median_of(sc, 'pop'):.2f}x   (target >= 5x)")
    print(f"  open  {median_of(df, 'open') / median_of(sc, 'open'):.2f}x the time")
    print(f"  disk per pending request: {median_of(df, 'disk_per_req'):.1f} B = "
          f"{median_of(df, 'disk_per_req') / median_of(df, 'record'):.2f}x one msgpack record of "
          f"{median_of(df, 'record'):.1f} B (target <= 2x)")
    print(f"  RSS per seen fingerprint: diskfrontier {rss_df:.1f} B, Scrapy's set of digests {rss_set:.1f} B "
          f"({rss_set / rss_df:.1f}x less; target <= 24 B)")
    kill = results["kill"]
    print(f"  re-queue after SIGKILL: {median_of(kill, 'requeue'):,.0f} requests/s "
          f"({kill[0]['pending']:,} pending rebuilt in {median_of(kill, 'open'):.2f} s; target >= 200,000/s)")

    print(f"\nScrapy schedulers, {args.scheduler_n:,} Scrapy requests with a callback, +10% duplicates; "
          f"medians of {args.repeat}")
    print(f"{'scheduler':<34}{'enqueue/s':>12}{'next/s':>12}{'open s':>10}")
    for name, label in [("sched-scrapy", "scrapy.core.scheduler.Scheduler"),
                        ("sched-df", "diskfrontier.scrapy.Scheduler")]:
        runs = results[name]
        print(f"{label:<34}{median_of(runs, 'push'):>12,.0f}{median_of(runs, 'pop'):>12,.0f}"
              f"{median_of(runs, 'open'):>10.3f}")
    ours, theirs = results["sched-df"], results["sched-scrapy"]
    print(f"  ratios: enqueue {median_of(ours, 'push') / median_of(theirs, 'push'):.2f}x, "
          f"next_request {median_of(ours, 'pop') / median_of(theirs, 'pop'):.2f}x "
          f"(diskfrontier's includes a done record per request)")
    write_results(args, results, rss_df, rss_set)


CONTENDERS = [("diskfrontier", "diskfrontier (pop+done)"), ("scrapy", "Scrapy Scheduler JOBDIR"),
              ("scrapy-sqlite", "Scrapy + PickleLifoSQLite"), ("queuelib", "raw queuelib LIFO")]


def write_results(args: argparse.Namespace, results: dict[str, list[dict]], rss_df: float, rss_set: float) -> None:
    """The tables printed above, as data (benchmarks/results/bench_frontier.json)."""
    df, sc, kill = results["diskfrontier"], results["scrapy"], results["kill"]
    ours, theirs = results["sched-df"], results["sched-scrapy"]
    contenders = benchresults.table(
        f"{args.n:,} unique URLs over 1,000 hosts, priorities 0..-5, +10% duplicates (Scrapy's SQLite queue: "
        f"{args.sqlite_n:,}); medians of {args.repeat}",
        [("contender", None), ("push/s", "{:,.0f}"), ("pop/s", "{:,.0f}"), ("open s", "{:.3f}"),
         ("disk B/req", "{:,.1f}")],
        [[label, median_of(results[name], "push"), median_of(results[name], "pop"), median_of(results[name], "open"),
          median_of(results[name], "disk_per_req")] for name, label in CONTENDERS],
        ["diskfrontier's pop/s includes a done() (one journal write) per request."])
    record = median_of(df, "record")
    ratios = benchresults.table(
        "diskfrontier against Scrapy's scheduler",
        [("figure", None), ("measured", None), ("target", None)],
        [["push", f"{median_of(df, 'push') / median_of(sc, 'push'):.2f}x", ">= 3x"],
         ["pop (diskfrontier with its done)", f"{median_of(df, 'pop') / median_of(sc, 'pop'):.2f}x", ">= 5x"],
         ["open", f"{median_of(df, 'open') / median_of(sc, 'open'):.2f}x the time", ""],
         ["disk per pending request", f"{median_of(df, 'disk_per_req'):.1f} B = "
          f"{median_of(df, 'disk_per_req') / record:.2f}x one msgpack record of {record:.1f} B", "<= 2x"],
         ["RSS per seen fingerprint", f"{rss_df:.1f} B (Scrapy's set of digests: {rss_set:.1f} B, "
          f"{rss_set / rss_df:.1f}x more)", "<= 24 B"],
         ["re-queue after SIGKILL", f"{median_of(kill, 'requeue'):,.0f} requests/s ({kill[0]['pending']:,} pending "
          f"rebuilt in {median_of(kill, 'open'):.2f} s)", ">= 200,000/s"]])
    schedulers = benchresults.table(
        f"Scrapy schedulers, {args.scheduler_n:,} Scrapy requests with a callback, +10% duplicates; "
        f"medians of {args.repeat}",
        [("scheduler", None), ("enqueue/s", "{:,.0f}"), ("next/s", "{:,.0f}"), ("open s", "{:.3f}")],
        [[label, median_of(results[name], "push"), median_of(results[name], "pop"), median_of(results[name], "open")]
         for name, label in [("sched-scrapy", "scrapy.core.scheduler.Scheduler"),
                             ("sched-df", "diskfrontier.scrapy.Scheduler")]],
        [f"ratios: enqueue {median_of(ours, 'push') / median_of(theirs, 'push'):.2f}x, next_request "
         f"{median_of(ours, 'pop') / median_of(theirs, 'pop'):.2f}x (diskfrontier's includes a done record per "
         f"request)"])
    figures = {
        "ratios": {"push": median_of(df, "push") / median_of(sc, "push"),
                   "pop": median_of(df, "pop") / median_of(sc, "pop"),
                   "open": median_of(df, "open") / median_of(sc, "open"),
                   "enqueue": median_of(ours, "push") / median_of(theirs, "push"),
                   "next_request": median_of(ours, "pop") / median_of(theirs, "pop")},
        "rss_per_fingerprint": {"diskfrontier": rss_df, "set": rss_set},
        "runs": results,
    }
    benchresults.write(args.results, "bench_frontier", vars(args), [contenders, ratios, schedulers], figures)


if __name__ == "__main__":
    main()
