"""The limits of the numbers a frontier's calls take, and the argument checks both backends apply, so that both
refuse the same values with the same message."""

from __future__ import annotations

import re
from typing import Any

from ..request.model import check_slot
from .values import RobotsEntry

# ------------------------------------------------------------------ limits
MAX_ATTEMPTS = 0xFFFF
"""The most attempts a request carries; more are kept as this many."""
MAX_SECONDS = 10**10
"""The longest delay, timeout or wait a call takes (about 317 years)."""
MAX_TIME = 10**11
"""The latest ``time.time()`` value a record or a call holds (the year 5138); a block may also be +inf."""
MAX_ERROR = 4000
"""Bytes of a failure's error text kept (cut on a character boundary)."""
MAX_ROBOTS = 500 * 1024
"""Bytes of a robots.txt body kept (RFC 9309 lets a crawler stop parsing at 500 KiB)."""


def check_robots(entry: Any) -> RobotsEntry:
    """``entry`` as stored: a ``RobotsEntry`` with a status from 0 to 999, a time in range and the body cut
    to ``MAX_ROBOTS`` bytes; TypeError or ValueError naming the field if not."""
    if not isinstance(entry, RobotsEntry):
        raise TypeError(f"set_robots(): entry must be a RobotsEntry, got {type(entry).__name__}")
    status = entry.status
    if isinstance(status, bool) or not isinstance(status, int) or not 0 <= status <= 999:
        raise ValueError(f"RobotsEntry.status must be an HTTP status from 0 to 999 (0: no answer), got {status!r}")
    if not isinstance(entry.body, (bytes, bytearray)):
        raise TypeError(f"RobotsEntry.body must be bytes, got {type(entry.body).__name__}")
    fetched_at = check_time("RobotsEntry.fetched_at", entry.fetched_at)
    return RobotsEntry(status, bytes(entry.body[:MAX_ROBOTS]), fetched_at)


def check_host_failed(block_after: Any, backoff: Any, backoff_max: Any) -> tuple[int, float, float]:
    """``host_failed``'s settings, checked: (block_after, backoff, backoff_max)."""
    if isinstance(block_after, bool) or not isinstance(block_after, int) or block_after < 1:
        raise ValueError(f"host_failed(): block_after must be a whole number of at least 1, got {block_after!r}")
    return block_after, check_seconds("host_failed(): backoff", backoff), check_seconds(
        "host_failed(): backoff_max", backoff_max)


# ------------------------------------------------------------------ argument checks
def check_seconds(name: str, value: Any) -> float:
    """``value`` as a float number of seconds from 0 to ``MAX_SECONDS``; ValueError naming ``name`` if not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{name} must be a number of seconds from 0 to {MAX_SECONDS:,}, got {value!r}")
    return float(value)


def check_time(name: str, value: Any) -> float:
    """``value`` as a float ``time.time()`` value from 0 to ``MAX_TIME``; ValueError naming ``name`` if not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_TIME:
        raise ValueError(f"{name} must be a time.time() value (0 to {MAX_TIME:,}), got {value!r}")
    return float(value)


def check_attempts(value: Any) -> int:
    """A request's ``attempts`` as stored: a whole number of at least 0, at most ``MAX_ATTEMPTS``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Request.attempts must be a whole number of at least 0, got {value!r}")
    return min(value, MAX_ATTEMPTS)


def check_drop(host: Any, match: Any, show: Any) -> re.Pattern[str] | None:
    """Check ``drop``'s arguments; return ``match`` compiled (None when ``host`` is given).

    ValueError (naming the argument) if neither or both are given, the host is not a slot, the
    expression does not compile, or ``show`` is not a count.
    """
    if (host is None) == (match is None):
        raise ValueError("drop() takes exactly one of host= and match=")
    if isinstance(show, bool) or not isinstance(show, int) or show < 0:
        raise ValueError(f"show must be a count of 0 or more, got {show!r}")
    if host is not None:
        check_host(host)
        return None
    if not isinstance(match, str) or not match:
        raise ValueError(f"match must be a non-empty regular expression, got {match!r}")
    try:
        return re.compile(match)
    except re.error as exc:
        raise ValueError(f"match {match!r} is not a regular expression: {exc}") from None


def check_host(host: Any) -> str:
    """A host name as a call takes it (a request's slot): a str, checked as a slot is."""
    checked = check_slot(host, "host")
    if checked is None:
        raise TypeError("host must be a str, got None")
    return checked
