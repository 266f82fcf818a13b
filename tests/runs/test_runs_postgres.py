"""crawl() and acrawl() over a crawl in PostgreSQL, as over Redis: failures kept there and requeued, each
fetch's outcome counted and kept across a reopen, a handler left behind given back at close, and acrawl()
over an ``AsyncFrontier`` opened from the PostgreSQL URL itself; against the session's real server and a
loopback site."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any

import httpx
from sharedruns import check_failures_kept, check_handler_left_behind_given_back
from test_run_outcomes import _afetch, _check, _fetch, _requests, site  # noqa: F401 - site: a fixture

from diskfrontier import AsyncFrontier, PostgresFrontier, acrawl, crawl


def test_crawl_runs_over_postgres_with_failures_kept_there(postgres_url, crawl_name):
    check_failures_kept(lambda **settings: PostgresFrontier(postgres_url, crawl=crawl_name, **settings))


def test_crawl_reports_outcomes_on_postgres(postgres_url, crawl_name, site):  # noqa: F811
    with PostgresFrontier(postgres_url, crawl=crawl_name) as frontier:
        frontier.push_many(_requests(site))
        crawl(frontier, _fetch, workers=2, retries=2, backoff=0.01, progress=False)
    with PostgresFrontier(postgres_url, crawl=crawl_name, create=False) as frontier:
        _check(frontier.stats())


def test_acrawl_over_an_async_frontier_opened_from_a_postgres_url(postgres_url, crawl_name, site):  # noqa: F811
    @asynccontextmanager
    async def client():
        async with httpx.AsyncClient(timeout=10) as value:
            yield value

    async def main() -> Any:
        async with AsyncFrontier(postgres_url, crawl=crawl_name, lease=10.0) as frontier:
            assert await frontier.push_many(_requests(site)) == 8
            return await acrawl(frontier, _afetch, setup=client, workers=2, retries=2, backoff=0.01, progress=False)

    stats = asyncio.run(main())
    assert stats.done == 5 and stats.failed == 3
    with PostgresFrontier(postgres_url, crawl=crawl_name, create=False) as frontier:
        _check(frontier.stats())
        assert frontier.finished and frontier.stats()["in_flight"] == 0


def test_over_postgres_a_handler_left_behind_is_given_back_at_close(tmp_path, postgres_url, crawl_name):
    check_handler_left_behind_given_back(tmp_path, lambda **settings: PostgresFrontier(postgres_url, crawl=crawl_name,
                                                                                        **settings))
