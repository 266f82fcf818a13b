"""The limits of the numbers a frontier's calls take, and the argument checks both backends apply, so that both
refuse the same values with the same message."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from ..request.model import Request, check_slot
from .values import FailedRequest, RobotsEntry

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


def check_until(name: str, value: Any) -> float:
    """A block's end: ``math.inf`` (until unblocked) or a time as ``check_time`` takes it."""
    return math.inf if value == math.inf else check_time(name, value)


def check_attempts(value: Any) -> int:
    """A request's ``attempts`` as stored: a whole number of at least 0, at most ``MAX_ATTEMPTS``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Request.attempts must be a whole number of at least 0, got {value!r}")
    return min(value, MAX_ATTEMPTS)


def check_drop(host: Any, match: Any, show: Any, dry_run: Any = False) -> re.Pattern[str] | None:
    """Check ``drop``'s arguments; return ``match`` compiled (None when ``host`` is given).

    ValueError (naming the argument) if neither or both are given, the host is not a slot, the
    expression does not compile, ``show`` is not a count or ``dry_run`` not a bool.
    """
    if (host is None) == (match is None):
        raise ValueError("drop() takes exactly one of host= and match=")
    if not isinstance(dry_run, bool):
        raise ValueError(f"dry_run must be True or False, got {dry_run!r}")
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


def check_request(call: str, request: Any) -> None:
    """TypeError unless ``request`` is a ``diskfrontier.Request`` (``call`` names the call in the message)."""
    if not isinstance(request, Request):
        raise TypeError(f"{call}() takes a diskfrontier.Request, got {type(request).__name__}")


def check_requests(call: str, requests: list[Any]) -> None:
    """TypeError unless every one of ``requests`` is a ``diskfrontier.Request``."""
    for request in requests:
        if not isinstance(request, Request):
            raise TypeError(f"{call}() takes diskfrontier.Request objects, got {type(request).__name__}")


def check_fingerprints(call: str, fingerprints: Iterable[Any]) -> list[bytes]:
    """``fingerprints`` as a list, each checked: bytes, 1 to 255 of them."""
    batch = list(fingerprints)
    for fingerprint in batch:
        if not isinstance(fingerprint, bytes) or not 1 <= len(fingerprint) <= 255:
            raise TypeError(f"{call} takes fingerprints of 1 to 255 bytes, got {fingerprint!r:.80}")
    return batch


def check_error(call: str, error: Any) -> str:
    """A failure's error text: a str (it is cut to ``MAX_ERROR`` bytes when stored)."""
    if not isinstance(error, str):
        raise TypeError(f"{call}: error must be a str, got {type(error).__name__}")
    return error


def cap_error(error: str) -> bytes:
    """``error`` as the UTF-8 bytes a failure keeps: at most ``MAX_ERROR``, cut on a character boundary (a lone
    surrogate becomes ``?``)."""
    data = error.encode("utf-8", "replace")
    if len(data) <= MAX_ERROR:
        return data
    return data[:MAX_ERROR].decode("utf-8", "ignore").encode("utf-8")


def check_failed(call: str, entries: Iterable[Any]) -> list[FailedRequest]:
    """``record_failed``'s entries as a list, each checked: a ``FailedRequest`` whose error is a str and whose
    ``failed_at`` is a time (``check_time``), in that order, entry by entry."""
    batch = list(entries)
    for entry in batch:
        if not isinstance(entry, FailedRequest):
            raise TypeError(f"{call} takes FailedRequest objects, got {type(entry).__name__}")
        check_error(call, entry.error)
        check_time(f"{call}: failed_at", entry.failed_at)
    return batch


def check_limit(call: str, limit: Any) -> int | None:
    """``None`` or a whole number of at least 1 (``requeue_failed``'s ``limit``)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"{call}: limit must be None or a whole number of at least 1, got {limit!r}")
    return limit


def check_count(call: str, name: str, value: Any, bits: int, *, optional: bool = False) -> int | None:
    """A whole number from 0 to ``2**bits - 1`` (the largest a backend stores exactly: 63 bits in a
    journal, 53 in Redis, whose Lua numbers are doubles); ``None`` too when ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**bits:
        either = "None or " if optional else ""
        raise ValueError(f"{call}: {name} must be {either}a whole number from 0 to 2**{bits} - 1, got {value!r}")
    return value


def check_host(host: Any) -> str:
    """A host name as a call takes it (a request's slot): a str, checked as a slot is."""
    checked = check_slot(host, "host")
    if checked is None:
        raise TypeError("host must be a str, got None")
    return checked
