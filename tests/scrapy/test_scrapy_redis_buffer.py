"""Enqueued requests buffered on Redis (``DISKFRONTIER_PUSH_BATCH``), in real ``scrapy crawl`` processes.

A crawl fetches every page once with the buffer on and off, reporting every duplicate
(log line, ``dupefilter/filtered``, ``request_dropped``) as the site's links say it must;
the buffer stores them in fewer script calls. A crawl killed with SIGKILL at random points
and resumed loses nothing: after each kill, every page Redis holds as done has its links
stored, and at the end every page was fetched, again only if the killed process held it.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest
import scrapy
from scrapy import signals
from scrapy.utils.test import get_crawler
from scrapykit import finish, read_stats, start_crawl

from diskfrontier import RedisFrontier
from diskfrontier.request.fingerprint import request_fingerprint
from diskfrontier.run.demo import SyntheticSite
from diskfrontier.scrapy import Scheduler

pytestmark = pytest.mark.crash
SEED = int(os.environ.get("DISKFRONTIER_KILL_SEED", "20261206"))  # another seed: other kill points


class HandSpider(scrapy.Spider):
    name = "hand"


def open_scheduler(url: str, batch: int, dropped: list | None = None):
    """(crawler, scheduler): the scheduler of a crawler with no engine, driven by the test."""
    crawler = get_crawler(HandSpider, {"DISKFRONTIER_URL": url, "DISKFRONTIER_PUSH_BATCH": batch})
    if dropped is not None:
        crawler.signals.connect(lambda request, spider: dropped.append((request.url, spider.name)),
                                signal=signals.request_dropped, weak=False)
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.open(HandSpider())
    return crawler, scheduler


def stored(url: str) -> int:
    with RedisFrontier(url, crawl="hand") as frontier:
        return len(frontier)


def test_buffered_requests_are_pending_and_stored_by_batch_or_when_the_crawl_needs_them(redis_url):
    dropped: list = []
    crawler, scheduler = open_scheduler(redis_url, 3, dropped)
    assert scheduler.enqueue_request(scrapy.Request("https://a.example/1"))
    assert scheduler.enqueue_request(scrapy.Request("https://a.example/1"))  # a duplicate: told at the store
    assert len(scheduler) == 2 and scheduler.has_pending_requests() is True
    assert stored(redis_url) == 1  # has_pending_requests stored them: the crawl is not over
    assert dropped == [("https://a.example/1", "hand")]
    for n in (2, 3):
        assert scheduler.enqueue_request(scrapy.Request(f"https://a.example/{n}"))
    assert stored(redis_url) == 1 and len(scheduler) == 3
    assert scheduler.enqueue_request(scrapy.Request("https://a.example/4"))  # a batch of 3: stored
    assert stored(redis_url) == 4
    assert scheduler.enqueue_request(scrapy.Request("https://a.example/5"))
    handed = []
    while (request := scheduler.next_request()) is not None:  # nothing prefetched: the buffer is stored first
        handed.append(request.url)
    assert sorted(handed) == [f"https://a.example/{n}" for n in range(1, 6)]
    assert scheduler.enqueue_request(scrapy.Request("https://a.example/6"))
    assert scheduler.enqueue_request(scrapy.Request("https://a.example/2"))
    scheduler.close("finished")  # stores the buffer; the five handed out (no engine: not done) are given back
    assert stored(redis_url) == 6
    assert dropped == [("https://a.example/1", "hand"), ("https://a.example/2", "hand")]
    assert crawler.stats.get_value("dupefilter/filtered") == 2
    assert crawler.stats.get_value("scheduler/enqueued") == 6


def start_request(url: str) -> scrapy.Request:
    return scrapy.Request(url, dont_filter=True, meta={"is_start_request": True})


@pytest.mark.parametrize("batch", [500, 1])
def test_start_requests_are_treated_as_without_the_buffer(redis_url, batch):
    """A first run queues a dont_filter start request twice, as Scrapy does; a resumed run ("dedupe")
    drops those stored and queues one that never reached Redis (a kill lost it from the buffer)."""
    crawler, scheduler = open_scheduler(redis_url, batch)
    for url in ("https://a.example/", "https://a.example/", "https://b.example/"):
        assert scheduler.enqueue_request(start_request(url))
    scheduler.close("finished")
    assert stored(redis_url) == 3
    crawler, scheduler = open_scheduler(redis_url, batch)
    for url in ("https://a.example/", "https://b.example/", "https://c.example/"):
        scheduler.enqueue_request(start_request(url))
    scheduler.close("finished")
    assert stored(redis_url) == 4
    assert crawler.stats.get_value("dupefilter/filtered") == 2


def links(n: int, pages: int) -> list[int]:
    """The pages page ``n`` of the synthetic site links to (diskfrontier.run.demo)."""
    return [c for c in (2 * n + 1, 2 * n + 2, n // 2, 0) if c < pages]


def script_calls(client) -> int:
    stats = client.info("commandstats")
    return sum(stats.get(name, {}).get("calls", 0) for name in ("cmdstat_evalsha", "cmdstat_eval"))


def crawl(tmp_path, url: str, client, name: str, pages: int, *settings: str) -> tuple:
    """One crawl of a site of ``pages`` pages to its end: (fetches per path, stats, log, script calls)."""
    client.config_resetstat()
    with SyntheticSite(pages) as site:
        proc = start_crawl(str(tmp_path / name), site, "diskfrontier", str(tmp_path / f"{name}.json"),
                           f"DISKFRONTIER_URL={url}", f"DISKFRONTIER_CRAWL={name}", "LOG_LEVEL=DEBUG",
                           "DUPEFILTER_DEBUG=true", *settings)
        log = finish(proc, timeout=180)
        assert proc.returncode == 0, log[-3000:]
        fetched = site.fetched()
    return fetched, read_stats(str(tmp_path / f"{name}.json")), log, script_calls(client)


@pytest.mark.parametrize("batch", [500, 1])
def test_every_page_once_and_every_duplicate_reported(tmp_path, redis_server, batch):
    pages = 300
    client = redis_server.client()
    client.flushall()
    fetched, stats, log, calls = crawl(tmp_path, redis_server.url, client, f"b{batch}", pages,
                                       f"DISKFRONTIER_PUSH_BATCH={batch}")
    assert fetched == {f"/page/{n}": 1 for n in range(pages)}
    # every link to a page already enqueued is a duplicate; page 0 came as the start request
    duplicates = sum(len(links(n, pages)) for n in range(pages)) - (pages - 1)
    assert stats["dupefilter/filtered"] == duplicates
    assert stats["test/request_dropped"] == duplicates
    assert stats["test/request_dropped_by/site"] == duplicates  # the signal names the spider
    assert log.count("Filtered duplicate request: <GET ") == duplicates
    assert stats["scheduler/enqueued"] == pages
    with RedisFrontier(redis_server.url, crawl=f"b{batch}") as frontier:
        assert frontier.stats()["done"] == pages and len(frontier) == 0
    print(f"\nDISKFRONTIER_PUSH_BATCH={batch}: {calls} script calls for {pages} pages, {duplicates} duplicates")
    if batch == 1:  # per request: at least one push script call per enqueue_request
        assert calls >= pages + duplicates
    else:
        assert calls < (pages + duplicates) / 2


def fingerprint(base: str, n: int) -> bytes:
    return request_fingerprint("GET", f"{base}/page/{n}", b"")


def done_with_links_missing(url: str, base: str, pages: int) -> tuple[int, list[int]]:
    """(pages done in Redis, those among them with a link that is not in the seen set)."""
    with RedisFrontier(url, crawl="killed") as frontier:
        # has_seen, not a comparison with seen_fingerprints(): the seen set keeps 64-bit keys, not whole fingerprints
        seen = {n for n in range(pages) if frontier.has_seen(fingerprint(base, n))}
        held = {request.fingerprint for request in frontier.pending_requests(leased=True)}
    done = [n for n in sorted(seen) if fingerprint(base, n) not in held]
    missing = [n for n in done if any(c not in seen for c in links(n, pages))]
    return len(done), missing


def leases_of(client, pid: int) -> int:
    """Requests of the crawl leased to the process ``pid`` (a lease token starts with the client id,
    which ends in the pid)."""
    return sum(1 for owner in client.hvals("df:{killed}:owner") if owner.decode().split(":")[0].endswith(f"-{pid}"))


def run_until(proc, site, pages: int, url: str, total: int, rng: random.Random) -> int:
    """Let the crawl run until ``pages`` pages were fetched, stopping it (SIGSTOP) at random moments
    to check that every page done in Redis has its links stored; then SIGKILL it. How many checks."""
    checks = 0
    while len(site.fetched()) < pages:
        assert proc.poll() is None, finish(proc)[-3000:]
        time.sleep(rng.uniform(0.02, 0.1))
        proc.send_signal(signal.SIGSTOP)  # nothing is written while it is stopped: a consistent view
        try:
            done, missing = done_with_links_missing(url, site.base, total)
        finally:
            proc.send_signal(signal.SIGCONT)
        assert missing == [], f"done pages whose links were never stored: {missing[:10]}"
        checks += done > 0
    proc.kill()
    finish(proc)
    return checks


@pytest.mark.slow
def test_a_crawl_killed_at_random_points_loses_no_buffered_request(tmp_path, redis_server):
    pages = 800
    client = redis_server.client()
    client.flushall()
    rng = random.Random(SEED)
    kill_at = sorted(rng.sample(range(50, pages - 100), 4))
    settings = (f"DISKFRONTIER_URL={redis_server.url}", "DISKFRONTIER_CRAWL=killed", "DISKFRONTIER_LEASE=2")
    held_at_kills, checks = [], 0
    with SyntheticSite(pages, delay=0.01) as site:
        for number, threshold in enumerate(kill_at):
            proc = start_crawl(str(tmp_path / "job"), site, "diskfrontier", str(tmp_path / f"s{number}.json"),
                               *settings)
            checks += run_until(proc, site, threshold, redis_server.url, pages, rng)
            held_at_kills.append(leases_of(client, proc.pid))
            # (a kill soon after a start may come before the first group of requests is marked done:
            # none done is then a right answer, and the checks while it ran count only those with some)
            _, missing = done_with_links_missing(redis_server.url, site.base, pages)
            assert missing == [], f"killed at {threshold} pages: done pages whose links were never stored"
        proc = start_crawl(str(tmp_path / "job"), site, "diskfrontier", str(tmp_path / "last.json"), *settings)
        log = finish(proc, timeout=180)
        assert proc.returncode == 0, log[-3000:]
        fetched = site.fetched()
    never = [n for n in range(pages) if not fetched[f"/page/{n}"]]
    again = sum(count - 1 for count in fetched.values())
    print(f"\nkilled after {kill_at} pages (seed {SEED}), {checks} checks of stopped crawls with pages done: "
          f"{again} fetched again, requests leased by the killed process at each kill {held_at_kills}")
    assert checks >= len(kill_at)  # stopped crawls with pages done: the promise was looked at, not only assumed
    assert never == []
    assert again <= sum(held_at_kills)  # only what a killed process held is fetched again
    with RedisFrontier(redis_server.url, crawl="killed") as frontier:
        assert frontier.stats()["done"] == pages and len(frontier) == 0
