"""When the Scrapy engine has finished with a request, so that it can be marked done.

A request is finished once its response (or failure) has been fully handled: the
callback's or errback's output consumed, every request it yielded scheduled, every item
through the pipelines, a redirect or retry scheduled in its place. Scrapy has no signal
for that moment, and no middleware sees all of it: a spider middleware sees only the
callbacks of successful responses (not errbacks, not the redirects and retries of the
downloader middlewares, not requests dropped with ``IgnoreRequest``), and it sees the
callback's output before the scraper has scheduled it (up to ``CONCURRENT_ITEMS`` results
are queued in between).

The engine knows: a request is in its in-progress set from the moment the scheduler hands
it out until all of the above is over (``ExecutionEngine._slot.inprogress``, the same set
it waits on to close a spider). So the scheduler hands out requests, and each time the
engine calls it again it asks which of them have left that set. If a Scrapy release no
longer has the set, nothing is marked done before close and a warning says so:
requests are then fetched again after a crash, never lost.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from scrapy import Request as ScrapyRequest

from ..request.model import Request


def engine_slot(crawler: Any) -> Any:
    """The engine's slot of the open spider (its requests in progress, its ``nextcall``), or None."""
    try:
        engine = crawler.engine
    except (AttributeError, RuntimeError):  # Scrapy 2.14+ raises until the crawl has started
        return None
    return getattr(engine, "_slot", None) or getattr(engine, "slot", None)


def engine_in_progress(crawler: Any) -> Container[ScrapyRequest] | None:
    """The engine's set of requests being downloaded or handled, or None if it cannot be found."""
    in_progress = getattr(engine_slot(crawler), "inprogress", None)
    return in_progress if isinstance(in_progress, (set, frozenset)) else None


class Completion:
    """The requests handed to the engine, until the engine has finished with them."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self._out: dict[ScrapyRequest, Request] = {}
        self._slot: Any = None  # the engine slot whose in-progress set was found last, and that set
        self._in_progress: Container[ScrapyRequest] | None = None

    def handed_out(self, request: ScrapyRequest, frontier_request: Request) -> None:
        """``request`` (made from ``frontier_request``) has been given to the engine."""
        self._out[request] = frontier_request

    def take_retry(self, retry: ScrapyRequest) -> tuple[ScrapyRequest, Request] | None:
        """The frontier request that ``retry`` (a copy made by Scrapy's retry middleware) retries.

        The original is in the engine's hands: the same URL, method and body, and one
        ``retry_times`` fewer. It is no longer tracked (the frontier's ``retry`` gives it back).
        """
        times = retry.meta.get("retry_times")
        if not isinstance(times, int) or times < 1:
            return None
        for original, stored in self._out.items():
            if (original.url == retry.url and original.method == retry.method and original.body == retry.body
                    and original.meta.get("retry_times", 0) == times - 1):
                del self._out[original]
                return original, stored
        return None

    def stored_of(self, request: ScrapyRequest) -> Request | None:
        """The frontier request ``request`` was made from, while the engine has it; else None."""
        return self._out.get(request)

    def put_back(self, request: ScrapyRequest, frontier_request: Request) -> None:
        """Track ``request`` again (a retry that could not go through the frontier)."""
        self._out[request] = frontier_request

    def finished(self) -> list[Request]:
        """The frontier requests whose Scrapy requests the engine has finished with, since the last call."""
        out = self._out
        if not out:
            return []
        slot = engine_slot(self.crawler)
        if slot is not self._slot:  # a new crawl's slot: its set is looked for once
            self._slot, self._in_progress = slot, engine_in_progress(self.crawler)
        in_progress = self._in_progress
        if in_progress is None:
            return []
        if len(out) == 1:
            request = next(iter(out))
            return [] if request in in_progress else [out.pop(request)]
        gone = [request for request in out if request not in in_progress]
        return [out.pop(request) for request in gone]

    def held(self) -> list[Request]:
        """The frontier requests whose Scrapy requests the engine still has."""
        return list(self._out.values())

    def __len__(self) -> int:
        return len(self._out)
