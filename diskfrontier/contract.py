"""What every frontier promises: the public API both backends share, its value types, limits and checks.

``FrontierProtocol`` is the contract of a frontier: the job directory's ``Frontier`` and
``RedisFrontier`` both satisfy it (mypy checks it, at the end of this module), and the code
built on a frontier (``crawl()``, the Scrapy scheduler, ``copy``, the CLI) depends on it
rather than on either class. ``HostInfo`` and ``FailedRequest`` are the values it hands
back; the limits bound the numbers a call takes, and the ``check_*`` functions are the
argument checks both backends apply, so that both refuse the same values with the same
message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .request.model import Request, check_slot

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_ERROR",
    "MAX_ROBOTS",
    "MAX_SECONDS",
    "MAX_TIME",
    "SHARED_STATS",
    "Dropped",
    "FailedRequest",
    "FrontierProtocol",
    "HostInfo",
    "LocalFrontierProtocol",
    "RobotsEntry",
    "SharedFrontierProtocol",
    "check_attempts",
    "check_drop",
    "check_host",
    "check_host_failed",
    "check_robots",
    "check_seconds",
    "check_time",
    "host_backoff",
]

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


# ------------------------------------------------------------------ value types
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


def host_backoff(failures: int, block_after: int, backoff: float, backoff_max: float) -> float:
    """How long a host with ``failures`` consecutive failures is blocked: 0 below ``block_after``, then
    ``backoff`` doubled for each failure past it, at most ``backoff_max``."""
    if failures < block_after:
        return 0.0
    steps = min(failures - block_after, 64)
    return min(backoff * 2.0 ** steps, backoff_max)


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
}
"""The keys every frontier's ``stats()`` has, and what each counts; a backend adds its own."""


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


# ------------------------------------------------------------------ the contract
class FrontierProtocol(Protocol):
    """The public API every frontier has: the job directory's ``Frontier`` and ``RedisFrontier``.

    Requests are pushed (deduplicated by fingerprint), popped (highest priority first among the
    hosts that politeness lets go, then in the frontier's order: LIFO or FIFO), and finished
    by exactly one of ``done``, ``retry`` or ``fail``. Host settings (delay, block, budget)
    hold requests back; ``next_ready`` says when the next one may go.
    """

    order: str  # "lifo" or "fifo", fixed when the frontier was made

    # -- writing requests
    def push(self, request: Request, *, not_before: float | None = None) -> bool:
        """Queue ``request``; False if its fingerprint was seen before (unless ``dont_filter``)."""
        ...

    def push_record(self, request: Request, record: bytes) -> bool:
        """``push`` for a request already encoded as ``record`` (a msgpack request record)."""
        ...

    def push_many(self, requests: Iterable[Request]) -> int:
        """Push many requests; return how many were queued."""
        ...

    def has_seen(self, fingerprint: bytes) -> bool:
        """True if a request with this fingerprint was accepted."""
        ...

    def mark_seen(self, fingerprints: Iterable[bytes]) -> int:
        """Add fingerprints to the seen set without queueing anything; return how many were new."""
        ...

    # -- taking and finishing requests
    def pop(self, timeout: float | None = 0.0) -> Request | None:
        """The next ready request, now in flight; None if none is ready within ``timeout`` seconds.

        A call does a bounded amount of work: ``pop(timeout=0)`` may return None while ``next_ready()``
        says now (a job directory's pop that looked at ``PULL_LIMIT`` held-back requests stops there);
        the next call goes on. Loop on ``pop(timeout=...)``, or on ``finished``, not on the first None.
        """
        ...

    def done(self, request: Request, *, refetch_after: float | None = None) -> None:
        """Acknowledge an in-flight request (pending again after ``refetch_after`` seconds, if given)."""
        ...

    def done_many(self, requests: Iterable[Request]) -> None:
        """``done`` for many requests."""
        ...

    def retry(self, request: Request, *, delay: float = 0.0) -> None:
        """Give an in-flight request back, ready after ``delay`` seconds, with ``attempts`` one higher."""
        ...

    def fail(self, request: Request, error: str) -> None:
        """Finish an in-flight request as failed, with ``error``."""
        ...

    def holds(self, request: Request) -> bool:
        """True if ``request`` is in flight here (what ``done`` would take)."""
        ...

    @property
    def in_flight(self) -> list[Request]:
        """The requests in flight here."""
        ...

    # -- failed requests
    def failed(self) -> list[FailedRequest]:
        """Every failed request not requeued, oldest failure first."""
        ...

    def requeue_failed(self, limit: int | None = None) -> int:
        """Put failed requests back as pending (``attempts`` 0), oldest first; return how many."""
        ...

    def record_failed(self, failed: Iterable[FailedRequest]) -> int:
        """Store requests as failed, with their errors, times and attempts; return how many."""
        ...

    # -- state
    @property
    def finished(self) -> bool:
        """True when nothing is pending and nothing is in flight."""
        ...

    def next_ready(self) -> float | None:
        """When the next pending request may be handed out (``time.time()``); None if nothing is pending."""
        ...

    def stats(self) -> dict[str, Any]:
        """Counters and the state of the frontier (``pending``, ``in_flight``, ``seen``, ...)."""
        ...

    def __len__(self) -> int:
        """Requests waiting to be popped."""
        ...

    # -- steering
    def pause(self) -> None:
        """Hand out nothing until ``resume()``: ``pop`` returns None (waiting out its timeout).

        A pause is stored with the crawl: it holds across restarts until ``resume``.
        Requests in flight are not affected.
        """
        ...

    def resume(self) -> None:
        """End a pause (nothing happens if the crawl is not paused)."""
        ...

    @property
    def paused_since(self) -> float | None:
        """When the crawl was paused (``time.time()``); None if it is not paused."""
        ...

    def drop(self, *, host: str | None = None, match: str | None = None, dry_run: bool = False,
             show: int = 0) -> Dropped:
        """Remove the pending requests of ``host`` (its slot, exactly) or whose URL ``match`` (a regular
        expression, searched) finds; give exactly one of the two.

        Dropped requests are never handed out and their fingerprints stay seen. Requests in
        flight or failed are left alone. ``dry_run``: count them and change nothing. ``show``: also
        return up to that many of their URLs.
        """
        ...

    # -- hosts
    def set_delay(self, host: str, seconds: float | None) -> None:
        """Wait at least ``seconds`` between hand-outs of ``host`` (None: the frontier's delay)."""
        ...

    def block(self, host: str, until: float) -> None:
        """Hand out nothing of ``host`` before ``until`` (``math.inf``: until ``unblock``)."""
        ...

    def unblock(self, host: str) -> None:
        """Undo ``block``."""
        ...

    def set_budget(self, host: str, budget: int | None) -> None:
        """At most ``budget`` requests of ``host`` done or in flight, ever (None: no limit)."""
        ...

    def set_done_count(self, host: str, done: int) -> None:
        """Set how many requests of ``host`` are done (for a crawl copied in from elsewhere)."""
        ...

    def host_failed(self, host: str, *, block_after: int = 5, backoff: float = 60.0,
                    backoff_max: float = 3600.0) -> float | None:
        """Count one more consecutive failure of ``host`` (a timeout, a 5xx: the host, not one URL).

        From ``block_after`` consecutive failures on, each one blocks the host (as ``block``, never
        shortening a longer block) for ``backoff`` seconds, doubled for each failure past
        ``block_after``, at most ``backoff_max``. A ``done`` of any request of the host ends the
        streak (the count goes back to 0). Kept across restarts and crashes. Returns the time the
        host is blocked until, or None if this failure did not block it.
        """
        ...

    def robots(self, host: str) -> RobotsEntry | None:
        """The robots.txt kept for ``host`` (``set_robots``); None if none is kept."""
        ...

    def set_robots(self, host: str, entry: RobotsEntry) -> None:
        """Keep ``entry`` as the robots.txt of ``host`` (replacing any older one); kept across restarts."""
        ...

    def hosts(self) -> list[HostInfo]:
        """Every host with pending, in-flight or done requests or a setting."""
        ...

    def host(self, name: str) -> HostInfo | None:
        """One host as ``hosts()`` tells of it; None if the frontier has nothing of it."""
        ...

    # -- lifetime
    def close(self) -> None:
        """Give back what is in flight here and release the frontier."""
        ...

    def __enter__(self) -> FrontierProtocol:
        ...

    def __exit__(self, *exc: object) -> None:
        ...


class LocalFrontierProtocol(FrontierProtocol, Protocol):
    """A frontier of one process (the job directory's): it may also keep a request that cannot be
    stored in memory only, in its place in the queue order, lost if the process stops first."""

    def push(self, request: Request, *, memory_only: bool = False, not_before: float | None = None) -> bool:
        """``push``; with ``memory_only`` the request is kept in memory, not stored."""
        ...


class SharedFrontierProtocol(FrontierProtocol, Protocol):
    """A frontier shared by many processes (Redis): a popped request is leased to its client for
    ``lease`` seconds, and given back to the others if the lease runs out."""

    lease: float

    def drop_crawl(self) -> int:
        """Delete every key of the crawl and close; how many keys were deleted."""
        ...

    def push_each(self, requests: Iterable[Request], records: Iterable[bytes] | None = None) -> list[bool]:
        """``push_many`` answering for each request (True: queued; False: a duplicate); ``records``:
        their msgpack records if already encoded."""
        ...

    def pop_many(self, count: int) -> list[Request]:
        """Up to ``count`` ready requests in one round trip, each leased (``pop`` order)."""
        ...

    def extend_many(self, requests: Iterable[Request], seconds: float | None = None) -> list[Request]:
        """Renew the leases of ``requests``; return those whose leases were already lost."""
        ...

    def next_event_seen(self) -> float | None:
        """When something held back by time becomes ready, as the last short ``pop_many`` saw it
        (no round trip); None if it saw nothing waiting."""
        ...


if TYPE_CHECKING:  # mypy proves that both backends keep the contract
    from .jobdir.frontier import Frontier
    from .redisfrontier.frontier import RedisFrontier

    _JOBDIR_KEEPS_IT: type[FrontierProtocol] = Frontier
    _REDIS_KEEPS_IT: type[FrontierProtocol] = RedisFrontier
    _JOBDIR_IS_LOCAL: type[LocalFrontierProtocol] = Frontier
    _REDIS_IS_SHARED: type[SharedFrontierProtocol] = RedisFrontier
