"""Four real ``scrapy crawl`` processes on one Redis crawl, one killed with SIGKILL twice: diskfrontier's
scheduler and scrapy-redis's side by side, on the same redis-server, the same site, the same kills."""

from __future__ import annotations

import time

import pytest
from scrapykit import finish, read_stats, start_crawl

from diskfrontier import RedisFrontier
from diskfrontier.run.demo import SyntheticSite

pytestmark = pytest.mark.crash
PAGES = 1000
PROCESSES = 4
KILL_AT = (150, 450)


def settings_for(scheduler: str, url: str) -> tuple[str, ...]:
    if scheduler == "diskfrontier":
        return (f"DISKFRONTIER_URL={url}", "DISKFRONTIER_CRAWL=site", "DISKFRONTIER_LEASE=2")
    return ("SCHEDULER=scrapy_redis.scheduler.Scheduler", "DUPEFILTER_CLASS=scrapy_redis.dupefilter.RFPDupeFilter",
            f"REDIS_URL={url}", "SCHEDULER_PERSIST=true")


def leases_of(client, pid: int) -> int:
    """How many requests of the crawl are leased to the process ``pid`` (a lease token is
    "client id:number", the client id ending in the pid)."""
    return sum(1 for owner in client.hvals("df:{site}:owner") if owner.decode().split(":")[0].endswith(f"-{pid}"))


def crawl_together(tmp_path, scheduler: str, url: str, client) -> tuple[int, int, float, int]:
    """Crawl with PROCESSES processes; SIGKILL the first at each of KILL_AT pages and start it again.

    With diskfrontier's scheduler, each kill waits until the process holds leases, so that the
    kill leaves requests that only a lease running out can give back.
    Returns (pages never fetched, fetches beyond one a page, seconds, leases held by the killed)."""
    extra = settings_for(scheduler, url)
    kind = "diskfrontier" if scheduler == "diskfrontier" else "scrapy"
    started = time.monotonic()
    orphaned = 0
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
            while scheduler == "diskfrontier" and not leases_of(client, procs[0].pid) and time.monotonic() < deadline:
                if len(site.fetched()) >= PAGES or procs[0].poll() is not None:
                    break
                time.sleep(0.001)
            procs[0].kill()  # SIGKILL
            procs[0].wait()
            if scheduler == "diskfrontier":
                orphaned += leases_of(client, procs[0].pid)
            procs[0] = start(PROCESSES + round_no)
        for proc in procs:
            log = finish(proc, timeout=180)
            assert proc.returncode == 0, log[-3000:]
        fetched = site.fetched()
    expected = {f"/page/{n}" for n in range(PAGES)}
    never = len(expected - set(fetched))
    again = sum(count - 1 for path, count in fetched.items() if path in expected)
    return never, again, time.monotonic() - started, orphaned


@pytest.mark.slow
def test_four_processes_one_killed_twice_side_by_side_with_scrapy_redis(tmp_path, redis_server):
    client = redis_server.client()
    client.flushall()
    ours = crawl_together(tmp_path, "diskfrontier", redis_server.url, client)
    with RedisFrontier(redis_server.url, crawl="site") as frontier:
        stats = frontier.stats()
    client.flushall()
    theirs = crawl_together(tmp_path, "scrapy-redis", redis_server.url, client)
    client.flushall()
    print(f"\n{PAGES} pages, {PROCESSES} processes, one SIGKILLed at {KILL_AT[0]} and {KILL_AT[1]} pages:")
    print(f"  {'':14}{'never fetched':>15}{'fetched again':>15}{'seconds':>9}")
    for name, (never, again, seconds, _) in (("diskfrontier", ours), ("scrapy-redis", theirs)):
        print(f"  {name:14}{never:>15}{again:>15}{seconds:>9.1f}")
    assert ours[0] == 0  # nothing lost
    assert stats["pending"] == 0 and stats["in_flight"] == 0 and stats["done"] >= PAGES
    assert ours[3] >= 1  # the killed process held leases when it died
    assert stats["reclaimed"] >= ours[3]  # and every one of them came back


def test_processes_idle_at_their_start_join_the_crawl_without_the_engines_heartbeat(tmp_path, redis_server):
    """Processes started together: one leases the start page, the others find nothing to do. With
    Scrapy's heartbeat turned off, only the scheduler's polling brings them into the crawl, and
    only it lets them see the crawl finish."""
    client = redis_server.client()
    client.flushall()
    extra = (*settings_for("diskfrontier", redis_server.url), "heartbeat=3600", "DISKFRONTIER_POLL=0.2")
    with SyntheticSite(400, delay=0.02) as site:
        procs = [start_crawl(str(tmp_path / f"job-{n}"), site, "diskfrontier", str(tmp_path / f"{n}.json"), *extra)
                 for n in range(3)]
        for proc in procs:
            log = finish(proc, timeout=60)
            assert proc.returncode == 0, log[-3000:]
        fetched = site.fetched()
    client.flushall()
    assert set(fetched) == {f"/page/{n}" for n in range(400)}
    dequeued = [read_stats(str(tmp_path / f"{n}.json")).get("scheduler/dequeued", 0) for n in range(3)]
    print(f"\nrequests handed out by each process: {dequeued}")
    assert sum(1 for n in dequeued if n > 0) >= 2  # the idle ones joined
