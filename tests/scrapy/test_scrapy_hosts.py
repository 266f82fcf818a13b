"""Real Scrapy crawls of a site served on several loopback addresses (127.0.0.2 ... 127.0.0.9)."""

from __future__ import annotations

import pytest
from scrapykit import crawl_with_kills, finish, read_stats, start_crawl

from diskfrontier import Frontier
from diskfrontier.run.demo import MultiHostSite
from diskfrontier.scrapy.retry_after import retry_after_seconds

pytestmark = pytest.mark.crash


@pytest.mark.slow
def test_a_crawl_of_many_hosts_killed_twice_resumes_with_nothing_lost(tmp_path):
    pages = 200
    site = MultiHostSite(pages, hosts=8, delay=0.005)
    run = crawl_with_kills(tmp_path, "diskfrontier", pages, [50, 120], site=site, settings=("DOWNLOAD_DELAY=0.01",))
    assert run.final_returncode == 0, run.final_log[-3000:]
    assert run.never_fetched == 0
    assert run.refetched <= sum(run.in_flight_at_kills)  # only what was in flight at the kills comes again
    with Frontier(str(tmp_path / "job-diskfrontier")) as frontier:
        hosts = {h.host: h for h in frontier.hosts()}
    assert set(hosts) == set(site.addresses)
    assert sum(h.done for h in hosts.values()) >= pages
    assert hosts[site.addresses[0]].done > pages // 2  # the host that holds most of the links


def test_retry_after_blocks_the_slot_and_the_retry_replaces_the_request(tmp_path):
    site = MultiHostSite(40, hosts=4, unavailable=frozenset({"/page/3"}), retry_after=1)
    stats_path = str(tmp_path / "stats.json")
    job = str(tmp_path / "job")
    with site:
        # The engine's own heartbeat is turned off: only the scheduler's wake-up at the end of the
        # block brings the engine back to the blocked slot.
        proc = start_crawl(job, site, "diskfrontier", stats_path, "RETRY_ENABLED=true", "heartbeat=3600",
                           'DOWNLOADER_MIDDLEWARES={"diskfrontier.scrapy.RetryAfterMiddleware": 560}')
        log = finish(proc, timeout=60)
        assert proc.returncode == 0, log[-3000:]
        times = [t for _host, path, t in site.log if path == "/page/3"]
    assert len(times) == 2 and times[1] - times[0] >= 1.0  # the slot was blocked for Retry-After
    stats = read_stats(stats_path)
    assert stats["diskfrontier/retried"] == 1 and stats["diskfrontier/blocked"] == 1
    assert stats["retry/count"] == 1
    assert set(site.fetched()) == {f"/page/{n}" for n in range(40)}
    with Frontier(job) as frontier:
        assert len(frontier) == 0 and frontier.stats()["journal_bytes"] > 0


@pytest.mark.parametrize(("value", "want"), [
    (b"120", 120.0), (b" 5 ", 5.0), (b"Wed, 21 Oct 2015 07:28:00 GMT", 0.0), (b"soon", None), (None, None),
    (b"-3", None),
])
def test_retry_after_values(value, want):
    assert retry_after_seconds(value, now=1445412480.0 + 60) == want


def test_on_redis_the_engine_wakes_when_a_blocked_slot_frees_not_at_the_next_poll(tmp_path, redis_server):
    """The same Retry-After crawl on Redis, with the heartbeat off and a poll of a minute: the
    pop that found nothing saw when the block ends, and the engine is woken then."""
    client = redis_server.client()
    client.flushall()
    site = MultiHostSite(40, hosts=4, unavailable=frozenset({"/page/3"}), retry_after=1)
    with site:
        proc = start_crawl(str(tmp_path / "job"), site, "diskfrontier", str(tmp_path / "stats.json"),
                           f"DISKFRONTIER_URL={redis_server.url}", "DISKFRONTIER_CRAWL=hosts", "RETRY_ENABLED=true",
                           "heartbeat=3600", "DISKFRONTIER_POLL=60",
                           'DOWNLOADER_MIDDLEWARES={"diskfrontier.scrapy.RetryAfterMiddleware": 560}')
        log = finish(proc, timeout=45)  # a wake at the next poll would take 60 s
        assert proc.returncode == 0, log[-3000:]
        times = [t for _host, path, t in site.log if path == "/page/3"]
    client.flushall()
    assert len(times) == 2 and times[1] - times[0] >= 1.0
    assert set(site.fetched()) == {f"/page/{n}" for n in range(40)}
    assert read_stats(str(tmp_path / "stats.json"))["diskfrontier/retried"] == 1
