"""Reading values back from a crawl's keys: a value diskfrontier did not write is a ``CrawlDamaged``
naming its key and field, never a raw ``ValueError``, ``TypeError`` or ``UnicodeDecodeError``."""

from __future__ import annotations

import math
from typing import Any

from ..core.errors import CrawlDamaged
from .connection import damaged


class Values:
    """Parsers for the values of the crawl at ``url``; ``where`` names the key (and field) read."""

    def __init__(self, url: str) -> None:
        self.url = url

    def bad(self, where: str, problem: str) -> CrawlDamaged:
        """The error of ``where`` holding what it should not (``problem``)."""
        return damaged(self.url, where, problem)

    def text(self, value: Any, where: str) -> str:
        """``value`` (bytes from Redis) as text."""
        if isinstance(value, str):
            return value
        if not isinstance(value, bytes):
            raise self.bad(where, "is missing")
        try:
            return value.decode()
        except UnicodeDecodeError:
            raise self.bad(where, f"is {value[:60]!r}, not UTF-8 text") from None

    def real(self, value: Any, where: str, default: float | None = None) -> float:
        """``value`` as a finite number (or ``default`` when it is missing and one is given)."""
        if value is None and default is not None:
            return default
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise self.bad(where, f"is {_shown(value)}, not a number") from None
        if math.isnan(number):
            raise self.bad(where, f"is {_shown(value)}, not a number")
        return number

    def whole(self, value: Any, where: str, default: int | None = None) -> int:
        """``value`` as a whole number (or ``default`` when it is missing and one is given)."""
        if value is None and default is not None:
            return default
        try:
            return int(value)
        except (TypeError, ValueError):
            raise self.bad(where, f"is {_shown(value)}, not a whole number") from None


def _shown(value: Any) -> str:
    return "missing" if value is None else repr(value[:60] if isinstance(value, bytes) else value)
