"""What the Scrapy scheduler tells its frontier of each download (``record_outcome``).

Each response the engine receives (Scrapy's ``response_received`` signal) gives its status,
the length of its body and its download time (``request.meta['download_latency']``, which
Scrapy's downloader sets); each retry given back to the frontier (``DISKFRONTIER_RETRY``)
counts as a retry of kind ``retry``. A download that failed without a response (a timeout, a
refused connection) is not seen by the scheduler: Scrapy has no signal for it, and its retry
is counted when it comes back. The outcomes are sent in batches of ``BATCH``, a second apart
at most, and at the close: a kill loses the last second's.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..contract.outcomes import Outcome
from ..contract.protocol import FrontierProtocol

logger = logging.getLogger(__name__)

BATCH = 200
EVERY = 1.0


def response_outcome(request: Any, response: Any) -> Outcome | None:
    """The outcome of one response (None for something that is not a response with a status)."""
    status = getattr(response, "status", None)
    if isinstance(status, bool) or not isinstance(status, int):
        return None
    try:
        size = len(response.body)
    except (AttributeError, TypeError):
        size = 0
    latency = getattr(request, "meta", {}).get("download_latency")
    if isinstance(latency, bool) or not isinstance(latency, (int, float)) or not latency >= 0 \
            or latency == float("inf"):
        latency = None
    return Outcome(status=status, received_bytes=size, fetch_seconds=latency)


class OutcomeBatch:
    """Outcomes waiting to be sent to the frontier (the scheduler runs in the reactor's thread only)."""

    def __init__(self) -> None:
        self.waiting: list[Outcome] = []
        self.sent_at = time.monotonic()
        self.warned = False

    def add(self, frontier: FrontierProtocol | None, outcome: Outcome) -> None:
        """Keep ``outcome``; send what is kept if it is time to."""
        self.waiting.append(outcome)
        if len(self.waiting) >= BATCH or time.monotonic() - self.sent_at >= EVERY:
            self.flush(frontier)

    def flush(self, frontier: FrontierProtocol | None) -> None:
        """Send what is kept (a frontier that refuses is named in the log once; the crawl goes on)."""
        batch, self.waiting = self.waiting, []
        self.sent_at = time.monotonic()
        if not batch or frontier is None:
            return
        try:
            frontier.record_outcome(*batch)
        except Exception as exc:
            if not self.warned:
                self.warned = True
                logger.warning("could not record the outcomes of %d downloads (%s: %s); they are not counted",
                               len(batch), type(exc).__name__, exc)
