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
from scrapykit import finish, read_stats, start_crawl, stop_after

from diskfrontier import RedisFrontier
from diskfrontier.demo import SyntheticSite
from diskfrontier.request.fingerprint import request_fingerprint

pytestmark = pytest.mark.crash
SEED = int(os.environ.get("DISKFRONTIER_KILL_SEED", "20261206"))  # another seed: other kill points


def links(n: int, pages: int) -> list[int]:
    """The pages page ``n`` of the synthetic site links to (diskfrontier.demo)."""
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
        seen = set(frontier.seen_fingerprints())
        held = {request.fingerprint for request in frontier.pending_requests(leased=True)}
    done = [n for n in range(pages) if fingerprint(base, n) in seen and fingerprint(base, n) not in held]
    missing = [n for n in done if any(fingerprint(base, c) not in seen for c in links(n, pages))]
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
            done, missing = done_with_links_missing(redis_server.url, site.base, pages)
            assert done > 0
            assert missing == [], f"killed at {threshold} pages: done pages whose links were never stored"
        proc = start_crawl(str(tmp_path / "job"), site, "diskfrontier", str(tmp_path / "last.json"), *settings)
        log = finish(proc, timeout=180)
        assert proc.returncode == 0, log[-3000:]
        fetched = site.fetched()
    never = [n for n in range(pages) if not fetched[f"/page/{n}"]]
    again = sum(count - 1 for count in fetched.values())
    print(f"\nkilled after {kill_at} pages (seed {SEED}), {checks} checks of stopped crawls with pages done: "
          f"{again} fetched again, requests leased by the killed process at each kill {held_at_kills}")
    assert checks >= len(kill_at)
    assert never == []
    assert again <= sum(held_at_kills)  # only what a killed process held is fetched again
    with RedisFrontier(redis_server.url, crawl="killed") as frontier:
        assert frontier.stats()["done"] == pages and len(frontier) == 0
