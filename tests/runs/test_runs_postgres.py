"""crawl() and acrawl() over a crawl in PostgreSQL, as over Redis: failures kept there and requeued, each
fetch's outcome counted and kept across a reopen, a handler left behind given back at close, and acrawl()
over an ``AsyncFrontier`` opened from the PostgreSQL URL itself; against the session's real server and a
loopback site."""

from __future__ import annotations

import asyncio
import threading
from contextlib import asynccontextmanager
from typing import Any

import httpx
from test_run_outcomes import _afetch, _check, _fetch, _requests, site  # noqa: F401 - site: a fixture
from test_stops import GRACE, in_thread, ordinary_run

from diskfrontier import AsyncFrontier, PostgresFrontier, Request, acrawl, crawl


def test_crawl_runs_over_postgres_with_failures_kept_there(postgres_url, crawl_name):
    def handler(request, frontier):
        if request.url.endswith("/0"):
            frontier.push_many(Request(f"https://h{i % 4}.example/{i}") for i in range(1, 200))
        if request.url.endswith("7"):
            raise TimeoutError("slow host")

    with PostgresFrontier(postgres_url, crawl=crawl_name, per_host=2) as frontier:
        frontier.push(Request("https://h0.example/0"))
        stats = crawl(frontier, handler, workers=8, retries=1, backoff=0.01, progress=False)
        sevens = [i for i in range(200) if str(i).endswith("7")]
        assert (stats.failed, stats.retried, stats.done) == (len(sevens), len(sevens), 200 - len(sevens))
        assert stats.stopped_by == "finished" and frontier.finished
    with PostgresFrontier(postgres_url, crawl=crawl_name) as frontier:
        failed = frontier.failed()
        assert sorted(int(f.request.url.rsplit("/", 1)[1]) for f in failed) == sevens
        assert {f.error for f in failed} == {"TimeoutError: slow host"} and {f.request.attempts for f in failed} == {1}
        assert frontier.stats()["failed"] == len(sevens)
        assert frontier.requeue_failed(limit=3) == 3
        assert len(frontier) == 3 and len(frontier.failed()) == len(sevens) - 3


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
    duration, grace, release = 0.3, 0.5, threading.Event()
    baseline = ordinary_run(tmp_path, "crawl", duration, grace=grace)
    frontier = PostgresFrontier(postgres_url, crawl=crawl_name)
    frontier.push_many([Request("https://a.example/stuck"), Request("https://a.example/fine")])

    def stuck(request: Request, f: Any) -> None:
        if "stuck" in request.url:
            release.wait()

    thread, box = in_thread(lambda: crawl(frontier, stuck, workers=2, duration=duration, grace=grace, progress=False))
    try:
        thread.join(baseline + grace + GRACE)
        assert "seconds" in box and box["seconds"] <= 2 * baseline + grace
        assert box["result"].abandoned == 1 and box["result"].done == 1
        assert [r.url for r in frontier.in_flight] == ["https://a.example/stuck"]  # its lease is kept meanwhile
    finally:
        release.set()
        frontier.close()  # gives back the leases this client holds
    with PostgresFrontier(postgres_url, crawl=crawl_name) as again:
        assert again.stats()["in_flight"] == 0 and again.stats()["done"] == 1
        assert [r.url for r in again.pending_requests()] == ["https://a.example/stuck"]
