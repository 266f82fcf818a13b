"""crawl() over a crawl a server keeps (Redis or PostgreSQL), the same checks for each: failures kept there and
requeued, and a handler left behind past its grace whose lease is given back at the frontier's close.
``open_crawl(**settings)`` opens a new client of the test's crawl."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from stopbounds import GRACE, in_thread, ordinary_run

from diskfrontier import Request, crawl

OpenCrawl = Callable[..., Any]


def check_failures_kept(open_crawl: OpenCrawl) -> None:
    """A crawl of 200 requests whose URLs ending in 7 time out: each kept as failed (once retried) in the crawl,
    and requeued from it."""
    def handler(request, frontier):
        if request.url.endswith("/0"):
            frontier.push_many(Request(f"https://h{i % 4}.example/{i}") for i in range(1, 200))
        if request.url.endswith("7"):
            raise TimeoutError("slow host")

    with open_crawl(per_host=2) as frontier:
        frontier.push(Request("https://h0.example/0"))
        stats = crawl(frontier, handler, workers=8, retries=1, backoff=0.01, progress=False)
        sevens = [i for i in range(200) if str(i).endswith("7")]
        assert (stats.failed, stats.retried, stats.done) == (len(sevens), len(sevens), 200 - len(sevens))
        assert stats.stopped_by == "finished" and frontier.finished
    with open_crawl() as frontier:
        failed = frontier.failed()
        assert sorted(int(f.request.url.rsplit("/", 1)[1]) for f in failed) == sevens
        assert {f.error for f in failed} == {"TimeoutError: slow host"} and {f.request.attempts for f in failed} == {1}
        assert frontier.stats()["failed"] == len(sevens)
        assert frontier.requeue_failed(limit=3) == 3
        assert len(frontier) == 3 and len(frontier.failed()) == len(sevens) - 3


def check_handler_left_behind_given_back(tmp_path, open_crawl: OpenCrawl) -> None:
    """A handler that never ends is left behind at the stop (bounded as an ordinary run measured here is), its
    lease kept while the client is open and given back at its close."""
    duration, grace, release = 0.3, 0.5, threading.Event()
    baseline = ordinary_run(tmp_path, "crawl", duration, grace=grace)
    frontier = open_crawl()
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
    with open_crawl() as again:
        assert again.stats()["in_flight"] == 0 and again.stats()["done"] == 1
        assert [r.url for r in again.pending_requests()] == ["https://a.example/stuck"]
