"""Asking Scrapy's engine for requests again when one becomes ready.

Scrapy's engine asks the scheduler for requests when a download ends, when a request is
scheduled, and otherwise only on its heartbeat, every 5 seconds. A request held back by the
frontier (a host's delay, a ``Retry-After`` block, a retry's delay, a request another
process pushes to a shared crawl in Redis) can become ready between those times; without a
wake-up the engine would leave it waiting for the next heartbeat, and a process that found
nothing to do at its start would sit idle while the others crawl.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any

from .completion import engine_slot

# A wake-up sooner than this after the last is not worth a pass of the engine.
SHORTEST = 0.01


def _call_later(delay: float, func: Callable[[], None]) -> Any:
    """``func`` called after ``delay`` seconds on the crawl's event loop (asyncio or Twisted)."""
    try:
        from scrapy.utils.asyncio import call_later  # Scrapy 2.14+
    except ImportError:
        from twisted.internet import reactor as installed

        reactor: Any = installed  # the module stands for the installed reactor
        return reactor.callLater(delay, func)
    return call_later(delay, func)


def _loop_present() -> bool:
    """True if a Twisted reactor is installed or an asyncio loop runs in this thread: the engine
    can be woken. A scheduler driven by hand (a script, a benchmark) has neither, and needs no wake-up:
    its caller asks again itself."""
    if "twisted.internet.reactor" in sys.modules:
        return True
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class EngineWake:
    """One pending wake-up of a crawler's engine at a time: the earliest asked for."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self._call: Any = None
        self._due = 0.0  # time.monotonic() of the pending wake-up

    def at(self, when: float) -> None:
        """Make the engine ask for requests again at ``when`` (a ``time.time()`` value), unless a
        wake-up is already due by then. Without an event loop there is no engine to wake: nothing is done."""
        if not _loop_present():
            return
        delay = max(SHORTEST, when - time.time())
        due = time.monotonic() + delay
        if self._call is not None:
            if self._due <= due:
                return
            self._call.cancel()
        self._due = due
        self._call = _call_later(delay, self._fire)

    def cancel(self) -> None:
        """Drop the pending wake-up (at close)."""
        if self._call is not None:
            self._call.cancel()
            self._call = None

    def _fire(self) -> None:
        self._call = None
        nextcall = getattr(engine_slot(self.crawler), "nextcall", None)
        if nextcall is not None:  # None once the spider has closed
            nextcall.schedule()
