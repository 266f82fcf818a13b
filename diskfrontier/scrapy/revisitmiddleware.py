"""``RevisitMiddleware``: conditional requests from each page's stored state, and each response noted for the
scheduler (``revisits.py`` says what the scheduler does with them).

    DOWNLOADER_MIDDLEWARES = {"diskfrontier.scrapy.RevisitMiddleware": 580}
    DISKFRONTIER_REVISIT = {"initial": 86400, "min": 3600, "max": 30 * 86400}
"""

from __future__ import annotations

from typing import Any

from scrapy import Request as ScrapyRequest
from scrapy.http import Response

from ..run.revisit import conditional_headers
from .revisits import OPT_OUT
from .scheduler import scheduler_for


class RevisitMiddleware:
    """Conditional requests from each page's stored state, and each response noted for the scheduler."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> RevisitMiddleware:
        return cls(crawler)

    def process_request(self, request: ScrapyRequest, spider: Any = None) -> None:
        scheduler = scheduler_for(self.crawler)
        stored = scheduler.stored_of(request) if scheduler is not None else None
        if stored is None or request.meta.get(OPT_OUT) is False:
            return None
        for name, value in conditional_headers(stored).items():
            if name.encode() not in request.headers:
                request.headers[name] = value
        return None

    def process_response(self, request: ScrapyRequest, response: Response, spider: Any = None) -> Response:
        scheduler = scheduler_for(self.crawler)
        if scheduler is not None:
            scheduler.note_response(request, response)
        return response
