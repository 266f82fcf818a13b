"""Short times in tests that a loaded machine cannot break.

A test of leases or delays needs some of its steps to come within a short time of each other (a
pop before a lease runs out, a renewal before the next one is due). On a busy machine any step can
take longer than any constant: instead of bounding the steps, such a test measures them with a
``Window`` and, if one overran, runs again with a longer time (``with_longer_times``). What it
checks then holds for the steps as they ran, and on a quiet machine the first, short try is the
only one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


class Overran(Exception):
    """A step came later than the time the test gave it: the machine was busy, try a longer time."""


class Window:
    """Steps that must each come less than ``seconds`` after the one before (the first: after the
    window opened). ``step()`` marks one and raises ``Overran`` if it came too late."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.opened = self.last = time.monotonic()

    def step(self) -> None:
        now = time.monotonic()
        if now - self.last >= self.seconds:
            raise Overran(f"{now - self.last:.3f}s between two steps that had {self.seconds:g}s")
        self.last = now

    def since_opened(self) -> float:
        return time.monotonic() - self.opened


def with_longer_times(attempt: Callable[[float], T], first: float, *, factor: float = 4.0, tries: int = 6) -> T:
    """``attempt(seconds)``, with ``seconds`` = ``first``, then ``factor`` times longer each time it
    raised ``Overran``; what the last attempt returned. Each attempt must start afresh (its own
    crawl or job directory)."""
    seconds = first
    overruns = []
    for _ in range(tries):
        try:
            return attempt(seconds)
        except Overran as exc:
            overruns.append(str(exc))
            seconds *= factor
    pytest.fail(f"every try overran its time, the last {seconds / factor:g}s: {overruns}")
