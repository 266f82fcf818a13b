"""What fetching a request came to, counted in a frontier's stats and kept across restarts.

A runner (``crawl()``, ``acrawl()``, the Scrapy scheduler) tells the frontier, through
``record_outcome(*outcomes)``, what each fetch gave: its HTTP status, the bytes received, the
seconds it took, whether the request was given back for another attempt and, for a failure,
its kind. The frontier adds them to counters (``OUTCOME_KEYS``) that its ``stats()`` gives
beside the others; the request records are not touched. Every counter only grows: a
``requeue_failed`` takes nothing back from ``failures_*``.

The fetch seconds are kept as a fixed-bucket histogram: ``fetch_seconds_le_<bound>`` counts
the fetches that took at most ``bound`` seconds (cumulative, as Prometheus buckets are), with
``fetch_seconds_count`` (every fetch timed) and ``fetch_seconds_sum``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx", "other")
"""The HTTP status classes counted (``other``: 1xx and anything outside 100-599)."""
FAILURE_KINDS = ("retry", "fail", "backoff", "robots", "other")
"""The failure kinds counted: a ``crawl()`` handler's (``run/failurekinds.py``), a request robots.txt
disallowed, and any other a runner names."""
FETCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""The upper bounds (seconds) of the fetch time histogram's buckets; the last, +Inf, is ``fetch_seconds_count``."""


def bucket_key(bound: float) -> str:
    """The counter of the fetches that took at most ``bound`` seconds: ``fetch_seconds_le_0.25``."""
    return f"fetch_seconds_le_{bound:g}"


STATUS_KEYS = tuple(f"responses_{name}" for name in STATUS_CLASSES)
FAILURE_KEYS = tuple(f"failures_{name}" for name in FAILURE_KINDS)
BUCKET_KEYS = tuple(bucket_key(bound) for bound in FETCH_BUCKETS)
OUTCOME_KEYS = (*STATUS_KEYS, "received_bytes", "fetch_seconds_sum", "fetch_seconds_count", *BUCKET_KEYS,
                "retries", *FAILURE_KEYS)
"""Every outcome counter a frontier's ``stats()`` gives (all whole numbers but ``fetch_seconds_sum``)."""


def status_class(status: int) -> str:
    """``2xx``, ``3xx``, ``4xx``, ``5xx`` or ``other``."""
    return f"{status // 100}xx" if 200 <= status <= 599 else "other"


@dataclass(frozen=True)
class Outcome:
    """One fetch's outcome, as ``record_outcome`` takes it.

    ``status``: the HTTP status (None: no response, or not known). ``received_bytes``: the bytes of
    the response's body. ``fetch_seconds``: how long the fetch took (None: not timed).
    ``retried``: the request was given back for another attempt. ``failure``: the kind of the
    failure (one of ``FAILURE_KINDS``; another name is counted as ``other``), None if it did not fail.
    """

    status: int | None = None
    received_bytes: int = 0
    fetch_seconds: float | None = None
    retried: bool = False
    failure: str | None = None

    def __post_init__(self) -> None:
        if self.status is not None and (isinstance(self.status, bool) or not isinstance(self.status, int)):
            raise TypeError(f"Outcome.status must be an int (an HTTP status) or None, got {self.status!r:.80}")
        size = self.received_bytes
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"Outcome.received_bytes must be a whole number of at least 0, got {size!r:.80}")
        seconds = self.fetch_seconds
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                    or not math.isfinite(seconds) or seconds < 0):
            raise ValueError(f"Outcome.fetch_seconds must be None or a number of seconds of at least 0, "
                             f"got {seconds!r:.80}")
        if self.failure is not None and not isinstance(self.failure, str):
            raise TypeError(f"Outcome.failure must be a str (a failure kind) or None, got {self.failure!r:.80}")


def tally(outcomes: Iterable[Outcome]) -> dict[str, float]:
    """The counters ``outcomes`` add to (only those they change), checked to be ``Outcome`` objects."""
    out: dict[str, float] = {}
    for outcome in outcomes:
        if not isinstance(outcome, Outcome):
            raise TypeError(f"record_outcome() takes Outcome objects, got {type(outcome).__name__}")
        if outcome.status is not None:
            key = "responses_" + status_class(outcome.status)
            out[key] = out.get(key, 0) + 1
        if outcome.received_bytes:
            out["received_bytes"] = out.get("received_bytes", 0) + outcome.received_bytes
        seconds = outcome.fetch_seconds
        if seconds is not None:
            out["fetch_seconds_sum"] = out.get("fetch_seconds_sum", 0.0) + float(seconds)
            out["fetch_seconds_count"] = out.get("fetch_seconds_count", 0) + 1
            for bound, key in zip(FETCH_BUCKETS, BUCKET_KEYS, strict=True):
                if seconds <= bound:
                    out[key] = out.get(key, 0) + 1
        if outcome.retried:
            out["retries"] = out.get("retries", 0) + 1
        if outcome.failure is not None:
            key = "failures_" + (outcome.failure if outcome.failure in FAILURE_KINDS else "other")
            out[key] = out.get(key, 0) + 1
    return out


def outcome_counts(found: Mapping[str, object]) -> dict[str, float]:
    """Every outcome counter from ``found`` (a stored form: missing or unreadable counters are 0)."""
    out: dict[str, float] = {}
    for key in OUTCOME_KEYS:
        value = found.get(key)
        if isinstance(value, bytes):
            value = value.decode("ascii", "replace")
        try:
            number = float(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else 0.0
        except ValueError:
            number = 0.0
        if not math.isfinite(number) or number < 0:
            number = 0.0
        out[key] = number if key == "fetch_seconds_sum" else int(number)
    return out


__all__ = [
    "BUCKET_KEYS",
    "FAILURE_KEYS",
    "FAILURE_KINDS",
    "FETCH_BUCKETS",
    "OUTCOME_KEYS",
    "STATUS_CLASSES",
    "STATUS_KEYS",
    "Outcome",
    "bucket_key",
    "outcome_counts",
    "status_class",
    "tally",
]
