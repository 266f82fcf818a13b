"""Side-by-side benchmark: diskfrontier against Scrapy's scheduler (JOBDIR) and raw queuelib, and its goals.

Workload (the same for every contender, in one process run): N unique URLs over 1,000
hosts, priorities 0..-5, and 10% of them pushed a second time as duplicates. Each
contender pushes everything, is closed and reopened (open time), then pops everything
(diskfrontier also marks each one done). Request objects are built before timing.
diskfrontier's ``push_many`` (batches of 10,000) runs on the same workload with fresh
request objects.

A second table drives the Scrapy schedulers themselves, on Scrapy requests with a callback
(as a spider yields them): Scrapy's ``Scheduler`` with JOBDIR against
``diskfrontier.scrapy.Scheduler`` (which also writes a done record for each request the
engine has finished with: a stand-in engine reports each one finished at once), with
``SCHEDULER_PRIORITY_QUEUE = scrapy.pqueues.ScrapyPriorityQueue``, then with Scrapy's
default settings (``DownloaderAwarePriorityQueue``, which asks the crawler's downloader
for its slots: the stand-in engine has a real ``scrapy.core.downloader.Downloader``).
Its last two rows drive both schedulers as Scrapy's engine does (``engine_loop.py``): one open
scheduler enqueues and then hands out, each request handed out joins the engine's in-progress set
and leaves it once 16 more are out, and after the drain the engine asks once more and checks
``has_pending_requests()``. The rows above it close and reopen the scheduler between the enqueues
and the drain and finish each request at once: a resumed crawl, with nothing in progress.

Then the goal table: every figure against its goal (MET, or MISSED and by how much), as
medians of the per-run ratios over ``--repeat`` runs, with politeness (``frontier_costs.py``:
``per_host=1`` over 10^5 hosts, and the memory of a host politeness is working on), the
``--big N`` figures of one job directory of N (``frontier_big.py``: recovery after SIGKILL,
the longest push and pop calls, ``compact``, ``inspect`` and ``peek``; one run each), and
the floors: the CPU time per request of the steps a push and a pop+done cannot avoid.

    pip install -e '.[bench]'
    python benchmarks/bench_frontier.py                  # N=200,000, 5 repeats, --big 1e6 (about 25 min)
    python benchmarks/bench_frontier.py -n 20000 --repeat 1 --big 1e5    # about a minute

The machines are shared: read the ratios, which compare contenders measured side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import benchresults
import engine_loop
import frontier_big
import frontier_costs
import msgpack

from diskfrontier import Frontier, Request
from diskfrontier.request.codec import encode_request

CHUNK = 10_000  # push_many batch
DAPQ = "scrapy.pqueues.DownloaderAwarePriorityQueue"


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


# ---------------------------------------------------------------------- the contenders
def bench_diskfrontier(urls, priorities, duplicates, work: str) -> dict:
    job = os.path.join(work, "df")
    requests = [Request(u, priority=p) for u, p in zip(urls, priorities, strict=True)]
    dups = [Request(urls[i], priority=priorities[i]) for i in duplicates]
    frontier = Frontier(job)
    t, cpu = time.perf_counter(), time.process_time()
    for r in requests:
        frontier.push(r)
    for r in dups:
        frontier.push(r)
    push_s, push_cpu = time.perf_counter() - t, time.process_time() - cpu
    pending = len(frontier)
    frontier.close()
    disk = dir_bytes(job)
    t = time.perf_counter()
    frontier = Frontier(job)
    open_s = time.perf_counter() - t
    t, cpu = time.perf_counter(), time.process_time()
    popped = 0
    while (r := frontier.pop()) is not None:
        frontier.done(r)
        popped += 1
    pop_s, pop_cpu = time.perf_counter() - t, time.process_time() - cpu
    frontier.close()
    record = statistics.mean(len(encode_request(r)) for r in requests[:10000])
    offered = len(requests) + len(dups)
    return {"push": offered / push_s, "pop": popped / pop_s, "open": open_s,
            "disk_per_req": disk / pending, "record": record, "popped": popped,
            "push_cpu_us": push_cpu / offered * 1e6, "pop_cpu_us": pop_cpu / popped * 1e6}


def bench_push_many(urls, priorities, duplicates, work: str) -> dict:
    """The same workload through push_many, CHUNK requests a call (new requests first, then the duplicates)."""
    job = os.path.join(work, "df-many")
    requests = [Request(u, priority=p) for u, p in zip(urls, priorities, strict=True)]
    requests += [Request(urls[i], priority=priorities[i]) for i in duplicates]
    batches = [requests[i:i + CHUNK] for i in range(0, len(requests), CHUNK)]
    frontier = Frontier(job)
    t = time.perf_counter()
    for batch in batches:
        frontier.push_many(batch)
    push_s = time.perf_counter() - t
    pending = len(frontier)
    frontier.close()
    shutil.rmtree(job, ignore_errors=True)
    return {"push": len(requests) / push_s, "pending": pending}


@functools.cache
def _spider_class():
    """The benchmark's spider class, made once (callbacks must be methods of the very class)."""
    from scrapy import Spider

    class BenchSpider(Spider):
        name = "bench"

        def parse_item(self, response):
            pass

    return BenchSpider


@functools.cache
def _reactor() -> str:
    """Install the reactor Scrapy's settings name (its default: asyncio), as a crawl would: Scrapy's
    downloader builds its download handlers only with one installed. Nothing here runs it."""
    from scrapy.settings import Settings
    from scrapy.utils.reactor import install_reactor, is_reactor_installed

    name = Settings()["TWISTED_REACTOR"]
    if name and not is_reactor_installed():
        install_reactor(name)
    return name


class _StandInEngine:
    """What the schedulers ask of Scrapy's engine: its requests in progress (none: every request handed
    out is finished at once) and, for DownloaderAwarePriorityQueue, its downloader."""

    def __init__(self, crawler: Any) -> None:
        from types import SimpleNamespace

        from scrapy.core.downloader import Downloader

        _reactor()
        self._slot = SimpleNamespace(inprogress=set())
        self.downloader = Downloader(crawler)


def run_scheduler(scheduler_path: str, settings: dict, requests: list, engine: bool) -> dict:
    """Enqueue ``requests`` into a Scrapy scheduler, close and reopen it, and take them all out."""
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    spider_cls, scheduler_cls = _spider_class(), load_object(scheduler_path)
    engines: list[_StandInEngine] = []

    def open_scheduler():
        crawler = get_crawler(spider_cls, settings)
        crawler.spider = spider_cls.from_crawler(crawler)
        if engine:
            crawler.engine = _StandInEngine(crawler)
            engines.append(crawler.engine)
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
    for stand_in in engines:
        stand_in.downloader.close()
    if popped != pending:
        raise RuntimeError(f"{scheduler_path}: {pending:,} enqueued, {popped:,} taken out")
    return {"push": len(requests) / push_s, "pop": popped / pop_s, "open": open_s,
            "disk_per_req": disk / max(1, pending), "popped": popped}


def _settings(work: str, name: str, default_queue: bool = False) -> dict:
    settings = {"JOBDIR": os.path.join(work, name), "LOG_ENABLED": False}
    if not default_queue:
        settings["SCHEDULER_PRIORITY_QUEUE"] = "scrapy.pqueues.ScrapyPriorityQueue"
    return settings


def bench_scrapy(urls, priorities, duplicates, work: str, disk_queue: str | None, name: str) -> dict:
    """Scrapy's scheduler with JOBDIR on plain requests (the workload of the first table)."""
    from scrapy import Request as ScrapyRequest

    settings = _settings(work, name)
    if disk_queue:
        settings["SCHEDULER_DISK_QUEUE"] = disk_queue
    requests = [ScrapyRequest(u, priority=p) for u, p in zip(urls, priorities, strict=True)]
    requests += [ScrapyRequest(urls[i], priority=priorities[i]) for i in duplicates]
    return run_scheduler("scrapy.core.scheduler.Scheduler", settings, requests, engine=False)


def bench_scheduler(urls, priorities, duplicates, work: str, scheduler_path: str, name: str,
                    default_queue: bool = False) -> dict:
    """enqueue_request / next_request of a Scrapy scheduler on requests with a callback."""
    from scrapy import Request as ScrapyRequest

    spider = _spider_class()()
    requests = [ScrapyRequest(u, priority=p, callback=spider.parse_item) for u, p in zip(urls, priorities, strict=True)]
    requests += [ScrapyRequest(urls[i], priority=priorities[i], callback=spider.parse_item) for i in duplicates]
    return run_scheduler(scheduler_path, _settings(work, name, default_queue), requests, engine=True)


def bench_engine(urls, priorities, duplicates, work: str, scheduler_path: str, name: str) -> dict:
    """enqueue_request / next_request of a Scrapy scheduler driven as the engine drives it (``engine_loop.py``)."""
    rates = engine_loop.engine_loop(scheduler_path, _settings(work, name), _spider_class(), urls, priorities,
                                    duplicates)
    return {"push": rates["enqueue"], "pop": rates["next_request"], "popped": rates["taken"]}


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
    t, cpu = time.perf_counter(), time.process_time()
    popped = 0
    while pq.pop() is not None:
        popped += 1
    pop_s, pop_cpu = time.perf_counter() - t, time.process_time() - cpu
    pq.close()
    return {"push": (len(records) + len(duplicates)) / push_s, "pop": popped / pop_s, "open": open_s,
            "disk_per_req": disk / pending, "popped": popped, "pop_cpu_us": pop_cpu / popped * 1e6}


# ---------------------------------------------------------------------- runs and their medians
class Runs:
    """Each part's result of every repeat, and the first failure of each part that failed."""

    def __init__(self) -> None:
        self.results: dict[str, list[dict]] = {}
        self.errors: dict[str, str] = {}

    def run(self, key: str, func: Callable[[], dict]) -> None:
        if key in self.errors:
            return  # failed in an earlier repeat: it would fail again
        print(f"  {key}", file=sys.stderr, flush=True)
        gc.collect()
        try:
            self.results.setdefault(key, []).append(func())
        except Exception as exc:  # reported in the rows that need it
            self.errors[key] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            self.results.pop(key, None)

    def has(self, *keys: str) -> bool:
        return all(self.results.get(k) for k in keys)

    def why_not(self, *keys: str) -> str:
        keys = tuple(dict.fromkeys(keys))
        for key in keys:
            if key in self.errors:
                return f"not measured: {key} failed: {self.errors[key]}"
        return "not measured: " + ", ".join(k for k in keys if not self.results.get(k)) + " did not run"

    def median(self, key: str, field: str) -> float:
        return statistics.median(r[field] for r in self.results[key])

    def ratio(self, top: str, top_field: str, bottom: str, bottom_field: str | None = None) -> float:
        """The median over the repeats of top/bottom, each pair measured in the same repeat."""
        pairs = zip(self.results[top], self.results[bottom], strict=True)
        return statistics.median(a[top_field] / b[bottom_field or top_field] for a, b in pairs)


# ---------------------------------------------------------------------- goals
@dataclass
class Goal:
    title: str
    op: str  # ">=" or "<="
    limit: float
    unit: str  # "x", "B", "/s", "ms", "s", "MB"
    stated: str = ""  # e.g. "goal stated for 10^7"


def fmt(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "/s":
        return f"{value:,.0f}/s"
    if unit == "ms":
        return f"{value:.1f} ms"
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "MB":
        return f"{value:,.1f} MB"
    return f"{value:,.1f} {unit}"


def goal_text(goal: Goal) -> str:
    if goal.unit in ("x", "/s"):
        limit = f"{goal.limit:,.0f}/s" if goal.unit == "/s" else f"{goal.limit:g}x"
    else:
        limit = f"{goal.limit:g} {goal.unit}"
    return f"{goal.op} {limit}" + (f" ({goal.stated})" if goal.stated else "")


def status(goal: Goal, value: float) -> str:
    met = value >= goal.limit if goal.op == ">=" else value <= goal.limit
    if met:
        return "MET"
    gap = abs(value - goal.limit)
    share = gap / goal.limit * 100
    return f"MISSED by {fmt(gap, goal.unit)} ({share:.0f}% {'short' if goal.op == '>=' else 'over'})"


def goal_row(goal: Goal, value: float | None, detail: str = "", reason: str = "") -> list[str]:
    """figure, measured (with what it is made of), goal, status."""
    if value is None:
        return [goal.title, reason or "not measured", goal_text(goal), "NOT MEASURED"]
    return [goal.title, fmt(value, goal.unit) + (f" ({detail})" if detail else ""), goal_text(goal),
            status(goal, value)]


def goal_rows(runs: Runs, big: dict | None, args: argparse.Namespace) -> list[list[str]]:
    rows: list[list[str]] = []

    def paired(goal: Goal, top: str, bottom: str, field: str, what: Callable[[float, float], str],
               bottom_field: str | None = None) -> None:
        if not runs.has(top, bottom):
            rows.append(goal_row(goal, None, reason=runs.why_not(top, bottom)))
            return
        value = runs.ratio(top, field, bottom, bottom_field)
        rows.append(goal_row(goal, value, what(runs.median(top, field), runs.median(bottom, bottom_field or field))))

    def rates(a: float, b: float) -> str:
        return f"{a:,.0f}/s vs {b:,.0f}/s"

    paired(Goal("library push / Scrapy Scheduler (JOBDIR) enqueue", ">=", 4, "x"), "diskfrontier", "scrapy", "push",
           rates)
    paired(Goal("library pop+done / Scrapy next_request, politeness off", ">=", 4, "x"), "diskfrontier", "scrapy",
           "pop", rates)
    paired(Goal(f"polite pop+done (per_host=1, {args.hosts:,} hosts) / politeness off", ">=", 0.7, "x"), "polite",
           "polite", "polite", rates, "off")
    paired(Goal("diskfrontier.scrapy.Scheduler enqueue_request / Scrapy's (ScrapyPriorityQueue)", ">=", 3, "x"),
           "sched-df", "sched-scrapy", "push", rates)
    paired(Goal("diskfrontier.scrapy.Scheduler next_request (with its done) / Scrapy's (ScrapyPriorityQueue)", ">=",
                1.5, "x"), "sched-df", "sched-scrapy", "pop", rates)
    paired(Goal("the same, driven as the engine drives it (16 in progress, no reopen): next_request", ">=", 1.5,
                "x"), "engine-df", "engine-scrapy", "pop", rates)
    paired(Goal("the same, Scrapy's default settings (DownloaderAwarePriorityQueue): enqueue_request", ">=", 3, "x"),
           "dapq-df", "dapq-scrapy", "push", rates)
    paired(Goal("the same, Scrapy's default settings (DownloaderAwarePriorityQueue): next_request", ">=", 1.5, "x"),
           "dapq-df", "dapq-scrapy", "pop", rates)
    paired(Goal("push_many / push", ">=", 2, "x"), "push_many", "diskfrontier", "push", rates)
    paired(Goal("disk per pending request / one msgpack record", "<=", 2, "x"), "diskfrontier", "diskfrontier",
           "disk_per_req", lambda a, b: f"{a:.1f} B / {b:.1f} B", "record")
    memory = Goal("memory of a host politeness is working on", "<=", 150, "B")
    if runs.has("hostmem"):
        pops, control = runs.median("hostmem", "pops"), runs.median("hostmem", "control_per_host")
        rows.append(goal_row(memory, runs.median("hostmem", "per_host"),
                             f"RSS growth / {args.hosts:,} hosts after {pops:,.0f} pop+done; politeness off, "
                             f"the same pops: {control:.1f} B"))
    else:
        rows.append(goal_row(memory, None, reason=runs.why_not("hostmem")))
    rows.extend(big_goal_rows(big, args))
    return rows


def big_goal_rows(big: dict | None, args: argparse.Namespace) -> list[list[str]]:
    at = f"--big N={args.big:,}" if args.big else "--big N"
    goals = {
        "reopen": Goal(f"recovery after kill -9: requests re-queued per second ({at})", ">=", 600_000, "/s"),
        "pushes": Goal(f"longest single push ({at} per-call pushes)", "<=", 20, "ms"),
        "live": Goal(f"longest single pop(timeout=0), delay=1.0, {at} pending on 10^3 hosts", "<=", 20, "ms"),
        "compact_s": Goal(f"compact ({at}): wall time", "<=", 60, "s", "goal stated for 10^7"),
        "compact_mb": Goal(f"compact ({at}): peak RSS", "<=", 300, "MB", "goal stated for 10^7"),
        "inspect_killed": Goal(f"inspect of a killed directory ({at})", "<=", 5, "s", "goal stated for 10^7"),
        "peek_killed": Goal(f"peek -n 20 of a killed directory ({at})", "<=", 5, "s", "goal stated for 10^7"),
        "peek_live_1": Goal(f"peek -n 20 of a live job dir ({at})", "<=", 1, "s"),
        "peek_killed_1": Goal(f"peek -n 20 of a killed job dir ({at})", "<=", 1, "s"),
    }
    if big is None:
        return [goal_row(g, None, reason="not measured: --big 0") for g in goals.values()]
    errors = big["errors"]

    def missing(*steps: str) -> str:
        for step in steps:
            if step in errors:
                return f"not measured: {step}: {errors[step]}"
        return "not measured"

    rows = []
    if "reopen" in big:
        o = big["reopen"]
        note = f"{o['pending']:,} rebuilt in {o['open_s']:.2f} s"
        if o["recovery"] != "rebuilt":
            note += f"; the open says {o['recovery']!r}, not 'rebuilt'"
        rows.append(goal_row(goals["reopen"], o["rate"], note))
    else:
        rows.append(goal_row(goals["reopen"], None, reason=missing("build", "kill", "reopen")))
    if "pushes" in big:
        p = big["pushes"]
        rows.append(goal_row(goals["pushes"], p["worst_ms"], f"{p['calls']:,} calls, {p['slow']:,} over "
                                                             f"{frontier_big.SLOW_MS:g} ms"))
    else:
        rows.append(goal_row(goals["pushes"], None, reason=missing("pushes")))
    if "live" in big:
        v = big["live"]
        rows.append(goal_row(goals["live"], v["worst_ms"],
                             f"{v['calls']:,} calls in {frontier_big.LIVE_SECONDS:g} s, {v['slow']:,} over "
                             f"{frontier_big.SLOW_MS:g} ms; longest that returned a request: "
                             f"{v['worst_request_ms']:.1f} ms"))
    else:
        rows.append(goal_row(goals["live"], None, reason=missing("build", "live")))
    compactions = {k: big[k] for k in ("compact_all", "compact_half") if k in big and "refused" not in big[k]}
    names = {"compact_all": "all pending", "compact_half": "half done"}
    if compactions:
        worst_s = max(compactions, key=lambda k: compactions[k]["wall"])
        worst_mb = max(compactions, key=lambda k: compactions[k]["peak"])
        each = "; ".join(f"{names[k]}: {c['wall']:.2f} s, {c['peak'] / 1e6:,.1f} MB" for k, c in compactions.items())
        rows.append(goal_row(goals["compact_s"], compactions[worst_s]["wall"], f"the slower of {each}"))
        rows.append(goal_row(goals["compact_mb"], compactions[worst_mb]["peak"] / 1e6, "the larger"))
    else:
        refused = [big[k]["refused"] for k in ("compact_all", "compact_half") if k in big]
        reason = f"refused: {refused[0]}" if refused else missing("reopen", "compact", "pushes", "compact_half")
        rows.append(goal_row(goals["compact_s"], None, reason=reason))
        rows.append(goal_row(goals["compact_mb"], None, reason=reason))
    startup = big.get("startup", {}).get("wall")
    with_startup = f"whole process; startup alone {startup:.2f} s" if startup is not None else "whole process"
    for key, state, step in (("inspect_killed", "inspect_killed", "killed"), ("peek_killed", "peek_killed", "killed"),
                             ("peek_live_1", "peek_live", "live"), ("peek_killed_1", "peek_killed", "killed")):
        cell = big.get(state)
        if cell is None:
            rows.append(goal_row(goals[key], None, reason=missing("build", "kill", step)))
        elif "refused" in cell:
            rows.append([goals[key].title, f"refused ({cell['refused']})", goal_text(goals[key]), "NOT MEASURED"])
        else:
            rows.append(goal_row(goals[key], cell["wall"], f"{with_startup}; peak RSS {cell['peak'] / 1e6:,.1f} MB"))
    return rows


def floor_rows(runs: Runs) -> list[list[Any]]:
    """The floors, then push's and pop+done's CPU per request beside the sum of theirs."""
    rows: list[list[Any]] = []
    have = runs.has("floors")
    size = f"{runs.median('floors', 'record_bytes'):.0f}-byte" if have else "record-sized"
    floors = [("fp_scrapy", "floor: Scrapy's fingerprint of one request (scrapy.utils.request.fingerprint)"),
              ("fp_df", "floor: diskfrontier's fingerprint (Request(url).fingerprint, a fresh request)"),
              ("encode", "floor: encode one request (diskfrontier.request.codec.encode_request)"),
              ("write", f"floor: one os.write of a {size} record to an O_APPEND file"),
              ("pread", f"floor: one os.pread of a {size} record")]
    for key, title in floors:
        rows.append([title, f"{runs.median('floors', key):.2f} µs" if have else runs.why_not("floors"), "-", ""])
    if runs.has("queuelib"):
        rows.append(["floor: raw queuelib pop (PriorityQueue of LifoDiskQueue)",
                     f"{runs.median('queuelib', 'pop_cpu_us'):.2f} µs", "-", ""])
    else:
        rows.append(["floor: raw queuelib pop (PriorityQueue of LifoDiskQueue)", runs.why_not("queuelib"), "-", ""])

    def beside(key: str, title: str, parts: list[tuple[str, str]]) -> None:
        if not runs.has("diskfrontier"):
            rows.append([title, runs.why_not("diskfrontier"), "-", ""])
            return
        cpu = runs.median("diskfrontier", key)
        known = [(name, runs.median(src, field)) for name, src, field in
                 [(n, *f.split(".")) for n, f in parts] if runs.has(src)]
        if len(known) < len(parts):
            rows.append([title, f"{cpu:.2f} µs", "-", "floors not all measured"])
            return
        total = sum(v for _, v in known)
        names = " + ".join(n for n, _ in known)
        rows.append([title, f"{cpu:.2f} µs", "-", f"{cpu / total:.1f}x its floors ({names} = {total:.2f} µs)"])

    beside("push_cpu_us", "push: CPU per request (incl. the 10% duplicates)",
           [("fingerprint", "floors.fp_df"), ("encode", "floors.encode"), ("write", "floors.write")])
    beside("pop_cpu_us", "pop+done: CPU per request",
           [("queuelib pop", "queuelib.pop_cpu_us"), ("pread", "floors.pread"), ("write", "floors.write")])
    return rows


# ---------------------------------------------------------------------- the other tables
CONTENDERS = [("diskfrontier", "diskfrontier (pop+done)"), ("scrapy", "Scrapy Scheduler JOBDIR"),
              ("scrapy-sqlite", "Scrapy + PickleLifoSQLite"), ("queuelib", "raw queuelib LIFO")]
SCHEDULERS = [("sched-scrapy", "scrapy.core.scheduler.Scheduler, ScrapyPriorityQueue"),
              ("sched-df", "diskfrontier.scrapy.Scheduler, ScrapyPriorityQueue"),
              ("dapq-scrapy", "scrapy.core.scheduler.Scheduler, default (DownloaderAwarePriorityQueue)"),
              ("dapq-df", "diskfrontier.scrapy.Scheduler, default (DownloaderAwarePriorityQueue)"),
              ("engine-scrapy", "scrapy.core.scheduler.Scheduler, engine-like loop (16 in progress)"),
              ("engine-df", "diskfrontier.scrapy.Scheduler, engine-like loop (16 in progress)")]


def contenders_table(runs: Runs, args: argparse.Namespace) -> dict:
    rows: list[list[Any]] = []
    for key, label in CONTENDERS:
        if runs.has(key):
            rows.append([label, runs.median(key, "push"), runs.median(key, "pop"), runs.median(key, "open"),
                         runs.median(key, "disk_per_req")])
        else:
            rows.append([label + f" ({runs.why_not(key)})", None, None, None, None])
    rows.append(["diskfrontier push_many (10,000 a call)",
                 runs.median("push_many", "push") if runs.has("push_many") else None, None, None, None])
    notes = ["diskfrontier's pop/s includes a done() (one journal write) per request."]
    notes += [f"push_many: {runs.why_not('push_many')}"] if not runs.has("push_many") else []
    return benchresults.table(
        f"{args.n:,} unique URLs over 1,000 hosts, priorities 0..-5, +10% duplicates (Scrapy's SQLite queue: "
        f"{args.sqlite_n:,}); medians of {args.repeat}",
        [("contender", None), ("push/s", "{:,.0f}"), ("pop/s", "{:,.0f}"), ("open s", "{:.3f}"),
         ("disk B/req", "{:,.1f}")], rows, notes)


def schedulers_table(runs: Runs, args: argparse.Namespace) -> dict:
    rows: list[list[Any]] = []
    for key, label in SCHEDULERS:
        if runs.has(key):
            rows.append([label, runs.median(key, "push"), runs.median(key, "pop"),
                         runs.median(key, "open") if "open" in runs.results[key][0] else None])
        else:
            rows.append([label + f" ({runs.why_not(key)})", None, None, None])
    notes = []
    for df, scrapy, settings in (("sched-df", "sched-scrapy", "ScrapyPriorityQueue"),
                                 ("dapq-df", "dapq-scrapy", "default settings"),
                                 ("engine-df", "engine-scrapy", "engine-like loop")):
        if runs.has(df, scrapy):
            notes.append(f"{settings}: enqueue {runs.ratio(df, 'push', scrapy):.2f}x, next_request "
                         f"{runs.ratio(df, 'pop', scrapy):.2f}x (medians of the per-run ratios)")
    notes.append("diskfrontier's next_request includes a done record per request (a stand-in engine finishes each "
                 "at once); with the default settings the stand-in engine has a real Downloader, which "
                 "DownloaderAwarePriorityQueue asks for its slots. The engine-like loop enqueues into the "
                 "scheduler it drains (no close and reopen), keeps 16 requests in the engine's in-progress set, "
                 "and asks once more after the drain.")
    return benchresults.table(
        f"Scrapy schedulers, {args.scheduler_n:,} Scrapy requests with a callback, +10% duplicates; "
        f"medians of {args.repeat}",
        [("scheduler", None), ("enqueue/s", "{:,.0f}"), ("next/s", "{:,.0f}"), ("open s", "{:.3f}")], rows, notes)


def big_table(big: dict | None, args: argparse.Namespace) -> dict:
    """Every --big step: wall time, peak RSS and what it found."""
    columns = [("step", None), ("wall s", "{:.2f}"), ("peak RSS MB", "{:,.1f}"), ("detail", None)]
    if big is None:
        return benchresults.table("--big 0: no job directory of N was built", columns,
                                  [["every --big step", None, None, "skipped (--big 0)"]])
    mb = 1e6
    rows: list[list[Any]] = []
    errors = big["errors"]

    def add(step: str, key: str, what: str, detail: Callable[[dict], str] = lambda _c: "") -> None:
        cell = big.get(key)
        if cell is None:
            rows.append([what, None, None, f"not measured: {errors.get(step, 'skipped')}"])
        elif "refused" in cell:
            rows.append([what, cell["wall"], cell["peak"] / mb, f"refused: {cell['refused']}"])
        else:
            rows.append([what, cell["wall"], cell["peak"] / mb, detail(cell)])

    if "build_s" in big:
        rows.append(["build: push_many, a clean close (child)", big["build_s"], big["build_mb"],
                     f"{big['pending']:,} pending, {big['disk'] / mb:,.1f} MB on disk, push_many "
                     f"{big['push_many_rate']:,.0f}/s"])
    else:
        rows.append(["build: push_many, a clean close (child)", None, None, f"not measured: {errors.get('build')}"])
    add("startup", "startup", "diskfrontier --version (startup)")
    for state, step in (("clean", "clean"), ("live", "live"), ("killed", "killed")):
        add(step, f"inspect_{state}", f"diskfrontier inspect, {state}")
        add(step, f"peek_{state}", f"diskfrontier peek -n 20, {state}")
    live = big.get("live")
    rows.append(["live: pop(timeout=0) for 3 s, delay=1.0 (longest call, ms)", None, None,
                 f"longest {live['worst_ms']:.1f} ms over {live['calls']:,} calls ({live['requests']:,} requests)"
                 if live else f"not measured: {errors.get('live', 'skipped')}"])
    add("reopen", "reopen", "reopen after SIGKILL (child; open in-process)",
        lambda c: f"{c['pending']:,} re-queued in {c['open_s']:.2f} s ({c['rate']:,.0f}/s), {c['recovery']}")
    add("compact", "compact_all", "diskfrontier compact, everything pending")
    add("pushes", "pushes", "per-call push() of N + 10% duplicates, pop+done half (child)",
        lambda c: f"{c['push_rate']:,.0f} pushes/s, longest {c['worst_ms']:.1f} ms, {c['slow']:,} over "
                  f"{frontier_big.SLOW_MS:g} ms")
    add("compact_half", "compact_half", "diskfrontier compact, half done")
    return benchresults.table(
        f"--big N={args.big:,}: one job directory of N URLs over 1,000 hosts; one run of each step",
        columns, rows,
        ["Single runs, not medians. Command times are whole processes (interpreter start and imports included); "
         "peak RSS from getrusage(RUSAGE_CHILDREN) in a wrapper process.",
         "The live directory is held open by a child with Frontier(delay=1.0) while the commands run; then that "
         "child calls pop(timeout=0) for 3 s, finishing (done) each request it gets, and reports its longest call."])


# ---------------------------------------------------------------------- printing
def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _text(value: Any, fmt_: str | None) -> str:
    if value is None:
        return "-"
    if fmt_ is not None and isinstance(value, (int, float)):
        return fmt_.format(value)
    return str(value)


def print_tables(tables: list[dict], numeric_right: bool = True) -> None:
    """Print tables with shared column widths, as one table (the first one's header; the others'
    titles as section lines)."""
    cells = [[[_text(v, f) for v, f in zip(row, t["formats"], strict=True)] for row in t["rows"]] for t in tables]
    head = tables[0]["columns"]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *[r for rows in cells for r in rows], strict=True)]
    widths = [min(w, 110) for w in widths]

    def line(row: list[str]) -> str:
        out = []
        for i, (c, w) in enumerate(zip(row, widths, strict=True)):
            numeric = numeric_right and i > 0 and tables[0]["formats"][i] is not None
            out.append(c.rjust(w) if numeric else c.ljust(w))
        return " | ".join(out).rstrip()

    print(f"\n{tables[0]['title']}")
    print(line(head))
    print("-+-".join("-" * w for w in widths))
    for i, (table, rows) in enumerate(zip(tables, cells, strict=True)):
        if i:
            print("-+-".join("-" * w for w in widths))
            print(table["title"])
        for row in rows:
            print(line(row))
        for note in table["notes"]:
            print(f"  - {note}")


# ---------------------------------------------------------------------- main
def raise_file_limit() -> None:
    """Scrapy's DownloaderAwarePriorityQueue keeps a file open per slot and priority (6,000 here)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


SCHEDULER_RUNS = [("sched-scrapy", "scrapy.core.scheduler.Scheduler", False),
                  ("sched-df", "diskfrontier.scrapy.Scheduler", False),
                  ("dapq-scrapy", "scrapy.core.scheduler.Scheduler", True),
                  ("dapq-df", "diskfrontier.scrapy.Scheduler", True)]
ENGINE_RUNS = [("engine-scrapy", "scrapy.core.scheduler.Scheduler"), ("engine-df", "diskfrontier.scrapy.Scheduler")]


def repeat_once(runs: Runs, args: argparse.Namespace, work: str, source: str | None) -> None:
    big, small, medium = args.workloads
    runs.run("diskfrontier", lambda: bench_diskfrontier(*big, work))
    runs.run("push_many", lambda: bench_push_many(*big, work))
    runs.run("scrapy", lambda: bench_scrapy(*big, work, None, "scrapy"))
    runs.run("scrapy-sqlite", lambda: bench_scrapy(*small, work, "scrapy.squeues.PickleLifoSQLiteQueue", "sqlite"))
    runs.run("queuelib", lambda: bench_queuelib(*big, work))
    floor_n = min(args.n, 100_000)
    runs.run("floors", lambda: frontier_costs.floors(big[0][:floor_n], big[1][:floor_n], work))
    if source is None:
        runs.errors.setdefault("polite", f"the {args.hosts:,}-host directory: {runs.errors.get('hosts-source')}")
        runs.errors.setdefault("hostmem", f"the {args.hosts:,}-host directory: {runs.errors.get('hosts-source')}")
    else:
        runs.run("polite", lambda: frontier_costs.polite_rates(source, work))
        runs.run("hostmem", lambda: frontier_costs.host_memory(source, work, args.hosts))
    for key, path, default_queue in SCHEDULER_RUNS:
        runs.run(key, lambda path=path, key=key, default_queue=default_queue:
                 bench_scheduler(*medium, work, path, key, default_queue))
    for key, path in ENGINE_RUNS:
        runs.run(key, lambda path=path, key=key: bench_engine(*medium, work, path, key))


def warm_up(work: str) -> None:
    """Each contender once on a small workload, untimed: imports and first-call costs are paid here,
    not by whichever run comes first. A failure is left to the measured run to report."""
    small = workload(2_000)
    parts = [lambda: bench_diskfrontier(*small, work), lambda: bench_push_many(*small, work),
             lambda: bench_scrapy(*small, work, None, "scrapy"), lambda: bench_queuelib(*small, work)]
    for key, path, default_queue in SCHEDULER_RUNS:
        parts.append(lambda key=key, path=path, default_queue=default_queue:
                     bench_scheduler(*small, work, path, key, default_queue))
    for key, path in ENGINE_RUNS:
        parts.append(lambda key=key, path=path: bench_engine(*small, work, path, key))
    for part in parts:
        with contextlib.suppress(Exception):  # the measured run of the same part reports it
            part()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    count = lambda s: int(float(s))  # noqa: E731 - 1e6 as well as 1000000
    parser.add_argument("-n", type=count, default=200_000, help="unique URLs (default 200,000)")
    parser.add_argument("--repeat", type=count, default=5, help="runs; medians are printed (default 5)")
    parser.add_argument("--sqlite-n", type=count, help="URLs for Scrapy's SQLite queue, which is slow (default N/10)")
    parser.add_argument("--scheduler-n", type=count, help="URLs for the Scrapy scheduler table (default N/2)")
    parser.add_argument("--hosts", type=count, default=100_000,
                        help="hosts of the politeness figures, two requests each (default 100,000)")
    parser.add_argument("--big", type=count, default=1_000_000,
                        help="N of the job directory of the --big figures (default 1e6; 0 skips them)")
    benchresults.add_argument(parser, "bench_frontier")
    args = parser.parse_args()
    if args.sqlite_n is None:
        args.sqlite_n = max(1, args.n // 10)
    if args.scheduler_n is None:
        args.scheduler_n = max(1, args.n // 2)
    if min(args.n, args.repeat, args.hosts) < 1 or args.big < 0:
        parser.error("-n, --repeat and --hosts must be at least 1, --big at least 0")
    raise_file_limit()
    try:
        _reactor()  # before any Scrapy run, so that every run has the same one
    except Exception as exc:  # the runs that need it report it
        print(f"no Twisted reactor: {exc}", file=sys.stderr)
    started = time.perf_counter()
    args.workloads = (workload(args.n), workload(args.sqlite_n), workload(args.scheduler_n))
    runs = Runs()
    shared = tempfile.mkdtemp(prefix="dfbench-")
    big: dict | None = None
    try:
        source: str | None = os.path.join(shared, "hosts")
        print(f"building the {args.hosts:,}-host directory", file=sys.stderr, flush=True)
        runs.run("hosts-source", lambda: {"pending": frontier_costs.hosts_source(source, args.hosts)})
        if "hosts-source" in runs.errors:
            source = None
        print("warming up", file=sys.stderr, flush=True)
        warm = tempfile.mkdtemp(prefix="warm-", dir=shared)
        warm_up(warm)
        shutil.rmtree(warm, ignore_errors=True)
        for rep in range(args.repeat):
            print(f"repeat {rep + 1}/{args.repeat}", file=sys.stderr, flush=True)
            work = tempfile.mkdtemp(prefix="rep-", dir=shared)
            try:
                repeat_once(runs, args, work, source)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        if source is not None:
            shutil.rmtree(source, ignore_errors=True)
        if args.big:
            big = frontier_big.big(args.big, shared)
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    elapsed = time.perf_counter() - started
    del args.workloads
    report(runs, big, args, elapsed)


def report(runs: Runs, big: dict | None, args: argparse.Namespace, elapsed: float) -> None:
    tables = [contenders_table(runs, args), schedulers_table(runs, args), big_table(big, args)]
    for table in tables:
        print_tables([table])
    big_note = (f"--big rows: one run each (not medians) on a job directory of N={args.big:,}"
                if args.big else "--big 0: the --big rows were skipped")
    goals = benchresults.table(
        f"goals: medians of the per-run ratios over {plural(args.repeat, 'run')} (-n {args.n:,}, Scrapy schedulers "
        f"{args.scheduler_n:,}, politeness {args.hosts:,} hosts); {big_note}",
        [("figure", None), ("measured", None), ("goal", None), ("status", None)], goal_rows(runs, big, args),
        [big_note + "; a goal stated for 10^7 is checked as stated against the figure at N.",
         "Command times (inspect, peek, compact) are whole processes, interpreter start and imports included.",
         f"Memory per host: a child opens a copy of a directory of {args.hosts:,} hosts (two requests each) with "
         "Frontier(delay=1.0), pops and finishes requests until every host has had one, and its RSS growth "
         "is divided by the number of hosts."])
    floors = benchresults.table(
        f"floors: CPU time per request (time.process_time), medians of {args.repeat}",
        [("figure", None), ("measured", None), ("goal", None), ("status", None)], floor_rows(runs),
        ["The floors are what a push (fingerprint, encode, one write) and a pop+done (a queue pop, a read of the "
         "record, one write of the done record) cannot do without; push's and pop+done's CPU is that of the "
         "diskfrontier contender above."])
    print_tables([goals, floors], numeric_right=False)
    print(f"\ntotal run time {elapsed / 60:.1f} min", file=sys.stderr)
    figures = {"runs": runs.results, "errors": runs.errors, "big": big}
    benchresults.write(args.results, "bench_frontier", vars(args), [goals, floors, *tables], figures)


if __name__ == "__main__":
    main()
