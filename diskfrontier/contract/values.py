"""The values a frontier hands back (``FailedRequest``, ``HostInfo``, ``RobotsEntry``, ``Dropped``) and the keys
every frontier's ``stats()`` has."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..request.model import Request
from .outcomes import FAILURE_KINDS, FETCH_BUCKETS, STATUS_CLASSES, bucket_key


@dataclass(frozen=True)
class FailedRequest:
    """A failed request: the request (with its ``attempts``), the error text and when it failed."""

    request: Request
    error: str
    failed_at: float  # time.time()


@dataclass(frozen=True)
class HostInfo:
    """What ``Frontier.hosts()`` tells of one host."""

    host: str
    pending: int
    in_flight: int
    done: int
    delay: float  # in effect: the host's own, else the frontier's
    ready_at: float | None  # when its next request may be handed out (time.time()); None: nothing pending
    blocked_until: float | None
    budget: int | None
    failures: int = 0  # consecutive failures (``host_failed``) since its last done request

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (JSON-ready)."""
        return {"host": self.host, "pending": self.pending, "in_flight": self.in_flight, "done": self.done,
                "delay": self.delay, "ready_at": self.ready_at, "blocked_until": self.blocked_until,
                "budget": self.budget, "failures": self.failures}


@dataclass(frozen=True)
class RobotsEntry:
    """A host's robots.txt as a frontier keeps it: the HTTP status of the fetch (0: no answer, a
    timeout or a connection error), its body (at most ``MAX_ROBOTS`` bytes) and when it was fetched."""

    status: int
    body: bytes
    fetched_at: float  # time.time()


@dataclass(frozen=True)
class Dropped:
    """What ``drop`` removed (or, with ``dry_run``, would remove)."""

    count: int
    urls: list[str]  # the URLs of the first ``show`` of them


SHARED_STATS = {
    "pending": "requests waiting to be popped",
    "in_flight": "requests popped and not finished (Redis: leased by any client)",
    "delayed": "pending requests waiting for a time (not_before, a retry's delay, a re-fetch)",
    "seen": "fingerprints in the seen set",
    "hosts": "hosts known to the frontier",
    "order": "'lifo' or 'fifo'",
    "pushed": "requests queued (a job directory: by this run; Redis: by every client)",
    "duplicates": "pushes refused as seen before (counted as pushed is)",
    "retried": "requests given back by retry (counted as pushed is)",
    "refetch_scheduled": "requests done with refetch_after (counted as pushed is)",
    "done": "requests done (counted as pushed is)",
    "failed": "requests recorded as failed (counted as pushed is)",
    "dropped": "pending requests removed by drop() (counted as pushed is)",
    "paused_since": "when the crawl was paused (time.time()); None while it runs",
    "delay": "the frontier's delay between hand-outs of a host without a delay of its own (seconds)",
    **{f"responses_{c}": f"responses with a {c} status (record_outcome; every run)" for c in STATUS_CLASSES},
    "received_bytes": "bytes of the response bodies (record_outcome; every run)",
    "fetch_seconds_count": "fetches timed (record_outcome; every run)",
    "fetch_seconds_sum": "their seconds (record_outcome; every run)",
    **{bucket_key(b): f"fetches that took at most {b:g} s (record_outcome; every run)" for b in FETCH_BUCKETS},
    "retries": "fetches given back for another attempt (record_outcome; every run)",
    **{f"failures_{k}": f"failed fetches of kind {k} (record_outcome; every run)" for k in FAILURE_KINDS},
}
"""The keys every frontier's ``stats()`` has, and what each counts; a backend adds its own."""
