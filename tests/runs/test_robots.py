"""robots.txt on loopback sites: allow and disallow, one fetch a site, Crawl-delay, 4xx (allow all), 5xx and
no answer (held back, then fetched again), kept across a restart (no new fetch), fetched again after its ttl;
one deadline for a whole fetch (a robots.txt sent a byte at a time), a fetch that hangs not waited for past
it nor after a stop; a site is an origin: a 5xx on one port of a host holds back that port's requests only."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from timing import Overran, with_longer_times
from tricklesite import TrickleSite

from diskfrontier import Frontier, RedisFrontier, Request, crawl
from diskfrontier.jobdir.reader import pending_requests
from diskfrontier.run.demo import LinkedSite
from diskfrontier.run.robots import ALLOW, DISALLOW, STOPPED, RobotsRules, fetch_with_urllib, site_of

RULES = "User-agent: *\nDisallow: /docs/3.html\n\nUser-agent: strictbot\nDisallow: /\n"


def page(site: LinkedSite, n: int) -> Request:
    return Request(f"{site.base}/docs/{n}.html")


def test_site_of_keys_by_origin_scheme_host_and_port():
    assert site_of("https://User@Shop.Example:8443/a?b") == ("https://shop.example:8443",
                                                              "https://Shop.Example:8443/robots.txt")
    assert site_of("http://[::1]/x") == ("http://[::1]", "http://[::1]/robots.txt")
    assert site_of("http://a.example:80/x")[0] == site_of("http://a.example/y")[0] == "http://a.example"
    assert site_of("https://a.example:443/")[0] == "https://a.example" != site_of("http://a.example/")[0]
    assert site_of("http://a.example:8080/")[0] == "http://a.example:8080"
    long = site_of(f"http://{'a' * 250}.example:8080/")[0]
    assert long.startswith("http://") and len(long.encode()) <= 255


def test_disallowed_paths_and_agents_and_one_fetch_for_many_workers(tmp_path):
    with LinkedSite(10, robots=(200, RULES), delay=0.05) as site, Frontier(tmp_path / "job") as frontier:
        rules = RobotsRules(frontier, "testbot/1.0")
        verdicts: list[tuple[int, object]] = []
        threads = [threading.Thread(target=lambda n=n: verdicts.append((n, rules.check(page(site, n)))))
                   for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert dict(verdicts) == {n: DISALLOW if n == 3 else ALLOW for n in range(8)}
        assert site.fetched()["/robots.txt"] == 1 and rules.fetched == 1
        strict = RobotsRules(frontier, "strictbot")
        assert strict.check(page(site, 4)) == DISALLOW
        assert site.fetched()["/robots.txt"] == 1  # kept in the frontier: not fetched again
        kept = frontier.robots(site_of(site.base)[0])
        assert kept is not None and kept.status == 200 and kept.body == RULES.encode()


@pytest.mark.parametrize(("own", "asked", "want"), [(0.0, 2.0, 2.0), (3.0, 1.0, 3.0)])
def test_crawl_delay_becomes_the_host_delay_never_below_the_frontier_delay(tmp_path, own, asked, want):
    with LinkedSite(4, robots=(200, f"User-agent: *\nCrawl-delay: {asked}\n")) as site, \
            Frontier(tmp_path / "job", delay=own) as frontier:
        rules = RobotsRules(frontier, "testbot")
        assert rules.check(page(site, 1)) == ALLOW
        host = frontier.host("127.0.0.1")
        assert host is not None and host.delay == want


@pytest.mark.parametrize("status", [404, 403, 410])
def test_a_4xx_robots_txt_allows_everything(tmp_path, status):
    with LinkedSite(4, robots=(status, "")) as site, Frontier(tmp_path / "job") as frontier:
        rules = RobotsRules(frontier, "strictbot")
        assert rules.check(page(site, 1)) == ALLOW and rules.check(page(site, 2)) == ALLOW
        entry = frontier.robots(site_of(site.base)[0])
        assert entry is not None and entry.status == status
        assert site.fetched()["/robots.txt"] == 1


def test_a_5xx_robots_txt_holds_the_site_back_then_it_is_fetched_again(tmp_path):
    with LinkedSite(4, status_for_all=503) as site, Frontier(tmp_path / "job") as frontier:
        frontier.push(page(site, 1))
        rules = RobotsRules(frontier, "testbot", backoff=0.3, backoff_max=10.0)
        before = time.time()
        held = rules.check(page(site, 1))
        assert held.kind == "hold" and held.until >= before + 0.3
        host = frontier.host("127.0.0.1")  # the site is held, not its host (its other ports go on)
        assert host is not None
        assert host.blocked_until is None and host.failures == 0
        assert frontier.robots(site_of(site.base)[0]) is None  # nothing kept: the next try fetches it
        assert rules.check(page(site, 2)) == held  # while the hold lasts: not fetched again
        assert site.fetched()["/robots.txt"] == 1
        time.sleep(max(0.0, held.until - time.time()) + 0.01)
        again = rules.check(page(site, 1))  # a second 503 in a row: the hold doubles
        assert again.kind == "hold" and again.until >= time.time() + 0.55
        site.status_for_all, site.robots = None, (200, RULES)
        time.sleep(max(0.0, again.until - time.time()) + 0.01)
        assert rules.check(page(site, 3)) == DISALLOW
        assert site.fetched()["/robots.txt"] == 3


def test_no_answer_is_held_back_like_a_5xx(tmp_path):
    with LinkedSite(4, robots=(200, RULES), delay=1.0) as site:
        started = time.monotonic()
        assert fetch_with_urllib(site.base + "/robots.txt", "testbot", timeout=0.2) == (0, b"")
        assert time.monotonic() - started < 1.0
    with Frontier(tmp_path / "job") as frontier:  # the site is gone: connection refused
        rules = RobotsRules(frontier, "testbot", backoff=5.0)
        assert rules.check(Request(site.base + "/docs/1.html")).kind == "hold"


def test_a_restart_does_not_fetch_again_until_the_ttl(tmp_path):
    with LinkedSite(4, robots=(200, RULES)) as site:
        with Frontier(tmp_path / "job") as frontier:
            assert RobotsRules(frontier, "testbot").check(page(site, 3)) == DISALLOW
        with Frontier(tmp_path / "job") as frontier:
            assert RobotsRules(frontier, "testbot").check(page(site, 3)) == DISALLOW
            assert site.fetched()["/robots.txt"] == 1
            site.robots = (200, "User-agent: *\nDisallow: /docs/2.html\n")
            fresh = RobotsRules(frontier, "testbot", ttl=0.4)
            entry = frontier.robots(site_of(site.base)[0])
            assert entry is not None
            fetched_at = entry.fetched_at
            time.sleep(max(0.0, fetched_at + 0.45 - time.time()))
            assert fresh.check(page(site, 3)) == ALLOW and fresh.check(page(site, 2)) == DISALLOW
            assert site.fetched()["/robots.txt"] == 2
            entry = frontier.robots(site_of(site.base)[0])
            assert entry is not None and entry.fetched_at > fetched_at


def test_redis_keeps_robots_txt_for_every_client(redis_url, crawl_name):
    with LinkedSite(4, robots=(200, RULES)) as site:
        with RedisFrontier(redis_url, crawl=crawl_name) as one:
            assert RobotsRules(one, "testbot").check(page(site, 3)) == DISALLOW
        with RedisFrontier(redis_url, crawl=crawl_name) as two:
            assert RobotsRules(two, "testbot").check(page(site, 2)) == ALLOW
        assert site.fetched()["/robots.txt"] == 1


def test_acheck_awaits_an_async_fetch(tmp_path):
    async def fetch(url: str, user_agent: str) -> tuple[int, bytes]:
        async with httpx.AsyncClient(headers={"User-Agent": user_agent}) as client:
            response = await client.get(url)
            return response.status_code, response.content

    async def main(site: LinkedSite, rules: RobotsRules) -> list:
        return await asyncio.gather(*(rules.acheck(page(site, n)) for n in range(5)))

    with LinkedSite(5, robots=(200, RULES), delay=0.05) as site, Frontier(tmp_path / "job") as frontier:
        rules = RobotsRules(frontier, "testbot", fetch=fetch)
        assert asyncio.run(main(site, rules)) == [DISALLOW if n == 3 else ALLOW for n in range(5)]
        assert site.fetched()["/robots.txt"] == 1


def timed(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = function(*args, **kwargs)
    return result, time.monotonic() - started


# ------------------------------------------------------------------ one deadline a fetch, no wait after a stop
@pytest.mark.parametrize("phase", ["headers", "body"])
def test_the_default_fetch_ends_at_its_deadline_however_slowly_the_bytes_come(phase):
    timeout, interval = 2.0, 0.5  # a byte every 0.5 s: a timeout of 2 s per read would never fire
    with LinkedSite(1, robots=(200, "User-agent: *\nDisallow: /\n")) as site:
        ordinary, baseline = timed(fetch_with_urllib, f"{site.base}/robots.txt", "testbot", timeout=timeout)
    assert ordinary == (200, b"User-agent: *\nDisallow: /\n")
    with TrickleSite(phase, interval=interval, seconds=30.0) as hostile:
        answer, elapsed = timed(fetch_with_urllib, f"{hostile.base}/robots.txt", "testbot", timeout=timeout)
    print(f"\n{phase}: a byte every {interval}s: no answer after {elapsed:.2f}s (deadline {timeout}s; "
          f"an ordinary fetch: {baseline * 1000:.1f} ms)")
    assert answer == (0, b"")  # not the part of the body that came: cut, it would allow everything
    assert timeout <= elapsed <= timeout + interval + baseline


def test_robots_rules_waits_for_a_fetch_at_most_its_timeout_and_not_at_all_once_stopped(tmp_path):
    def attempt(timeout: float) -> None:
        release = threading.Event()

        def hang(url: str, user_agent: str) -> tuple[int, bytes]:
            release.wait()
            return 200, b""

        async def ahang(url: str, user_agent: str) -> tuple[int, bytes]:
            while not release.is_set():
                with contextlib.suppress(asyncio.CancelledError):  # swallowed: this fetch cannot be cancelled either
                    await asyncio.sleep(0.05)
            return 200, b""

        def at_the_timeout(elapsed: float) -> bool:
            """Given up at the timeout: not before, and not a timeout later (a busy machine that made it
            later: the test again with a longer timeout)."""
            if elapsed >= 2 * timeout:
                raise Overran(f"{elapsed:.2f}s for a timeout of {timeout:g}s")
            return timeout <= elapsed

        request = Request("http://127.0.0.1:9/docs/1.html")
        try:
            with Frontier(tmp_path / f"job{timeout:g}") as frontier:
                rules = RobotsRules(frontier, "testbot", fetch=hang, timeout=timeout)
                verdict, elapsed = timed(rules.check, request)
                assert verdict.kind == "hold" and at_the_timeout(elapsed)
                assert rules.check(request) == verdict  # held: not fetched again meanwhile

                stop = threading.Event()
                waiting = RobotsRules(frontier, "testbot", fetch=hang, timeout=3600.0)
                threading.Timer(timeout, stop.set).start()
                verdict, elapsed = timed(waiting.check, Request("http://127.0.0.2:9/"), stop)
                assert verdict is STOPPED and at_the_timeout(elapsed)

                async def both() -> list[Any]:
                    arules = RobotsRules(frontier, "testbot", fetch=ahang, timeout=timeout)
                    held = await arules.acheck(request)
                    astop = threading.Event()
                    asyncio.get_running_loop().call_later(timeout, astop.set)
                    started = time.monotonic()
                    stopped = await RobotsRules(frontier, "testbot", fetch=ahang, timeout=3600.0).acheck(
                        Request("http://127.0.0.3:9/"), stop=astop)
                    elapsed = time.monotonic() - started
                    release.set()  # the fetches given up on go on in the loop, which waits for them at its end
                    return [held, stopped, elapsed]

                held, stopped, elapsed = asyncio.run(asyncio.wait_for(both(), 60))
                assert held.kind == "hold" and stopped is STOPPED and at_the_timeout(elapsed)
        finally:
            release.set()

    with_longer_times(attempt, 0.5, tries=3)


# ------------------------------------------------------------------ a 5xx robots.txt on one port of a host
def test_a_5xx_robots_txt_on_one_port_holds_back_that_site_only(tmp_path):
    def fetch(request: Request, frontier: Any) -> None:
        import urllib.request

        with urllib.request.urlopen(request.url, timeout=30) as response:  # noqa: S310 - loopback http
            response.read()

    with LinkedSite(4, status_for_all=503) as down, LinkedSite(6, robots=(200, "User-agent: *\n")) as up:
        with Frontier(tmp_path / "job") as frontier:
            assert urlsplit(down.base).hostname == urlsplit(up.base).hostname  # one host, two ports
            frontier.push(Request(f"{down.base}/docs/1.html", priority=1))  # first: its robots.txt answers 503
            frontier.push_many(Request(f"{up.base}/docs/{n}.html") for n in range(6))
            stats = crawl(frontier, fetch, workers=1, robots=True, user_agent="testbot", host_backoff=3600.0,
                          max_requests=7, duration=60.0, progress=False)
            host = frontier.host("127.0.0.1")
            assert host is not None
        held = list(pending_requests(str(tmp_path / "job")))
    assert stats.stopped_by == "max_requests" and stats.robots_held == 1 and stats.done == 6
    assert all(up.fetched()[f"/docs/{n}.html"] == 1 for n in range(6))  # the other port went on at once
    assert down.fetched() == {"/robots.txt": 1}
    assert host.blocked_until is None and [r.url for r in held] == [f"{down.base}/docs/1.html"]
    assert held[0].not_before is not None and held[0].not_before >= time.time() + 3500  # it waits for its site's hold


def test_the_crawl_delay_of_a_host_is_the_largest_of_its_sites(tmp_path):
    with LinkedSite(2, robots=(200, "User-agent: *\nCrawl-delay: 3\n")) as slow, \
            LinkedSite(2, robots=(200, "User-agent: *\nCrawl-delay: 1\n")) as quick, \
            Frontier(tmp_path / "job") as frontier:
        rules = RobotsRules(frontier, "testbot")
        assert rules.check(Request(f"{slow.base}/docs/0.html")) == ALLOW
        assert rules.check(Request(f"{quick.base}/docs/0.html")) == ALLOW
        host = frontier.host("127.0.0.1")
        assert host is not None and host.delay == 3.0  # not the last one read


def test_a_robots_txt_sent_a_byte_every_2s_costs_one_worker_its_timeout_once(tmp_path):
    """What a hostile robots.txt costs a run that is not stopped: the worker that fetches it, for
    robots_timeout; then its site is held (its request waits), and the host's other ports go on."""
    timeout, pages = 2.0, 6

    def fetch(request: Request, frontier: Any) -> None:
        import urllib.request

        with urllib.request.urlopen(request.url, timeout=30) as response:  # noqa: S310 - loopback http
            response.read()

    def run(job: str, *hostile: Request) -> tuple[Any, float]:
        with Frontier(tmp_path / job) as frontier:
            frontier.push_many([*hostile, *(Request(f"{site.base}/docs/{n}.html") for n in range(pages))])
            return timed(crawl, frontier, fetch, workers=1, robots=True, user_agent="testbot", robots_timeout=timeout,
                         max_requests=pages + len(hostile), progress=False)

    with LinkedSite(pages, delay=0.05) as site, TrickleSite("headers", interval=2.0, seconds=60.0) as trickle:
        ordinary, baseline = run("a")
        stats, elapsed = run("b", Request(f"{trickle.base}/docs/0.html", priority=1))
    print(f"\none worker, {pages} pages: {baseline:.2f}s; with a robots.txt sent a byte every 2s first: {elapsed:.2f}s "
          f"(robots_timeout={timeout}s)")
    assert ordinary.done == stats.done == pages and stats.robots_held == 1 and trickle.asked == 1
    # the documented cost: robots_timeout, once (give or take an ordinary run's own time)
    assert timeout <= elapsed <= timeout + 2 * baseline
