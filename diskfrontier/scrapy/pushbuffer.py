"""Requests enqueued on Redis, held so that many are stored in one script call.

Storing a request in a Redis crawl is one call of the PUSH script: a round trip and the
script's fixed work (dedupe, integrity checks, counters). Stored in batches, most of that
cost is shared. So on Redis the scheduler keeps the requests Scrapy enqueues here and
stores them together (``RedisFrontier.push_each``): once ``size`` wait, once the oldest has
waited ``interval`` seconds, when the process has nothing prefetched to hand out (so the
crawl sees its own new requests), before any request is marked done, and at close.

What a kill costs: the requests waiting here are gone from this process, but never from the
crawl. A request is marked done only after everything it produced has been stored (the
buffer is stored before every ``done_many``), so the parent of a lost request is not done:
its lease runs out, it is fetched again, and its callback yields the lost requests again.
Start requests have no parent: those that never reached Redis are not in its seen set, so
the next run queues them again (``DISKFRONTIER_START_REQUESTS = "dedupe"`` or ``"keep"``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from scrapy import Request as ScrapyRequest

from ..request.model import Request

FLUSH_AFTER = 0.5  # seconds the oldest buffered request waits at most, when the engine calls in time


@dataclass(slots=True)
class Waiting:
    """One enqueued request, ready to be stored."""

    request: ScrapyRequest  # Scrapy's, for the duplicate's log line and request_dropped signal
    stored: Request
    record: bytes  # ``stored`` encoded
    again: bool  # a first run's dont_filter start request: queued even if its fingerprint was seen


class PushBuffer:
    """Requests waiting to be stored, oldest first."""

    def __init__(self, size: int, interval: float = FLUSH_AFTER) -> None:
        self.size = size
        self.interval = interval
        self._waiting: list[Waiting] = []
        self._since = 0.0  # time.monotonic() when the oldest came in

    def add(self, waiting: Waiting) -> bool:
        """Hold ``waiting``; True once the buffer holds a batch (it should be stored now)."""
        if not self._waiting:
            self._since = time.monotonic()
        self._waiting.append(waiting)
        return len(self._waiting) >= self.size

    def due(self) -> bool:
        """True if the oldest request has waited ``interval`` seconds."""
        return bool(self._waiting) and time.monotonic() - self._since >= self.interval

    def first(self, count: int) -> list[Waiting]:
        """The ``count`` oldest requests (they stay until ``forget``)."""
        return self._waiting[:count]

    def forget(self, count: int) -> None:
        """Drop the ``count`` oldest requests: they have been stored."""
        del self._waiting[:count]
        if self._waiting:
            self._since = time.monotonic()

    def __len__(self) -> int:
        return len(self._waiting)
