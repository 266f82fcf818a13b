"""Side-by-side benchmark: ``crawl()`` against the loops a user would write without it.

Workload (the same for every way, on one site per table): a real crawl over HTTP of
``diskfrontier.run.demo.MultiHostSite`` (``--pages`` pages on 127.0.0.2..5, half of them on the
first host). Page N links to 2N+1 and 2N+2 (new work), N // 2 and 0 (duplicates). The
handler fetches a page with ``urllib.request.urlopen``, finds its links with a regex and
pushes them with ``push_many``. Each run gets a fresh job directory, ``Frontier(path)``
with ``delay=0`` and no ``per_host``; the clock runs from the push of page 0 until the
crawl is finished. After each run every page must have been fetched exactly once and the
frontier must be finished, or the benchmark stops with an error. The ways:

    loop      while (r := frontier.pop(timeout=None)) is not None: handler(r, frontier); frontier.done(r)
    crawl()   crawl(frontier, handler, workers=W)
    TPE       concurrent.futures.ThreadPoolExecutor(W); one threading.Lock around every
              frontier call; the main thread pops and submits (at most W in hand), waits on
              the futures when nothing is ready, and stops when none is left and the
              frontier is finished

    python benchmarks/bench_runs.py                  # 2,000 pages, 3 repeats, site delays 0 and 0.005 s
    python benchmarks/bench_runs.py --quick          # 300 pages, 1 repeat

One table per site delay (the seconds the site spends on each response). The site runs in
this process, so with a delay of 0 the workers and the server share the GIL; a delay shows
what threads gain when responses are slow. Figures are medians over the repeats (the ways
take turns within each repeat); the machines are shared, so read the ratios.

The site's servers listen with a backlog of 128 connections instead of socketserver's 5:
with 8 or 16 connections at once to one host, a backlog of 5 drops connection attempts,
and each dropped one costs the client a SYN retransmission of a second or more, which
would be measured instead of the frontier and the worker pool.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import platform
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from typing import Any

import benchresults

from diskfrontier import Frontier, Request, crawl
from diskfrontier.run.demo import MultiHostSite

LINK = re.compile(r'<a href="([^"]+)" data-priority="(-?\d+)">')
WORKERS = (8, 16)
BACKLOG = 128

Handler = Callable[[Request, Frontier], None]


def make_handler(guard: contextlib.AbstractContextManager[Any]) -> Handler:
    """Fetch the page, find its links, push them (``push_many`` inside ``guard``)."""

    def handler(request: Request, frontier: Frontier) -> None:
        with urllib.request.urlopen(request.url, timeout=30) as response:  # noqa: S310  # http only
            html = response.read().decode()
        links = [Request(url, priority=int(priority)) for url, priority in LINK.findall(html)]
        with guard:
            frontier.push_many(links)

    return handler


def run_loop(frontier: Frontier, workers: int) -> dict:
    handler = make_handler(contextlib.nullcontext())
    while (request := frontier.pop(timeout=None)) is not None:
        handler(request, frontier)
        frontier.done(request)
    return {}


def run_crawl(frontier: Frontier, workers: int) -> dict:
    stats = crawl(frontier, make_handler(contextlib.nullcontext()), workers=workers, progress=False)
    if stats.stopped_by != "finished" or stats.retried or stats.failed:
        raise SystemExit(f"crawl() stopped by {stats.stopped_by!r} with {stats.retried} retried "
                         f"and {stats.failed} failed")
    return {"handled": stats.handled}


def run_executor(frontier: Frontier, workers: int) -> dict:
    lock = threading.Lock()
    handler = make_handler(lock)

    def work(request: Request) -> None:
        handler(request, frontier)
        with lock:
            frontier.done(request)

    running: set[concurrent.futures.Future[None]] = set()
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        while True:
            request = None
            if len(running) < workers:
                with lock:
                    request = frontier.pop()
            if request is not None:
                running.add(pool.submit(work, request))
                continue
            if running:
                finished, running = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    future.result()
                continue
            with lock:
                if frontier.finished:
                    break
                raise SystemExit(f"ThreadPoolExecutor loop: nothing ready, nothing running, and the frontier "
                                 f"is not finished: {frontier.stats()}")
    return {}


WAYS: dict[str, Callable[[Frontier, int], dict]] = {"loop": run_loop, "crawl()": run_crawl, "TPE": run_executor}


def one_run(site: MultiHostSite, way: str, workers: int) -> dict:
    """Crawl the whole site once with ``way``; check it; its pages a second."""
    before = site.fetched()
    with tempfile.TemporaryDirectory(prefix="dfbench-runs-") as work:
        frontier = Frontier(os.path.join(work, "job"), delay=0.0)
        try:
            started = time.perf_counter()
            frontier.push(Request(site.url(0), priority=1))
            extra = WAYS[way](frontier, workers)
            seconds = time.perf_counter() - started
            stats = frontier.stats()
            finished = frontier.finished
        finally:
            frontier.close()
    fetched = site.fetched()
    fetched.subtract(before)
    fetched = Counter({path: count for path, count in fetched.items() if count})
    expected = {f"/page/{n}" for n in range(site.pages)}
    problems = []
    if set(fetched) != expected:
        missing, unexpected = expected - set(fetched), set(fetched) - expected
        problems.append(f"{len(missing)} pages not fetched (e.g. {sorted(missing)[:3]}), "
                        f"{len(unexpected)} unexpected paths (e.g. {sorted(unexpected)[:3]})")
    twice = {path: count for path, count in fetched.items() if count != 1}
    if twice:
        problems.append(f"{len(twice)} pages fetched more than once (e.g. {sorted(twice.items())[:3]})")
    if not finished or stats["done"] != site.pages or stats["pending"] or stats["in_flight"]:
        problems.append(f"frontier not finished: done {stats['done']}, pending {stats['pending']}, "
                        f"in flight {stats['in_flight']}")
    if extra.get("handled", site.pages) != site.pages:
        problems.append(f"crawl() handled {extra['handled']} requests for {site.pages} pages")
    if problems:
        raise SystemExit(f"{way} with {workers} workers, {site.pages} pages: " + "; ".join(problems))
    return {"rate": site.pages / seconds, "seconds": seconds}


def contenders() -> list[tuple[str, int]]:
    return [("loop", 1)] + [(way, w) for w in WORKERS for way in ("crawl()", "TPE")]


def open_site(pages: int, site_delay: float) -> MultiHostSite:
    """The demo site, each server listening with a backlog of ``BACKLOG`` connections."""
    site = MultiHostSite(pages, hosts=4, share=0.5, delay=site_delay)
    for server in site.servers:
        server.socket.listen(BACKLOG)
    return site


def bench(pages: int, site_delay: float, repeats: int) -> dict[tuple[str, int], list[dict]]:
    results: dict[tuple[str, int], list[dict]] = {key: [] for key in contenders()}
    with open_site(pages, site_delay) as site:
        with open_site(min(pages, 100), site_delay) as warm:
            for way, workers in contenders():
                one_run(warm, way, workers)
        for rep in range(repeats):
            order = contenders()
            order = order[rep % len(order):] + order[:rep % len(order)]
            for way, workers in order:
                results[(way, workers)].append(one_run(site, way, workers))
            print(f"site delay {site_delay:g} s: repeat {rep + 1}/{repeats} done", file=sys.stderr)
    return results


def median_rate(runs: list[dict]) -> float:
    return statistics.median(r["rate"] for r in runs)


def print_table(results: dict[tuple[str, int], list[dict]], pages: int, site_delay: float, repeats: int) -> None:
    loop = median_rate(results[("loop", 1)])
    print(f"\n{pages:,} pages on 4 hosts, site delay {site_delay:g} s a response; medians of {repeats}")
    print(f"{'way':<10}{'workers':>8}{'pages/s':>10}{'min':>9}{'max':>9}{'x loop':>9}{'crawl()/TPE':>13}")
    for way, workers in contenders():
        runs = results[(way, workers)]
        rate = median_rate(runs)
        low, high = min(r["rate"] for r in runs), max(r["rate"] for r in runs)
        versus = ""
        if way == "crawl()":
            versus = f"{rate / median_rate(results[('TPE', workers)]):.2f}x"
        print(f"{way:<10}{workers:>8}{rate:>10,.0f}{low:>9,.0f}{high:>9,.0f}{rate / loop:>8.2f}x{versus:>13}")


def results_table(results: dict[tuple[str, int], list[dict]], pages: int, site_delay: float, repeats: int) -> dict:
    """The table ``print_table`` prints, as data for benchmarks/results/bench_runs.json."""
    loop = median_rate(results[("loop", 1)])
    rows = []
    for way, workers in contenders():
        runs = results[(way, workers)]
        rate = median_rate(runs)
        versus = rate / median_rate(results[("TPE", workers)]) if way == "crawl()" else None
        rows.append([way, workers, rate, min(r["rate"] for r in runs), max(r["rate"] for r in runs), rate / loop,
                     versus])
    return benchresults.table(
        f"{pages:,} pages on 4 hosts, site delay {site_delay:g} s a response; medians of {repeats}",
        [("way", None), ("workers", "{}"), ("pages/s", "{:,.0f}"), ("min", "{:,.0f}"), ("max", "{:,.0f}"),
         ("x loop", "{:.2f}x"), ("crawl()/TPE", "{:.2f}x")], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=None, help="pages of the site (default 2,000; 300 with --quick)")
    parser.add_argument("--repeats", type=int, default=None, help="runs of each way (default 3; 1 with --quick)")
    parser.add_argument("--site-delay", type=float, nargs="+", default=[0.0, 0.005],
                        help="seconds the site spends on each response, one table each (default 0 0.005)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 300 pages, 1 repeat")
    benchresults.add_argument(parser, "bench_runs")
    args = parser.parse_args()
    pages = args.pages if args.pages is not None else (300 if args.quick else 2_000)
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    if pages < 1 or repeats < 1 or any(d < 0 for d in args.site_delay):
        parser.error("--pages and --repeats must be at least 1, --site-delay at least 0")
    tables = [(delay, bench(pages, delay, repeats)) for delay in args.site_delay]
    print(f"\nPython {platform.python_version()} ({platform.python_implementation()}), {os.cpu_count()} CPUs, "
          f"{pages:,} pages, {repeats} repeats; Frontier(delay=0), no per_host; urllib, a new connection a page")
    for delay, results in tables:
        print_table(results, pages, delay, repeats)
    sys.stdout.flush()
    benchresults.write(
        args.results, "bench_runs", {**vars(args), "pages": pages, "repeats": repeats},
        [results_table(results, pages, delay, repeats) for delay, results in tables],
        {f"site delay {delay:g}": {f"{way} {workers}": runs for (way, workers), runs in results.items()}
         for delay, results in tables})


if __name__ == "__main__":
    main()
