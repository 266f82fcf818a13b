"""Four real ``scrapy crawl`` processes on one Redis crawl, one killed with SIGKILL twice: diskfrontier's
scheduler and scrapy-redis's side by side, on the same redis-server, the same site, the same kills."""

from __future__ import annotations

import time

import pytest
from scrapykit import finish, start_crawl

from diskfrontier import RedisFrontier
from diskfrontier.demo import SyntheticSite

pytestmark = pytest.mark.crash
PAGES = 1000
PROCESSES = 4
KILL_AT = (150, 450)


def settings_for(scheduler: str, url: str) -> tuple[str, ...]:
    if scheduler == "diskfrontier":
        return (f"DISKFRONTIER_URL={url}", "DISKFRONTIER_CRAWL=site", "DISKFRONTIER_LEASE=2")
    return ("SCHEDULER=scrapy_redis.scheduler.Scheduler", "DUPEFILTER_CLASS=scrapy_redis.dupefilter.RFPDupeFilter",
            f"REDIS_URL={url}", "SCHEDULER_PERSIST=true")


def crawl_together(tmp_path, scheduler: str, url: str) -> tuple[int, int, float]:
    """Crawl with PROCESSES processes; SIGKILL the first at each of KILL_AT pages and start it again.

    Returns (pages never fetched, fetches beyond one a page, seconds)."""
    extra = settings_for(scheduler, url)
    kind = "diskfrontier" if scheduler == "diskfrontier" else "scrapy"
    started = time.monotonic()
    with SyntheticSite(PAGES, delay=0.01) as site:
        def start(n: int):
            return start_crawl(str(tmp_path / f"{scheduler}-{n}"), site, kind, str(tmp_path / f"{scheduler}-{n}.json"),
                               *extra)

        procs = [start(n) for n in range(PROCESSES)]
        for round_no, threshold in enumerate(KILL_AT):
            deadline = time.monotonic() + 120
            while len(site.fetched()) < threshold and time.monotonic() < deadline:
                if all(p.poll() is not None for p in procs):
                    break  # every process has stopped
                time.sleep(0.005)
            procs[0].kill()  # SIGKILL
            procs[0].wait()
            procs[0] = start(PROCESSES + round_no)
        for proc in procs:
            log = finish(proc, timeout=180)
            assert proc.returncode == 0, log[-3000:]
        fetched = site.fetched()
    expected = {f"/page/{n}" for n in range(PAGES)}
    never = len(expected - set(fetched))
    again = sum(count - 1 for path, count in fetched.items() if path in expected)
    return never, again, time.monotonic() - started


def test_four_processes_one_killed_twice_side_by_side_with_scrapy_redis(tmp_path, redis_server):
    client = redis_server.client()
    client.flushall()
    ours = crawl_together(tmp_path, "diskfrontier", redis_server.url)
    with RedisFrontier(redis_server.url, crawl="site") as frontier:
        stats = frontier.stats()
    client.flushall()
    theirs = crawl_together(tmp_path, "scrapy-redis", redis_server.url)
    client.flushall()
    print(f"\n{PAGES} pages, {PROCESSES} processes, one SIGKILLed at {KILL_AT[0]} and {KILL_AT[1]} pages:")
    print(f"  {'':14}{'never fetched':>15}{'fetched again':>15}{'seconds':>9}")
    for name, (never, again, seconds) in (("diskfrontier", ours), ("scrapy-redis", theirs)):
        print(f"  {name:14}{never:>15}{again:>15}{seconds:>9.1f}")
    assert ours[0] == 0  # nothing lost
    assert stats["pending"] == 0 and stats["in_flight"] == 0 and stats["done"] >= PAGES
    assert stats["reclaimed"] >= 1  # the killed process held leases, and they came back
