"""robots.txt on loopback sites: allow and disallow, one fetch a site, Crawl-delay, 4xx (allow all), 5xx and
no answer (held back, then fetched again), kept across a restart (no new fetch), fetched again after its ttl."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from diskfrontier import Frontier, RedisFrontier, Request
from diskfrontier.demo import LinkedSite
from diskfrontier.robots import ALLOW, DISALLOW, RobotsRules, fetch_with_urllib, site_of

RULES = "User-agent: *\nDisallow: /docs/3.html\n\nUser-agent: strictbot\nDisallow: /\n"


def page(site: LinkedSite, n: int) -> Request:
    return Request(f"{site.base}/docs/{n}.html")


def test_site_of_keys_by_host_and_port():
    assert site_of("https://User@Shop.Example:8443/a?b") == ("shop.example:8443", "https://Shop.Example:8443/robots.txt")
    assert site_of("http://[::1]/x") == ("[::1]", "http://[::1]/robots.txt")


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
        assert frontier.host("127.0.0.1").delay == want


@pytest.mark.parametrize("status", [404, 403, 410])
def test_a_4xx_robots_txt_allows_everything(tmp_path, status):
    with LinkedSite(4, robots=(status, "")) as site, Frontier(tmp_path / "job") as frontier:
        rules = RobotsRules(frontier, "strictbot")
        assert rules.check(page(site, 1)) == ALLOW and rules.check(page(site, 2)) == ALLOW
        assert frontier.robots(site_of(site.base)[0]).status == status
        assert site.fetched()["/robots.txt"] == 1


def test_a_5xx_robots_txt_holds_the_host_back_then_it_is_fetched_again(tmp_path):
    with LinkedSite(4, status_for_all=503) as site, Frontier(tmp_path / "job") as frontier:
        frontier.push(page(site, 1))
        rules = RobotsRules(frontier, "testbot", backoff=0.3, backoff_max=10.0)
        before = time.time()
        held = rules.check(page(site, 1))
        assert held.kind == "hold" and held.until >= before + 0.3
        assert frontier.host("127.0.0.1").blocked_until == pytest.approx(held.until)
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
            fetched_at = frontier.robots(site_of(site.base)[0]).fetched_at
            time.sleep(max(0.0, fetched_at + 0.45 - time.time()))
            assert fresh.check(page(site, 3)) == ALLOW and fresh.check(page(site, 2)) == DISALLOW
            assert site.fetched()["/robots.txt"] == 2
            assert frontier.robots(site_of(site.base)[0]).fetched_at > fetched_at


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
