"""What the stop tests measure a run against: the documented grace, a function run in a thread that the test
can give up on, and how long an ordinary run of a given duration takes on this machine."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from diskfrontier import Frontier, Request, acrawl, crawl

GRACE = 10.0  # crawl()'s and acrawl()'s default grace, the documented bound of a stop


def timed(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = function(*args, **kwargs)
    return result, time.monotonic() - started


def in_thread(function: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``function`` in a thread (so that the test can give up on it): its result and how long it took."""
    box: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        box["result"] = function()
        box["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def ordinary_run(tmp_path, runner: str, duration: float, **options: Any) -> float:
    """How long a run of ``duration`` over a frontier whose one request waits a long time takes here
    (``runner``: crawl, crawl-async, a coroutine handler, or acrawl)."""
    async def handle(request: Request, f: Any) -> None:
        pass

    with Frontier(tmp_path / f"ordinary-{runner}") as frontier:
        frontier.push(Request("https://ordinary.example/"), not_before=time.time() + 3600)
        if runner == "acrawl":
            stats, seconds = timed(asyncio.run, acrawl(frontier, handle, duration=duration, progress=False,
                                                       **options))
        else:
            handler = handle if runner == "crawl-async" else (lambda r, f: None)
            stats, seconds = timed(crawl, frontier, handler, duration=duration, progress=False, **options)
    assert stats.stopped_by == "duration"
    return seconds
