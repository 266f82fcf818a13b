"""crawl() and acrawl() report each fetch's outcome to the frontier (``record_outcome``): a loopback site
answering 200, 404 and 500, fetched with urllib and httpx over a job directory and a real redis-server;
the counters are the site's answers and are still there once the frontier is opened again."""

from __future__ import annotations

import http.server
import threading
import urllib.error
import urllib.request

import httpx
import pytest

from diskfrontier import Frontier, PermanentError, RedisFrontier, Request, acrawl, crawl
from diskfrontier.run.revisit import Fetched

BODY = b"x" * 1234


class _Site(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        code = 200 if self.path.startswith("/ok") else 404 if self.path.startswith("/missing") else 500
        body = BODY if code == 200 else b"no"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def site():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def _requests(base: str) -> list[Request]:
    return ([Request(f"{base}/ok/{i}") for i in range(5)] + [Request(f"{base}/missing/{i}") for i in range(2)]
            + [Request(f"{base}/broken/0")])


def _fetch(request: Request, _frontier: object) -> Fetched:
    try:
        with urllib.request.urlopen(request.url, timeout=10) as answer:  # noqa: S310 - a loopback test site
            return Fetched(answer.status, body=answer.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise PermanentError(f"HTTP {exc.code}") from None
        raise RuntimeError(f"HTTP {exc.code}") from None


async def _afetch(request: Request, _frontier: object, client: httpx.AsyncClient) -> Fetched:
    answer = await client.get(request.url)
    if answer.status_code == 404:
        raise PermanentError("HTTP 404")
    if answer.status_code >= 500:
        raise RuntimeError(f"HTTP {answer.status_code}")
    return Fetched(answer.status_code, body=answer.content)


def _check(stats: dict) -> None:
    # 5 pages fetched with 200; the 404s and 500s are failures (the handler raised), counted by kind
    assert stats["responses_2xx"] == 5
    assert stats["received_bytes"] == 5 * len(BODY)
    assert stats["fetch_seconds_count"] == 5 + 2 + 3  # every handler call: 5 pages, 2 404s, the 500 three times
    assert stats["fetch_seconds_sum"] > 0
    assert stats["failures_fail"] == 2  # PermanentError: failed at once
    assert stats["failures_retry"] == 3  # the 500: two retries, then failed
    assert stats["retries"] == 2
    assert stats["failed"] == 3


def test_crawl_reports_outcomes_on_a_job_directory(tmp_path, site):
    path = str(tmp_path / "job")
    with Frontier(path) as frontier:
        frontier.push_many(_requests(site))
        crawl(frontier, _fetch, workers=2, retries=2, backoff=0.01, progress=False)
    with Frontier(path) as frontier:  # kept across the close and the open
        _check(frontier.stats())


def test_acrawl_reports_outcomes_on_redis(redis_url, crawl_name, site):
    import asyncio
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def client():
        async with httpx.AsyncClient(timeout=10) as value:
            yield value

    with RedisFrontier(redis_url, crawl=crawl_name) as frontier:
        frontier.push_many(_requests(site))
        asyncio.run(acrawl(frontier, _afetch, setup=client, workers=2, retries=2, backoff=0.01, progress=False))
    with RedisFrontier(redis_url, crawl=crawl_name) as frontier:
        _check(frontier.stats())
