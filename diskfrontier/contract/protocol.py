"""``FrontierProtocol``: the public API every frontier keeps (mypy checks each backend against it where a
frontier is opened, ``access/targets.py``), and its local and shared forms. The code built on a frontier
(``crawl()``, the Scrapy scheduler, ``copy``, the CLI) depends on it rather than on either class."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from ..request.model import Request
from .values import Dropped, FailedRequest, HostInfo, RobotsEntry


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
