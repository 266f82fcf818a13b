"""``RetryAfterMiddleware``: a 429 or 503 with ``Retry-After`` blocks its download slot in the frontier.

Enable it beside Scrapy's own retry middleware::

    DOWNLOADER_MIDDLEWARES = {"diskfrontier.scrapy.RetryAfterMiddleware": 560}
    DISKFRONTIER_RETRY_AFTER_MAX = 3600         # seconds; a longer Retry-After is cut to this

The block is a frontier setting (``Frontier.block``): it is kept in the job directory,
so a crawl stopped and resumed, or killed, still waits it out. The response goes on to
the retry middleware unchanged, and the retried request waits in the frontier until
the slot's block ends.
"""

from __future__ import annotations

import email.utils
import logging
import time
from typing import Any

from scrapy import Request as ScrapyRequest
from scrapy.http import Response

from .scheduler import scheduler_for, slot_of

logger = logging.getLogger("diskfrontier.scrapy")


def retry_after_seconds(value: bytes | str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` header value asks for (delta-seconds or an HTTP date); None if it is not one."""
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


class RetryAfterMiddleware:
    """Block a download slot in the frontier for as long as a 429 or 503 response's ``Retry-After`` asks."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self.longest = crawler.settings.getfloat("DISKFRONTIER_RETRY_AFTER_MAX", 3600.0)

    @classmethod
    def from_crawler(cls, crawler: Any) -> RetryAfterMiddleware:
        return cls(crawler)

    def process_response(self, request: ScrapyRequest, response: Response, spider: Any = None) -> Response:
        if response.status in (429, 503):
            now = time.time()
            seconds = retry_after_seconds(response.headers.get(b"Retry-After"), now)
            scheduler = scheduler_for(self.crawler)
            if seconds is not None and scheduler is not None:
                slot = slot_of(request)
                scheduler.block_slot(slot, now + min(seconds, self.longest))
                logger.info("%s asked to wait %.0fs (%d, Retry-After): slot %s blocked", request.url, seconds,
                            response.status, slot)
        return response
