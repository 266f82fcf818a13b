"""``FrontierProtocol``: the public API every frontier keeps (mypy checks each backend against it where a
frontier is opened, ``access/targets.py``), and its local and shared forms. The code built on a frontier
(``crawl()``, the Scrapy scheduler, ``copy``, the CLI) depends on it rather than on either class."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from ..request.model import Request
from .outcomes import Outcome
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
        """Queue ``request``; False (and nothing stored) if its fingerprint was seen before (unless ``dont_filter``).

        When this returns True the request is stored: a ``kill -9`` from now on cannot lose it.
        ``not_before`` (a ``time.time()`` value): not handed out before then.
        """
        ...

    def push_record(self, request: Request, record: bytes) -> bool:
        """``push`` for a request already encoded as ``record`` (a msgpack request record).

        For integrations that build their own records (the Scrapy scheduler stores Scrapy's request dict).
        """
        ...

    def push_many(self, requests: Iterable[Request]) -> int:
        """Push many requests at once; return how many were queued. A bad one raises before any is stored."""
        ...

    def has_seen(self, fingerprint: bytes) -> bool:
        """True if a request with this fingerprint was accepted, in this or an earlier run."""
        ...

    def mark_seen(self, fingerprints: Iterable[bytes]) -> int:
        """Add fingerprints to the seen set without queueing anything; return how many were new.

        For carrying a crawl's seen set to another frontier (``export --seen``).
        """
        ...

    # -- taking and finishing requests
    def pop(self, timeout: float | None = 0.0) -> Request | None:
        """The next ready request, now in flight until ``done``, ``retry`` or ``fail``; None if none is ready.

        The highest-priority request among ready hosts (ties: the host ready longest); within a host,
        priority then the frontier's order. ``timeout=0`` does not wait; ``timeout=t`` waits up to t
        seconds; ``timeout=None`` waits until one is ready, and returns None once the crawl is
        ``finished`` or when nothing could become ready without another call (only hosts blocked for
        ever or over their budget are left).

        A call does a bounded amount of work: ``pop(timeout=0)`` may return None while ``next_ready()``
        says now (a job directory's pop that looked at ``PULL_LIMIT`` held-back requests stops there);
        the next call goes on. Loop on ``pop(timeout=...)``, or on ``finished``, not on the first None.

        While the crawl is paused nothing is handed out: a pop waits out its timeout, and returns a
        request if the crawl is resumed meanwhile.
        """
        ...

    def done(self, request: Request, *, refetch_after: float | None = None) -> None:
        """Acknowledge an in-flight request (as ``pop`` returned it): it is never handed out again.

        ``refetch_after=s``: finished now, and the same request is pending again after ``s`` seconds
        (re-crawl scheduling), its ``attempts`` from 0.
        """
        ...

    def done_many(self, requests: Iterable[Request]) -> None:
        """``done`` for many requests at once; all are checked before any is finished."""
        ...

    def retry(self, request: Request, *, delay: float = 0.0) -> None:
        """Give an in-flight request back, ready after ``delay`` seconds, with ``attempts`` one higher.

        A crash at any point leaves the request either in flight (given back at the next open or
        when its lease ends) or pending again, never lost. It is stored as it is now (a changed
        ``meta`` is kept).
        """
        ...

    def fail(self, request: Request, error: str) -> None:
        """Finish an in-flight request (as ``pop`` returned it) as failed, with ``error``.

        It is not pending and never handed out again (until ``requeue_failed``); ``failed()`` lists
        it with the error text (its first ``MAX_ERROR`` = 4,000 UTF-8 bytes, cut on a character
        boundary), the time and its ``attempts`` as stored (not one higher). It counts in its host's
        done count (and so against a budget), as ``done`` would, and in ``stats()["failed"]``.
        Raises ``NotInFlight`` for a request that is not in flight.
        """
        ...

    def record_outcome(self, *outcomes: Outcome) -> None:
        """Add what fetches came to (``contract/outcomes.py``) to the crawl's outcome counters, which
        ``stats()`` gives and which are kept across restarts; the requests themselves are not touched.

        A Redis crawl adds them in one round trip, durable as a ``done`` is. A job directory keeps
        them in memory and writes them to ``outcomes.json`` each time its holder publishes
        ``status.json`` (about once a second) and at the close: a ``kill -9`` loses those of the last
        second at most.
        """
        ...

    def holds(self, request: Request) -> bool:
        """True if ``request`` is in flight here: the object ``pop`` returned, not yet finished (what
        ``done``, ``retry`` and ``fail`` accept)."""
        ...

    @property
    def in_flight(self) -> list[Request]:
        """The requests in flight here."""
        ...

    # -- failed requests
    def failed(self) -> list[FailedRequest]:
        """Every failed request not requeued, oldest failure first (across runs and crashes).

        Each as it was stored: ``request.attempts`` is set, ``request.not_before`` is None.
        """
        ...

    def requeue_failed(self, limit: int | None = None) -> int:
        """Put failed requests back as pending (``attempts`` 0, ready now), oldest failure first; at
        most ``limit`` of them (None: all). Returns how many.

        A crash at any point leaves each one either failed or pending, never both and never lost.
        Its host's done count keeps the failure; a requeued request that is finished counts again,
        as a re-fetch does.
        """
        ...

    def record_failed(self, failed: Iterable[FailedRequest]) -> int:
        """Store requests as failed, each with its error text, ``failed_at`` time and ``request.attempts``
        as given (for a crawl copied in from elsewhere); return how many.

        ``failed()`` lists them after those already failed, in the order given. No dedupe: each
        is stored even if its fingerprint was seen (and is marked seen). Each counts as done for
        its host, as a failure does.
        """
        ...

    # -- state
    @property
    def finished(self) -> bool:
        """True when nothing is pending and nothing is in flight (failed requests do not count)."""
        ...

    def next_ready(self) -> float | None:
        """When the next pending request may be handed out (a ``time.time()`` value; now if one may be
        now), or None if none can become ready by waiting alone (nothing pending, or paused)."""
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

        A pause is stored with the crawl: it holds across restarts and crashes until ``resume``.
        Requests in flight are not affected; pushes, dones and host changes go on. Pausing a paused
        crawl keeps the time of the first pause (``paused_since``).
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

        Pending requests are those ready and those waiting for a time (``not_before``, a retry's delay,
        a re-fetch). Dropped requests are never handed out, their fingerprints stay seen, and they are counted in
        ``stats()["dropped"]``. Requests in flight, failed or kept in memory only are left alone.
        ``dry_run``: count them and change nothing. ``show``: also return up to that many of their URLs.
        """
        ...

    # -- hosts
    def set_delay(self, host: str, seconds: float | None) -> None:
        """Wait at least ``seconds`` between hand-outs of ``host`` (None: the frontier's delay).

        For a robots.txt Crawl-delay. Every host setting holds across restarts and crashes.
        """
        ...

    def block(self, host: str, until: float) -> None:
        """Hand out nothing of ``host`` before ``until`` (a ``time.time()`` value; ``math.inf``: until
        ``unblock``). For a 429 or 503 with Retry-After."""
        ...

    def unblock(self, host: str) -> None:
        """Undo ``block``: ``host`` is ready as soon as its delay allows."""
        ...

    def set_budget(self, host: str, budget: int | None) -> None:
        """At most ``budget`` requests of ``host`` done or in flight, ever (None: no limit).

        A retried request counts once; a re-fetch counts again.
        """
        ...

    def set_done_count(self, host: str, done: int) -> None:
        """Set how many requests of ``host`` are done (for a crawl copied in from elsewhere); counted by
        its budget."""
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
        """Keep ``entry`` as the robots.txt of ``host`` (replacing any older one); kept across restarts
        (losing it only means fetching it again)."""
        ...

    def hosts(self) -> list[HostInfo]:
        """Every host with pending, in-flight or done requests or a setting: counts, delay, ready time,
        block, budget and consecutive failures, sorted by name."""
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

    def extend(self, request: Request, seconds: float | None = None) -> None:
        """Renew the lease of ``request`` (in flight here): it runs out ``seconds`` (None: ``lease``) from now;
        ``LeaseExpired`` if it ran out already and was taken back."""
        ...

    def extend_many(self, requests: Iterable[Request], seconds: float | None = None) -> list[Request]:
        """Renew the leases of ``requests``; return those whose leases were already lost."""
        ...

    def next_event_seen(self) -> float | None:
        """When something held back by time becomes ready, as the last short ``pop_many`` saw it
        (no round trip); None if it saw nothing waiting."""
        ...
