"""How a request is laid out in a crawl's tables (docs/format.md, "PostgreSQL"): its host, priority,
attempts, dont_filter flag, fingerprint and own ``not_before`` in columns, the rest as the msgpack request
record every backend stores (``request/codec.py``); the seen set keyed by the fingerprint's 64-bit key, the
same key the job directory and Redis keep."""

from __future__ import annotations

import math
from typing import Any

from ..contract.checks import check_attempts, check_time
from ..core.errors import CrawlDamaged, FrontierError
from ..redisfrontier.seen import key64
from ..request.codec import Unencodable, decode_request, encode_request
from ..request.model import PRIORITY_MAX, PRIORITY_MIN, Request, check_priority

HINT = "rows of the crawl were changed by something other than diskfrontier: run diskfrontier verify, or drop them"


def encode(request: Request) -> bytes:
    """The msgpack record of ``request`` (``FrontierError`` if it cannot be stored: nothing of a shared crawl is
    kept in one process's memory)."""
    try:
        return encode_request(request)
    except Unencodable as exc:
        raise FrontierError(f"{request!r} cannot be stored in PostgreSQL ({exc}): keep only msgpack types "
                            f"(str, bytes, int, float, bool, None, list, dict) in its meta") from None


class PushRows:
    """The columns of requests to push, one list per column of the ``push`` function's arrays."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        self.keys: list[int] = []
        self.filter: list[bool] = []
        self.priorities: list[int] = []
        self.attempts: list[int] = []
        self.fingerprints: list[bytes] = []
        self.not_befores: list[float | None] = []
        self.records: list[bytes] = []

    def add(self, request: Request, not_before: float | None = None, record: bytes | None = None) -> None:
        """Add ``request`` (checked and encoded now; ``not_before`` None: its own; ``record``: already encoded)."""
        priority = check_priority(request.priority)  # a plain attribute: it may have changed since it was made
        if not_before is None and request.not_before is not None:
            not_before = check_time("Request.not_before", request.not_before)
        fingerprint = request.fingerprint
        encoded = encode(request) if record is None else record
        self.hosts.append(request.slot)
        self.keys.append(key64(fingerprint))
        self.filter.append(not request.dont_filter)
        self.priorities.append(priority)
        self.attempts.append(check_attempts(request.attempts))
        self.fingerprints.append(fingerprint)
        self.not_befores.append(not_before)
        self.records.append(encoded)

    def __len__(self) -> int:
        return len(self.records)

    def columns(self, start: int = 0, stop: int | None = None) -> list[Any]:
        """The ``push`` function's arrays for rows ``start`` to ``stop``."""
        part = slice(start, stop)
        return [self.hosts[part], self.keys[part], self.filter[part], self.priorities[part], self.attempts[part],
                self.fingerprints[part], self.not_befores[part], self.records[part]]


def decode(table: str, row_id: Any, host: Any, priority: Any, attempts: Any, dont_filter: Any, fingerprint: Any,
           not_before: Any, record: Any) -> Request:
    """The request a row of ``table`` holds; ``CrawlDamaged`` naming the table and row if it is not one
    diskfrontier stored."""
    where = f"{table} row {row_id}"
    try:
        if not isinstance(host, str) or not host or not isinstance(fingerprint, bytes) or not fingerprint:
            raise ValueError("no host or no fingerprint")
        if not isinstance(priority, int) or not PRIORITY_MIN <= priority <= PRIORITY_MAX:
            raise ValueError(f"priority {priority!r} out of range")
        if not isinstance(attempts, int) or attempts < 0:
            raise ValueError(f"attempts {attempts!r}")
        if not_before is not None and not (isinstance(not_before, float) and 0 < not_before < math.inf):
            raise ValueError(f"not_before {not_before!r}")
        request = decode_request(bytes(record), priority, bool(dont_filter), bytes(fingerprint), None, host)
    except (ValueError, TypeError) as exc:
        raise CrawlDamaged(where, f"does not hold a request diskfrontier stored ({exc})", hint=HINT) from None
    request.attempts = attempts
    request.not_before = not_before
    return request
