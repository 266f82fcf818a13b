"""crawl() and acrawl() on loopback sites: a 404 fails at once, classify decides, a host that keeps failing is
blocked with a doubling backoff (ended by a success), robots.txt is obeyed in the run."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import urllib.error
import urllib.request

import httpx
import pytest

from diskfrontier import Frontier, PermanentError, Request, acrawl, crawl
from diskfrontier.run.demo import LinkedSite
from diskfrontier.run.failurekinds import FailureKind


def fetch(request: Request, frontier) -> None:
    try:
        with urllib.request.urlopen(request.url, timeout=10) as response:  # noqa: S310 - loopback http
            response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise PermanentError(f"HTTP {exc.code}") from None
        raise


def test_a_404_fails_at_once_and_other_errors_are_retried(tmp_path):
    with LinkedSite(10, missing=frozenset({2, 3})) as site, Frontier(tmp_path / "job") as frontier:
        frontier.push_many(Request(f"{site.base}/docs/{n}.html") for n in range(6))
        frontier.push(Request("http://127.0.0.1:9/refused"))  # nothing listens on port 9: retried
        stats = crawl(frontier, fetch, workers=4, retries=2, backoff=0.01, progress=False)
        fetched = site.fetched()
        failed = {f.request.url: f for f in frontier.failed()}
    assert stats.done == 4 and stats.failed == 3 and stats.failed_at_once == 2 and stats.retried == 2
    assert fetched["/docs/2.html"] == fetched["/docs/3.html"] == 1  # one try each
    assert failed[f"{site.base}/docs/2.html"].error == "PermanentError: HTTP 404"
    assert failed[f"{site.base}/docs/2.html"].request.attempts == 0
    assert failed["http://127.0.0.1:9/refused"].request.attempts == 2


def test_classify_decides_fail_backoff_and_retry(tmp_path, caplog):
    seen: list[str] = []

    def classify(request, error):
        seen.append(type(error).__name__)
        if isinstance(error, KeyError):
            return "fail"
        if isinstance(error, LookupError):
            return FailureKind.BACKOFF
        if isinstance(error, ZeroDivisionError):
            return "sometimes"  # not a kind: logged, and the error is retried
        return None

    def handler(request, frontier):
        kind = request.url.rsplit("/", 1)[1]
        if request.attempts == 0:
            raise {"key": KeyError("k"), "index": IndexError("i"), "zero": ZeroDivisionError("z"),
                   "perm": PermanentError("p")}[kind]

    with Frontier(tmp_path / "job") as frontier:
        frontier.push_many(Request(f"https://{kind}.example/{kind}") for kind in ("key", "index", "zero", "perm"))
        with caplog.at_level(logging.ERROR, logger="diskfrontier"):
            stats = crawl(frontier, handler, workers=2, retries=1, backoff=0.01, classify=classify, host_backoff=0.2,
                          progress=False)
        blocked = frontier.host("index.example")
        assert blocked is not None
        failed = sorted(f.request.url for f in frontier.failed())
    assert sorted(seen) == ["IndexError", "KeyError", "PermanentError", "ZeroDivisionError"]
    assert failed == ["https://key.example/key", "https://perm.example/perm"]
    assert stats.failed_at_once == 2 and stats.retried == 2 and stats.done == 2
    assert stats.host_blocks == 1 and blocked.blocked_until is not None  # a backoff blocks at once
    assert "classify() failed" in caplog.text and "sometimes" in caplog.text


def test_a_host_answering_503_is_blocked_after_host_errors_with_a_doubling_backoff(tmp_path):
    with LinkedSite(20, address="127.0.0.2", status_for_all=503) as bad, Frontier(tmp_path / "job") as frontier:
        frontier.push_many(Request(f"{bad.base}/docs/{n}.html") for n in range(20))
        stats = crawl(frontier, fetch, workers=4, retries=3, backoff=0.01, host_errors=3, host_backoff=0.3,
                      host_backoff_max=0.6, duration=2.0, progress=False)
        times = [t for _path, t in bad.log]
        info = frontier.host("127.0.0.2")
        assert info is not None
    # unblocked: 80 tries (20 requests, 4 tries each) at full speed; blocked: 3, then one or two (per_host
    # is not set: the workers in hand) every 0.3 s, then every 0.6 s
    assert stats.host_blocks >= 2 and info.failures == len(times) and info.blocked_until is not None
    gaps = [b - a for a, b in itertools.pairwise(times)]
    long_gaps = [g for g in gaps if g >= 0.29]
    assert long_gaps, gaps
    assert len(times) < 80 and len(times) <= 3 + 4 * (len(long_gaps) + 1), (len(times), gaps)
    assert stats.stopped_by == "duration" and info.pending > 0  # the rest wait for the host


def test_a_success_ends_the_streak(tmp_path):
    with LinkedSite(12, address="127.0.0.2", status_for_all=503) as site, Frontier(tmp_path / "job") as frontier:
        frontier.push_many(Request(f"{site.base}/docs/{n}.html") for n in range(12))

        def handler(request, frontier):
            if len(site.log) >= 4:
                site.status_for_all = None  # the host is back
            fetch(request, frontier)

        stats = crawl(frontier, handler, workers=1, retries=3, backoff=0.01, host_errors=5, progress=False)
        info = frontier.host("127.0.0.2")
        assert info is not None
    assert stats.host_blocks == 0 and stats.done == 12 and info.failures == 0


def test_crawl_obeys_robots_txt(tmp_path):
    rules = "User-agent: *\nDisallow: /docs/2.html\nCrawl-delay: 0.05\n"
    with LinkedSite(5, robots=(200, rules)) as site, Frontier(tmp_path / "job") as frontier:
        frontier.push_many(Request(f"{site.base}/docs/{n}.html") for n in range(5))
        stats = crawl(frontier, fetch, workers=4, robots=True, user_agent="testbot/1.0", progress=False)
        fetched = site.fetched()
        failed = [(f.request.url, f.error) for f in frontier.failed()]
        host = frontier.host("127.0.0.1")
        assert host is not None
        delay = host.delay
        left, counts = len(frontier), frontier.stats()
    assert failed == []  # robots.txt saying no is not an error: the request is finished, never fetched
    assert (stats.robots_disallowed, stats.failed, stats.failed_at_once, stats.done) == (1, 0, 0, 4)
    assert left == 0 and (counts["failed"], counts["done"]) == (0, 5) and fetched["/robots.txt"] == 1
    assert "/docs/2.html" not in fetched and delay == 0.05


def test_crawl_holds_a_site_whose_robots_txt_answers_503_then_crawls_it(tmp_path):
    with LinkedSite(3, status_for_all=503) as site, Frontier(tmp_path / "job") as frontier:
        frontier.push_many(Request(f"{site.base}/docs/{n}.html") for n in range(3))

        def fetch_robots(url, user_agent):
            try:
                with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback http
                    return response.status, response.read()
            except urllib.error.HTTPError as exc:
                if len(site.log) >= 2:
                    site.status_for_all = None  # robots.txt answers 404 from the third ask on
                return exc.code, b""

        stats = crawl(frontier, fetch, workers=2, robots=True, user_agent="testbot", fetch_robots=fetch_robots,
                      host_backoff=0.1, host_backoff_max=0.2, progress=False)
        fetched = site.fetched()
    assert stats.robots_held >= 2 and stats.done == 3 and fetched["/robots.txt"] == 3
    assert all(fetched[f"/docs/{n}.html"] == 1 for n in range(3))


def test_robots_needs_a_user_agent(tmp_path):
    with Frontier(tmp_path / "job") as frontier, pytest.raises(ValueError, match="user_agent"):
        crawl(frontier, fetch, robots=True)


def test_acrawl_fails_404s_at_once_and_obeys_robots_with_an_async_fetch(tmp_path):
    async def fetch_robots(url, user_agent):
        async with httpx.AsyncClient(headers={"User-Agent": user_agent}) as client:
            response = await client.get(url)
            return response.status_code, response.content

    async def handler(request, frontier, client):
        response = await client.get(request.url)
        if response.status_code == 404:
            raise PermanentError("HTTP 404")
        response.raise_for_status()

    with LinkedSite(8, missing=frozenset({4}), robots=(200, "User-agent: *\nDisallow: /docs/5.html\n")) as site, \
            Frontier(tmp_path / "job") as frontier:
        frontier.push_many(Request(f"{site.base}/docs/{n}.html") for n in range(8))
        stats = asyncio.run(acrawl(frontier, handler, workers=3, setup=httpx.AsyncClient, robots=True,
                                   user_agent="testbot", fetch_robots=fetch_robots, progress=False))
        fetched = site.fetched()
    assert stats.done == 6 and stats.failed_at_once == 1 and stats.robots_disallowed == 1
    assert fetched["/docs/4.html"] == 1 and "/docs/5.html" not in fetched and fetched["/robots.txt"] == 1


def test_over_redis_a_failing_host_is_blocked_and_robots_txt_is_kept_for_the_next_run(redis_url, crawl_name):
    from diskfrontier import RedisFrontier

    with LinkedSite(6, address="127.0.0.2", status_for_all=503) as bad, \
            LinkedSite(4, robots=(200, "User-agent: *\nDisallow: /docs/1.html\n")) as good:
        with RedisFrontier(redis_url, crawl=crawl_name) as frontier:
            frontier.push_many(Request(f"{bad.base}/docs/{n}.html") for n in range(6))
            stats = crawl(frontier, fetch, workers=2, retries=3, backoff=0.01, host_errors=3, host_backoff=30.0,
                          duration=1.0, progress=False)
            info = frontier.host("127.0.0.2")
            assert info is not None
            assert stats.host_blocks >= 1 and info.failures == len(bad.log) and len(bad.log) <= 4
            assert info.blocked_until is not None and info.blocked_until > time.time() + 25
            frontier.unblock("127.0.0.2")
            frontier.push_many(Request(f"{good.base}/docs/{n}.html") for n in range(2))
            before = time.time()
            stats = crawl(frontier, fetch, workers=2, robots=True, user_agent="testbot", duration=1.0,
                          host_backoff=30.0, progress=False)
            held = frontier.host("127.0.0.2")
            assert held is not None
            waiting = [r.not_before for r in frontier.pending_requests() if r.slot == "127.0.0.2"]
        # the bad site's robots.txt answers 503: the site is held back (its requests wait for the hold's end,
        # the host itself is not blocked: other sites on it would go on), none of its pages asked for
        assert stats.robots_held >= 1 and (held.blocked_until or 0.0) < before
        assert len(waiting) == 6 and all(t is not None and t >= before + 30 for t in waiting)
        assert bad.fetched()["/robots.txt"] == 1 and len(bad.log) == info.failures + 1
        assert stats.robots_disallowed == 1 and stats.done == 1
        with RedisFrontier(redis_url, crawl=crawl_name) as frontier:  # another client: robots.txt is kept
            frontier.drop(host="127.0.0.2")
            frontier.push_many(Request(f"{good.base}/docs/{n}.html") for n in (2, 3))
            crawl(frontier, fetch, workers=2, robots=True, user_agent="testbot", progress=False)
        assert good.fetched()["/robots.txt"] == 1 and good.fetched()["/docs/2.html"] == 1
