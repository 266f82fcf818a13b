"""Requests that cannot be stored, named by what stops them: counted, and logged once for each.

A request is kept in memory (and lost if the crawl stops before it is fetched) when a value
of its meta or cb_kwargs has no stored form, when its callback or errback is not a spider
method, or when it is beyond the size limits. Each reason has a *kind*: the type of the value
(``object``, ``complex``, ``myproject.Thing``: ``request.values.kind_of``), ``callback``, or
``too_large`` (``other`` for what names no type). Each request counts in Scrapy's
``scheduler/unserializable`` and in ``diskfrontier/unstorable/<kind>``; the first of each kind
is logged, with a traceback when ``SCHEDULER_DEBUG`` is set (Scrapy's ``logunser``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..core.errors import RequestTooLarge
from ..request.codec import Unencodable
from .serialize import NotASpiderMethod

logger = logging.getLogger("diskfrontier.scrapy")

PREFIX = "diskfrontier/unstorable/"


def kind_of_error(exc: BaseException) -> str:
    """The kind a request that could not be stored because of ``exc`` is counted under."""
    if isinstance(exc, Unencodable):
        return exc.kind or "other"
    if isinstance(exc, NotASpiderMethod):
        return "callback"
    if isinstance(exc, RequestTooLarge):
        return "too_large"
    return "other"


class Unstorable:
    """The count and the log of one crawl's requests that cannot be stored."""

    def __init__(self, count: Callable[[str], None], spider: Any, traceback: bool = False) -> None:
        self.count = count
        self.spider = spider
        self.traceback = traceback
        self._logged: set[str] = set()

    def note(self, request: Any, exc: BaseException) -> str:
        """Count ``request``, kept in memory because of ``exc``, and log it if it is the first of its kind."""
        kind = kind_of_error(exc)
        self.count("scheduler/unserializable")
        self.count(PREFIX + kind)
        if kind not in self._logged:
            self._logged.add(kind)
            logger.warning(
                "Unable to serialize request: %s - reason: %s - it is kept in memory and lost if the crawl stops "
                "before it is fetched; no more requests that cannot be stored for this reason (%s) will be logged "
                "(stats: %s%s)", request, exc, kind, PREFIX, kind,
                exc_info=exc if self.traceback else None, extra={"spider": self.spider})
        return kind
