"""diskfrontier for Scrapy: ``SCHEDULER = "diskfrontier.scrapy.Scheduler"`` with your usual ``JOBDIR``.

Needs Scrapy (``pip install 'diskfrontier[scrapy]'``). See ``scheduler.py`` for the
settings and what is guaranteed.
"""

from __future__ import annotations

try:
    import scrapy  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "diskfrontier.scrapy needs Scrapy; install it with: pip install 'diskfrontier[scrapy]'"
    ) from exc

from .retry_after import RetryAfterMiddleware
from .revisitmiddleware import RevisitMiddleware
from .scheduler import Scheduler

__all__ = ["RetryAfterMiddleware", "RevisitMiddleware", "Scheduler"]
