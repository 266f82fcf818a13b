"""Hosts and time: politeness costs, skew, memory per host, delayed requests, and a real
Scrapy crawl of a site on several loopback hosts side by side with Scrapy's own queues.

    pip install -e '.[bench]'
    python benchmarks/bench_hosts.py                  # everything (about 10 minutes here)
    python benchmarks/bench_hosts.py --only frontier  # or: skew, memory, scrapy

* frontier: pop+done per second with politeness off (the defaults) and on (``per_host=1``,
  ``delay=0``), at 10^3 and 10^5 hosts (200,000 requests spread evenly), medians of 3.
* skew: 10^6 URLs, one host holding 80%, ``per_host=1``: how many distinct hosts the first
  1,000 pops (no ``done``) cover, and how long they take.
* memory: RSS per host with pending requests (10^5 hosts, one request each, against the
  same number of requests on one host), and RSS per delayed request (10^6 pushed with a
  ``not_before``); each measured in a fresh child process.
* scrapy: a Scrapy crawl of a 400-page site served on 127.0.0.2 ... 127.0.0.9, one host
  holding 80% of the pages, ``DOWNLOAD_DELAY`` set: pages per second with
  ``diskfrontier.scrapy.Scheduler`` (its default ``DISKFRONTIER_PREFER = "idle"``) and
  with Scrapy's scheduler with ``JOBDIR`` and its ``DownloaderAwarePriorityQueue`` (its
  default) and ``ScrapyPriorityQueue``, with when the last page of the seven small hosts was
  served and how many pages were served in the first 5 seconds (how well the order keeps
  the downloader's other slots busy while the big host's delay binds); then the
  diskfrontier crawl killed with SIGKILL twice and resumed: pages never fetched.

The machines are shared and noisy: read the medians and ratios.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import benchresults

from diskfrontier import Frontier, Request

HERE = os.path.abspath(__file__)
DIVIDE = 1  # --quick: every size divided by 10
TABLES: list[dict] = []  # what each part printed, as data for benchmarks/results/bench_hosts.json
FIGURES: dict[str, object] = {}


def request(url: str) -> Request:
    """A request with a sha1 of its URL as fingerprint (what is measured here is not fingerprinting)."""
    return Request(url, fingerprint=hashlib.sha1(url.encode(), usedforsecurity=False).digest())


# ---------------------------------------------------------------------- frontier
def pop_done_rate(work: str, n: int, hosts: int, polite: bool) -> float:
    job = os.path.join(work, f"pd-{hosts}-{polite}")
    shutil.rmtree(job, ignore_errors=True)
    requests = [request(f"https://h{i % hosts}.example/p/{i}") for i in range(n)]
    with Frontier(job, per_host=1 if polite else None) as frontier:
        frontier.push_many(requests)
    with Frontier(job, per_host=1 if polite else None) as frontier:
        started = time.perf_counter()
        count = 0
        while (r := frontier.pop()) is not None:
            frontier.done(r)
            count += 1
        elapsed = time.perf_counter() - started
    assert count == n, count
    shutil.rmtree(job)
    return n / elapsed


def bench_frontier(work: str, repeat: int) -> None:
    n = 200_000 // DIVIDE
    print(f"\npop+done of {n:,} requests, per second (median of {repeat})")
    rows = []
    print(f"{'hosts':>8}  {'politeness off':>15}  {'per_host=1':>12}  {'on/off':>7}  {'us/pop+done on':>15}")
    per_pop = {}
    for hosts in (1_000, 100_000):
        off = statistics.median(pop_done_rate(work, n, hosts, False) for _ in range(repeat))
        on = statistics.median(pop_done_rate(work, n, hosts, True) for _ in range(repeat))
        per_pop[hosts] = 1e6 / on
        print(f"{hosts:>8,}  {off:>15,.0f}  {on:>12,.0f}  {on / off:>6.2f}x  {1e6 / on:>15.1f}")
        rows.append([hosts, off, on, on / off, 1e6 / on])
    growth = per_pop[100_000] / per_pop[1_000]
    note = (f"cost of a polite pop+done at 10^5 hosts / at 10^3 hosts: {growth:.2f}x "
            f"(log(10^5)/log(10^3) = {math.log(1e5) / math.log(1e3):.2f}x; target: on/off >= 0.50x)")
    print(note)
    TABLES.append(benchresults.table(
        f"pop+done of {n:,} requests, per second (median of {repeat})",
        [("hosts", "{:,}"), ("politeness off", "{:,.0f}"), ("per_host=1", "{:,.0f}"), ("on/off", "{:.2f}x"),
         ("us/pop+done on", "{:.1f}")], rows, [note]))


# ---------------------------------------------------------------------- skew
def skew_url(i: int) -> str:
    """80% on one host, the rest over 50,000 hosts, interleaved as a crawl finds links."""
    return f"https://big.example/p/{i}" if i % 5 else f"https://h{(i // 5) % 50_000}.example/p/{i}"


def first_pops(work: str, n: int, per_host: int | None) -> tuple[list[str], float, float]:
    """(the hosts of the first 1,000 pops without a done, seconds to push n, seconds for the pops)."""
    job = os.path.join(work, f"skew-{per_host}")
    shutil.rmtree(job, ignore_errors=True)
    started = time.perf_counter()
    with Frontier(job, per_host=per_host) as frontier:
        for start in range(0, n, 10_000):
            frontier.push_many(request(skew_url(i)) for i in range(start, min(n, start + 10_000)))
        pushed = time.perf_counter() - started
        started = time.perf_counter()
        hosts = [frontier.pop().slot for _ in range(1000)]
        took = time.perf_counter() - started
    shutil.rmtree(job)
    return hosts, pushed, took


def bench_skew(work: str) -> None:
    n = 1_000_000 // DIVIDE
    polite, pushed, took = first_pops(work, n, 1)
    plain, _, _ = first_pops(work, n, None)
    print(f"\nskew: {n:,} URLs, one host 80% (pushed in {pushed:.1f}s)")
    print(f"the first 1,000 pops without a done cover {len(set(polite)):,} distinct hosts with per_host=1, in "
          f"{took * 1e3:.0f} ms (target: 1,000); {len(set(plain)):,} without politeness "
          f"({plain.count('big.example'):,} of them the big host)")
    TABLES.append(benchresults.table(
        f"skew: {n:,} URLs, one host 80% (pushed in {pushed:.1f} s): the first 1,000 pops without a done",
        [("frontier", None), ("distinct hosts", "{:,}"), ("of them the big host", "{:,}"), ("target", None)],
        [["per_host=1", len(set(polite)), polite.count("big.example"), "1,000 distinct hosts"],
         ["no politeness", len(set(plain)), plain.count("big.example"), ""]],
        [f"the 1,000 polite pops took {took * 1e3:.0f} ms"]))


def bench_many_hosts(work: str) -> tuple[list[str], list[str]]:
    """10^6 hosts with a request each, under a limit of 1,024 descriptors: pushed, reopened, all popped."""
    n = 1_000_000 // DIVIDE
    job = os.path.join(work, "many")
    run_child("build-hosts", job, n)
    result = run_child("pop-all", job, n)
    print(f"\n{n:,} hosts with one request each, RLIMIT_NOFILE 1,024: a clean open takes {result['open']:.2f}s and "
          f"{result['rss'] / n:.0f} B of RSS per host; per_host=1 hands out one request of each of "
          f"{result['distinct']:,} hosts in {result['pops']:.1f}s ({n / result['pops']:,.0f}/s)")
    FIGURES["many_hosts"] = {"hosts": n, **result}
    return [f"{n:,} hosts with one request each, RLIMIT_NOFILE 1,024: clean open",
            f"{result['open']:.2f} s, {result['rss'] / n:.0f} B of RSS per host", ""], \
           [f"{n:,} hosts, per_host=1: one request of each host handed out",
            f"{result['pops']:.1f} s ({n / result['pops']:,.0f}/s)", ""]
    shutil.rmtree(job)


def bench_delayed_arrays() -> list[str]:
    """10^7 delayed requests in the compact arrays themselves."""
    from diskfrontier.politeness.delayed import DelayedRequests

    n = 10_000_000 // DIVIDE
    before = _rss()
    held = DelayedRequests()
    now = time.time()
    for i in range(n):
        held.add(now + 3600 + i % 86_400, i * 64, -(i % 4))
    each = (_rss() - before) / n
    print(f"{n:,} requests waiting for a time (over a day) in the arrays: {each:.1f} B each, "
          f"{len(held._buckets):,} buckets")
    return [f"{n:,} requests waiting for a time (over a day), in the arrays alone",
            f"{each:.1f} B each ({len(held._buckets):,} buckets)", ""]


# ---------------------------------------------------------------------- memory
def child_memory(kind: str, path: str, count: int) -> None:
    """In a fresh process: RSS after opening a frontier of ``kind``."""
    if kind.startswith("build-"):
        with Frontier(path, per_host=1) as frontier:
            frontier.push_many(request(f"https://h{i if kind == 'build-hosts' else 0}.example/p/{i}")
                               for i in range(count))
        print("{}")
    elif kind == "pop-all":
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
        before = _rss()
        started = time.perf_counter()
        frontier = Frontier(path, per_host=1)
        opened = time.perf_counter() - started
        rss = _rss() - before
        started = time.perf_counter()
        slots = set()
        while (r := frontier.pop()) is not None:
            slots.add(r.slot)
        pops = time.perf_counter() - started
        print(json.dumps({"open": opened, "rss": rss, "distinct": len(slots), "pops": pops}))
        frontier.close()
    elif kind == "hosts" or kind == "onehost":
        before = _rss()
        frontier = Frontier(path, per_host=1)
        opened = _rss()
        for info in frontier.hosts():  # no host ready: the next pop pulls every request into the host buffers
            frontier.block(info.host, math.inf)
        assert frontier.pop() is None and frontier.stats()["buffered"] == count
        buffered = _rss()
        print(json.dumps({"open": opened - before, "buffered": buffered - before, "hosts": len(frontier.hosts())}))
        frontier.close()
    elif kind == "delayed":
        due = time.time() + 86400
        before = _rss()
        with Frontier(path) as frontier:
            for start in range(0, count, 10_000):
                frontier.push_many(Request(f"https://h{i % 1000}.example/p/{i}",
                                           fingerprint=hashlib.sha1(b"%d" % i, usedforsecurity=False).digest()) for i in
                                   range(start, min(count, start + 10_000)))
            seen_only = _rss()
        shutil.rmtree(path)
        with Frontier(path) as frontier:
            for start in range(0, count, 10_000):
                batch = []
                for i in range(start, min(count, start + 10_000)):
                    r = Request(f"https://h{i % 1000}.example/p/{i}",
                                fingerprint=hashlib.sha1(b"%d" % i, usedforsecurity=False).digest())
                    r.not_before = due + i % 3600
                    batch.append(r)
                frontier.push_many(batch)
            held = _rss()
            print(json.dumps({"rss_ready": seen_only - before, "rss_delayed": held - before,
                              "delayed": frontier.stats()["delayed"]}))


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_child(*args: object) -> dict:
    out = subprocess.run([sys.executable, HERE, "--child", *map(str, args)], capture_output=True,
                         text=True, check=True, timeout=3600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_memory(work: str) -> None:
    hosts = 100_000 // DIVIDE
    run_child("build-hosts", os.path.join(work, "mem-hosts"), hosts)  # built in another process than measured
    run_child("build-one", os.path.join(work, "mem-one"), hosts)
    many = run_child("hosts", os.path.join(work, "mem-hosts"), hosts)
    one = run_child("onehost", os.path.join(work, "mem-one"), hosts)
    print(f"\nmemory: {hosts:,} requests on {hosts:,} hosts against the same on one host (RSS of a fresh process)")
    print(f"  after a clean open (host table):              {(many['open'] - one['open']) / hosts:6.0f} B per host "
          f"(target <= 100 B)")
    print(f"  every request pulled into its host's buffer:  {(many['buffered'] - one['buffered']) / hosts:6.0f} B per "
          f"host, {one['buffered'] / hosts:.0f} B per buffered request on one host")
    rows = [["after a clean open (host table), per host", f"{(many['open'] - one['open']) / hosts:.0f} B",
             "<= 100 B"],
            ["every request pulled into its host's buffer, per host",
             f"{(many['buffered'] - one['buffered']) / hosts:.0f} B", ""],
            ["a buffered request, all on one host", f"{one['buffered'] / hosts:.0f} B", ""]]
    rows += bench_many_hosts(work)
    n = 1_000_000 // DIVIDE
    delayed = run_child("delayed", os.path.join(work, "mem-delayed"), n)
    extra = (delayed["rss_delayed"] - delayed["rss_ready"]) / n
    print(f"delayed: {delayed['delayed']:,} requests waiting for a time cost {extra:.1f} B each more than the same "
          f"requests ready (compact arrays: 20 B of entries plus array growth)")
    rows.append([f"{delayed['delayed']:,} requests waiting for a time, more than the same requests ready",
                 f"{extra:.1f} B each", ""])
    rows.append(bench_delayed_arrays())
    TABLES.append(benchresults.table(
        f"memory: {hosts:,} requests on {hosts:,} hosts against the same on one host (RSS of a fresh process), "
        f"hosts by the thousand, delayed requests",
        [("figure", None), ("measured", None), ("target", None)], rows))
    FIGURES["memory"] = {"hosts": hosts, "many": many, "one": one, "delayed": delayed}


# ---------------------------------------------------------------------- scrapy
SPIDER = '''
import json, re, sys
import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess
LINK = re.compile(r'<a href="([^"]+)" data-priority="(-?\\d+)">')

class SiteSpider(scrapy.Spider):
    name = "site"
    def __init__(self, base, **kw):
        super().__init__(**kw)
        self.start_urls = [base + "/page/0"]
    def parse(self, response):
        for href, priority in LINK.findall(response.text):
            yield response.follow(href, callback=self.parse, priority=int(priority))

jobdir, base, stats_file, settings_json = sys.argv[1:]
settings = {"JOBDIR": jobdir, "LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False, "ROBOTSTXT_OBEY": False,
            "RETRY_ENABLED": False}
settings.update(json.loads(settings_json))
process = CrawlerProcess(settings)
crawler = process.create_crawler(SiteSpider)
def done(spider, reason):
    with open(stats_file, "w") as f:
        json.dump({k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float))}, f)
crawler.signals.connect(done, signal=signals.spider_closed)
process.crawl(crawler, base=base)
process.start()
'''

CONTENDERS = {
    "diskfrontier": {"SCHEDULER": "diskfrontier.scrapy.Scheduler"},
    "scrapy DAPQ": {"SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue"},
    "scrapy SPQ": {"SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue"},
}


def spread(site) -> tuple[float, int]:
    """From the site's log of one crawl: when the last page of the small hosts was served, and
    how many pages were served in the first ``EARLY`` seconds (both from the first request)."""
    log = list(site.log)
    start = min(t for _, _, t in log)
    small_done = max((t for host, _, t in log if host != site.addresses[0]), default=start) - start
    return small_done, sum(1 for _, _, t in log if t - start <= EARLY)


EARLY = 5.0


def crawl(work: str, site, name: str, settings: dict, kill_at: int | None = None) -> tuple[float, int]:
    """Run one crawl (to its end, or killed with SIGKILL once ``kill_at`` pages were served)."""
    job = os.path.join(work, "crawl-" + name.replace(" ", "-"))
    stats = os.path.join(work, "stats.json")
    script = os.path.join(work, "spider.py")
    with open(script, "w") as f:
        f.write(SPIDER)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, script, job, site.base, stats, json.dumps(settings)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if kill_at is not None:
        while len(site.fetched()) < kill_at and proc.poll() is None:
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=900)
    elapsed = time.perf_counter() - started
    if kill_at is None and proc.returncode != 0:
        raise RuntimeError(err.decode()[-2000:])
    return elapsed, len(site.fetched())


def bench_scrapy(work: str, repeat: int, args: argparse.Namespace) -> None:
    from diskfrontier.run.demo import MultiHostSite

    pages, delay, share, concurrency = args.pages, args.delay, args.share, args.concurrency
    common = {"DOWNLOAD_DELAY": delay, "CONCURRENT_REQUESTS": concurrency}
    print(f"\nScrapy crawl: {pages} pages on 8 loopback hosts (127.0.0.2 holds {share:.0%}), DOWNLOAD_DELAY = "
          f"{delay}, CONCURRENT_REQUESTS = {concurrency}, JOBDIR; median of {repeat}")
    print(f"{'scheduler':<14}  {'seconds':>8}  {'pages/s':>8}  {'vs diskfrontier':>16}  {'small hosts done':>17}  "
          f"{f'pages in first {EARLY:g}s':>19}")
    rates, rows = {}, []
    for name, settings in CONTENDERS.items():
        runs, small, early = [], [], []
        for _ in range(repeat):
            shutil.rmtree(os.path.join(work, "crawl-" + name.replace(" ", "-")), ignore_errors=True)
            with MultiHostSite(pages, hosts=8, share=share) as site:
                elapsed, fetched = crawl(work, site, name, {**common, **settings})
                assert fetched == pages, (name, fetched)
                runs.append(elapsed)
                small_done, first = spread(site)
                small.append(small_done)
                early.append(first)
        seconds = statistics.median(runs)
        rates[name] = pages / seconds
        print(f"{name:<14}  {seconds:>8.2f}  {pages / seconds:>8.1f}  "
              f"{rates[name] / rates['diskfrontier']:>15.2f}x  {statistics.median(small):>16.2f}s  "
              f"{statistics.median(early):>19.0f}")
        rows.append([name, seconds, pages / seconds, rates[name] / rates["diskfrontier"], statistics.median(small),
                     statistics.median(early)])
    job = os.path.join(work, "crawl-diskfrontier")
    shutil.rmtree(job, ignore_errors=True)
    with MultiHostSite(pages, hosts=8, share=share) as site:
        settings = {**common, **CONTENDERS["diskfrontier"]}
        for kill_at in (pages // 4, pages * 5 // 8):
            crawl(work, site, "diskfrontier", settings, kill_at=kill_at)
        crawl(work, site, "diskfrontier", settings)
        fetched = site.fetched()
    never = pages - sum(1 for n in range(pages) if fetched[f"/page/{n}"])
    again = sum(count - 1 for count in fetched.values())
    killed = (f"diskfrontier killed with SIGKILL at {pages // 4} and {pages * 5 // 8} pages, then resumed: {never} "
              f"never fetched, {again} fetched again")
    print(killed)
    TABLES.append(benchresults.table(
        f"Scrapy crawl: {pages} pages on 8 loopback hosts (127.0.0.2 holds {share:.0%}), DOWNLOAD_DELAY = {delay}, "
        f"CONCURRENT_REQUESTS = {concurrency}, JOBDIR; median of {repeat}",
        [("scheduler", None), ("seconds", "{:.2f}"), ("pages/s", "{:.1f}"), ("vs diskfrontier", "{:.2f}x"),
         ("small hosts done", "{:.2f} s"), (f"pages in first {EARLY:g} s", "{:.0f}")], rows, [killed]))
    FIGURES["scrapy_killed"] = {"never_fetched": never, "fetched_again": again}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["frontier", "skew", "memory", "scrapy"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pages", type=int, default=400, help="scrapy: pages of the site")
    parser.add_argument("--share", type=float, default=0.8, help="scrapy: the share of the pages on the first host")
    parser.add_argument("--delay", type=float, default=0.05, help="scrapy: DOWNLOAD_DELAY")
    parser.add_argument("--concurrency", type=int, default=16, help="scrapy: CONCURRENT_REQUESTS")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="every size divided by 10 (a smoke run)")
    benchresults.add_argument(parser, "bench_hosts")
    args = parser.parse_args()
    global DIVIDE
    DIVIDE = 10 if args.quick else 1
    if args.child:
        kind, path, count = args.child
        child_memory(kind, path, int(count))
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))  # as the issue's limit: no descriptor per host
    work = tempfile.mkdtemp(prefix="bench-hosts-")
    try:
        if args.only in (None, "frontier"):
            bench_frontier(work, args.repeat)
        if args.only in (None, "skew"):
            bench_skew(work)
        if args.only in (None, "memory"):
            bench_memory(work)
        if args.only in (None, "scrapy"):
            bench_scrapy(work, args.repeat, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    benchresults.write(args.results, "bench_hosts", vars(args), TABLES, FIGURES)


if __name__ == "__main__":
    main()
