"""``PostgresFrontier``: the contract on a PostgreSQL server, for many processes on many machines, with the crawl
on the server's disk; a façade over its parts.

Each call checks its arguments (``contract/checks.py``), refuses to run once the frontier is closed or in a
process that did not open it (``state.py``), and delegates: each step is one call of a function of the crawl's
schema (``sql/``), through ``connection.py``; the stores of requests (``writes.py``), pops and waiting pops
(``taking.py``), the ends and renewals of leases (``finishing.py``, over this client's ``leases.py``), host
settings and robots.txt (``hostrules.py``), reads of the whole crawl (``reading.py``), pause and drop
(``steering.py``), and the open (``schema.py``). The tables and what each holds: ``docs/format.md``,
"PostgreSQL".
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from ..contract import checks
from ..contract.outcomes import OUTCOME_KEYS, Outcome
from ..contract.values import Dropped, FailedRequest, HostInfo, RobotsEntry
from ..core.errors import FrontierError
from ..request.model import Request
from ..request.revisit import REVISIT_COUNTERS
from .connection import Database, check_crawl_name, shown_url
from .finishing import Finishing
from .hostrules import HostRules
from .leases import Renewal
from .reading import Reading
from .schema import ORDERS, Settings, install
from .state import Shared
from .steering import Steering
from .taking import Taking
from .writes import Writes, push_rows

log = logging.getLogger("diskfrontier")

_CLOSE_WAIT = 30.0  # seconds close() waits for pops under way in other threads
ACKS = ("deferred", "wait")  # how a done is acknowledged (PostgresFrontier's ack)


class PostgresFrontier:
    """A crawl frontier kept in PostgreSQL and shared by any number of processes on any number of machines.

    ``PostgresFrontier("postgresql://user@db:5432/crawls", crawl="news")`` opens the crawl ``news`` (made on first
    use) in the schema ``df_news`` of that database. Every client of one crawl sees one frontier: one seen set,
    one set of queues, one politeness schedule (a host's delay holds across all of them: a pop takes a host
    with ``FOR UPDATE SKIP LOCKED`` and records its hand-out before it commits; no lock is held while a request
    is fetched). Each call does what ``SharedFrontierProtocol`` (the contract) says, in one transaction; its
    docstring here says what PostgreSQL adds. The guide: docs/guide/postgres.md; the tables: docs/format.md,
    "PostgreSQL".

    Leases: ``pop`` leases the request to this client for ``lease`` seconds (default 30), renewed every third
    of it by a thread of this client (``renew=False``: only ``extend`` renews); when a lease runs out (the
    process was killed, frozen or cut off) any client's next pop takes the request back as pending
    (``stats()['reclaimed']``), and a late ``done`` of the old copy raises ``LeaseExpired`` without touching the
    new one. ``close()`` gives back this client's leased requests at once.

    ``ack="deferred"`` (the default, with the renewal thread): ``done`` returns at once and rides on this
    client's next step (the next ``pop`` ends the lease in its own transaction: one round trip a pop and done);
    every other step, read and the close send it first, the renewal thread 50 ms later at the latest. A kill
    before it is sent loses the done: its request is handed out once more after its lease; a lease found lost
    then is logged and counted in ``stats()['acks_lost']``. ``ack="wait"``: each ``done`` waits for its answer
    (and raises ``LeaseExpired`` itself).

    Crawl settings (``order``, ``delay``, ``per_host``) belong to the crawl: None keeps what the crawl has (a new
    crawl: ``new_order``, no delay, no limit); a value sets it for the crawl (``order`` is fixed when it is made).
    ``per_host=0`` means no limit; every pop reads the crawl's settings as any client last set them (the
    attributes ``delay`` and ``per_host`` are what the open found or set). Times are the server's clock
    (``clock_timestamp()``), so every client agrees on delays and leases. A lost connection (a server restart)
    is tried again for up to a minute before a call raises ``PostgresUnavailable``. ``pool_size``: connections
    this client keeps at most.
    """

    def __init__(self, url: str, *, crawl: str, lease: float = 30.0, renew: bool = True, delay: float | None = None,
                 per_host: int | None = None, order: str | None = None, create: bool = True,
                 new_order: str = "lifo", pool_size: int = 10, ack: str = "deferred") -> None:
        self.crawl = check_crawl_name(crawl)
        if ack not in ACKS:
            raise ValueError(f"ack must be 'deferred' or 'wait', got {ack!r}")
        self.ack = ack if renew else "wait"  # a deferred done needs the renewal thread to send it
        self.url = url
        self.lease = checks.check_seconds("lease", lease)
        if self.lease <= 0:
            raise ValueError(f"lease must be more than 0 seconds, got {lease!r}")
        if delay is not None:
            delay = checks.check_seconds("delay", delay)
        if per_host is not None:
            per_host = checks.check_count("PostgresFrontier()", "per_host", per_host, 31)
        for name, value in (("order", order), ("new_order", new_order)):
            if value is not None and value not in ORDERS:
                raise ValueError(f"{name} must be 'lifo' or 'fifo', got {value!r}")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 2:
            raise ValueError(f"pool_size must be a whole number of at least 2, got {pool_size!r}")
        db = Database(url, self.crawl, size=pool_size)
        try:
            opened = install(db, Settings(order, delay, per_host, new_order, create))
        except BaseException:
            db.close()
            raise
        self.order, self.delay, self.per_host, self.made = opened.order, opened.delay, opened.per_host, opened.made
        self._shared = shared = Shared(db, self.crawl, self.order == "fifo", self.delay, self.per_host, self.lease,
                                       deferred=self.ack == "deferred")
        self._writes, self._taking, self._finishing = Writes(shared), Taking(shared), Finishing(shared)
        self._rules, self._reading, self._steering = HostRules(shared), Reading(shared), Steering(shared)
        try:
            self._finishing.renew_all()  # the client's entry in the crawl's clients
        except BaseException:
            db.close()
            raise
        self._renewal = Renewal(self._finishing.renew_all, self.lease, f"diskfrontier-leases {self.crawl}",
                                self._finishing.flush) if renew else None
        if self._renewal is not None:
            shared.dones.nudge = self._renewal.nudge

    # ------------------------------------------------------------------ the client
    @property
    def client_id(self) -> str:
        """This client's id in the crawl (``<hex>-<pid>``)."""
        return self._shared.leases.client_id

    def _ready(self) -> None:
        """Raise unless the frontier may be used (``Shared.check``); then send the dones waiting, so that every step
        and read of this client sees its own dones applied."""
        self._shared.check()
        self._finishing.flush()

    def __enter__(self) -> PostgresFrontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<PostgresFrontier {self.crawl!r} at {shown_url(self.url)}>"

    # ------------------------------------------------------------------ adding requests
    def push(self, request: Request, *, not_before: float | None = None) -> bool:
        """``FrontierProtocol.push``: dedupe, store and enqueue in one transaction, committed when this returns.
        ``not_before`` is compared with the server's clock."""
        checks.check_request("push", request)
        due = None if not_before is None else checks.check_time("not_before", not_before)
        rows = push_rows([request], not_before=due)
        self._ready()
        return self._writes.push(rows)[0]

    def push_record(self, request: Request, record: bytes) -> bool:
        """``FrontierProtocol.push_record``: as ``push``."""
        checks.check_request("push_record", request)
        rows = push_rows([request], [record])
        self._ready()
        return self._writes.push(rows)[0]

    def push_many(self, requests: Iterable[Request]) -> int:
        """``FrontierProtocol.push_many``: ``BATCH`` requests a call, each call one transaction; every request is
        checked and encoded before anything is sent."""
        return sum(self.push_each(requests))

    def push_each(self, requests: Iterable[Request], records: Iterable[bytes] | None = None) -> list[bool]:
        """``SharedFrontierProtocol.push_each``: as ``push_many``."""
        batch = list(requests)
        encoded: list[bytes | None] | None = None if records is None else list(records)
        if encoded is not None and len(encoded) != len(batch):
            raise ValueError(f"push_each() got {len(batch)} requests and {len(encoded)} records")
        checks.check_requests("push_each", batch)
        rows = push_rows(batch, encoded)
        self._ready()
        return self._writes.push(rows) if batch else []

    def has_seen(self, fingerprint: bytes) -> bool:
        """``FrontierProtocol.has_seen``: its 64-bit key in the seen table."""
        [checked] = checks.check_fingerprints("has_seen()", [fingerprint])
        self._ready()
        from ..redisfrontier.seen import key64

        return bool(self._shared.db.value("has_seen", "SELECT EXISTS (SELECT 1 FROM seen WHERE key = %s)",
                                          [key64(checked)]))

    def mark_seen(self, fingerprints: Iterable[bytes]) -> int:
        """``FrontierProtocol.mark_seen``."""
        batch = checks.check_fingerprints("mark_seen()", fingerprints)
        self._ready()
        return self._writes.mark_seen(batch)

    # ------------------------------------------------------------------ handing out and finishing
    def pop(self, timeout: float | None = 0.0) -> Request | None:
        """``FrontierProtocol.pop``: the request is leased to this client (``lease``). Other clients' pushes and
        dones are not signalled: a waiting pop looks again every few milliseconds, up to a quarter second apart,
        and at once when something held back by time is due; paused, it waits out its timeout (None: until a
        ``resume``)."""
        if timeout is not None and timeout != 0.0:
            timeout = checks.check_seconds("timeout", timeout)
        self._shared.check()  # the pop carries the dones waiting
        return self._taking.pop(timeout)

    def pop_many(self, count: int) -> list[Request]:
        """``SharedFrontierProtocol.pop_many``: one call, one transaction."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be a whole number of at least 1, got {count!r}")
        self._shared.check()  # the pop carries the dones waiting
        return self._taking.pop_many(count)

    def done(self, request: Request, *, refetch_after: float | None = None) -> None:
        """``FrontierProtocol.done``. With ``ack="deferred"`` (and no ``refetch_after``) it rides on the next step
        (a lease found lost then: ``stats()['acks_lost']``); else one call, ``LeaseExpired`` if its lease was taken
        back (nothing is changed)."""
        seconds = None if refetch_after is None else checks.check_seconds("refetch_after", refetch_after)
        self._finishing.done(request, seconds)

    def done_many(self, requests: Iterable[Request]) -> None:
        """``FrontierProtocol.done_many`` in one call; ``LeaseExpired`` names those taken back (the others are done)."""
        self._finishing.done_many(list(requests))

    def retry(self, request: Request, *, delay: float = 0.0) -> None:
        """``FrontierProtocol.retry``: one call ends the lease and stores the request pending again."""
        self._finishing.retry(request, checks.check_seconds("delay", delay))

    def fail(self, request: Request, error: str) -> None:
        """``FrontierProtocol.fail``: one call; ``LeaseExpired`` if its lease was taken back."""
        self._finishing.fail(request, checks.check_error("fail()", error))

    def record_outcome(self, *outcomes: Outcome) -> None:
        """``FrontierProtocol.record_outcome``: one call adding to the crawl's counters."""
        self._finishing.record_outcome(outcomes)

    def holds(self, request: Request) -> bool:
        """``FrontierProtocol.holds``: leased to this client."""
        return self._shared.leases.holds(request)

    def extend(self, request: Request, seconds: float | None = None) -> None:
        """``SharedFrontierProtocol.extend``: one call."""
        seconds = None if seconds is None else checks.check_seconds("seconds", seconds)
        if self._finishing.extend([request], seconds):
            from ..redisfrontier.connection import LeaseExpired

            raise LeaseExpired(f"extend() of {request!r}: its lease ran out and it was taken back")

    def extend_many(self, requests: Iterable[Request], seconds: float | None = None) -> list[Request]:
        """``SharedFrontierProtocol.extend_many`` in one call."""
        seconds = None if seconds is None else checks.check_seconds("seconds", seconds)
        return self._finishing.extend(list(requests), seconds)

    def next_event_seen(self) -> float | None:
        """``SharedFrontierProtocol.next_event_seen``: ``next_ready`` (one round trip: a pop here does not say)."""
        return self.next_ready()

    @property
    def in_flight(self) -> list[Request]:
        """``FrontierProtocol.in_flight``: the requests this client holds leases on."""
        return self._shared.leases.requests()

    # ------------------------------------------------------------------ failed requests
    def failed(self) -> list[FailedRequest]:
        """``FrontierProtocol.failed``."""
        self._ready()
        return self._reading.failed()

    def requeue_failed(self, limit: int | None = None) -> int:
        """``FrontierProtocol.requeue_failed``: one call."""
        limit = checks.check_limit("requeue_failed()", limit)
        self._ready()
        count = int(self._shared.db.value("requeue_failed", "SELECT requeue_failed(%s::bigint, %s)",
                                          [limit, self._shared.fifo]))
        self._shared.signal()
        return count

    def record_failed(self, failed: Iterable[FailedRequest]) -> int:
        """``FrontierProtocol.record_failed``: ``BATCH`` requests a call."""
        entries = checks.check_failed("record_failed()", failed)
        self._ready()
        return self._writes.record_failed(entries)

    # ------------------------------------------------------------------ reading the whole crawl
    def pending_requests(self, *, leased: bool = True) -> Iterator[Request]:
        """Every request of the crawl not done, in no order (``leased=False``: not those leased now), page by page
        beside running clients: a request moved meanwhile may be read twice or not at all."""
        self._ready()
        return self._reading.pending_requests(leased=leased)

    def seen_fingerprints(self) -> Iterator[bytes]:
        """Every key of the seen set, as the fingerprint it stands for (its 8 bytes and 12 zero bytes)."""
        self._ready()
        return self._reading.seen_fingerprints()

    # ------------------------------------------------------------------ state
    def __len__(self) -> int:
        """``FrontierProtocol.__len__``: pending in the crawl, not counting those leased to any client."""
        self._ready()
        return self._reading.pending()

    @property
    def finished(self) -> bool:
        """``FrontierProtocol.finished``: for every client (nothing leased by any)."""
        self._ready()
        return self._reading.finished()

    def next_ready(self) -> float | None:
        """``FrontierProtocol.next_ready``. A lease running out is such a time too. While the crawl is paused, a
        quarter second from now (a ``resume`` by another client is not signalled)."""
        self._ready()
        return self._taking.next_ready()

    def stats(self) -> dict[str, Any]:
        """``FrontierProtocol.stats``: the crawl's counters (all clients) and ``leased_here``, this client's."""
        self._ready()
        crawl = self._reading.stats()
        return {
            "backend": "postgres", "crawl": self.crawl, "pending": crawl["pending"], "in_flight": crawl["in_flight"],
            "leased_here": len(self._shared.leases), "acks_lost": self._shared.dones.lost,
            "acks_failed": self._shared.dones.failed,
            **{name: crawl[name] for name in ("done", "seen", "pushed", "duplicates", "retried",
                                              "refetch_scheduled", "reclaimed", "failed", "dropped", "delayed",
                                              "hosts", "ready_hosts", "paused_since", *REVISIT_COUNTERS,
                                              *OUTCOME_KEYS)},
            "order": self.order, "delay": crawl["delay"], "per_host": crawl["per_host"], "lease": self.lease,
            "dedupe": "exact",
        }

    # ------------------------------------------------------------------ steering
    def pause(self) -> None:
        """``FrontierProtocol.pause``: every client's next pop sees it."""
        self._ready()
        self._steering.set_paused(True)

    def resume(self) -> None:
        """``FrontierProtocol.resume``."""
        self._ready()
        self._steering.set_paused(False)

    @property
    def paused_since(self) -> float | None:
        """``FrontierProtocol.paused_since``, on the server's clock."""
        self._ready()
        return self._reading.paused_since()

    def drop(self, *, host: str | None = None, match: str | None = None, dry_run: bool = False,
             show: int = 0) -> Dropped:
        """``FrontierProtocol.drop``, a page of requests at a time while clients pop and push: a request pushed
        meanwhile may or may not be dropped; leased ones never are."""
        pattern = checks.check_drop(host, match, show, dry_run)
        self._ready()
        return self._steering.drop(host, pattern, dry_run, show)

    def drop_crawl(self) -> int:
        """``SharedFrontierProtocol.drop_crawl``: the crawl's schema is dropped (other clients get errors from
        then on); how many tables and sequences it held."""
        self._ready()
        if self._renewal is not None:
            self._renewal.stop()
        dropped = self._steering.drop_crawl()
        self._shared.leases.clear()
        self.close()
        return dropped

    # ------------------------------------------------------------------ hosts
    def set_delay(self, host: str, seconds: float | None) -> None:
        """``FrontierProtocol.set_delay``, for every client."""
        name = checks.check_host(host)
        seconds = None if seconds is None else checks.check_seconds("seconds", seconds)
        self._ready()
        self._rules.set(name, "delay", seconds, "set_delay")

    def block(self, host: str, until: float) -> None:
        """``FrontierProtocol.block``: ``until`` is compared with the server's clock."""
        name = checks.check_host(host)
        until = checks.check_until("block(): until", until)
        self._ready()
        self._rules.set(name, "blocked_until", until, "block")

    def unblock(self, host: str) -> None:
        """``FrontierProtocol.unblock``."""
        name = checks.check_host(host)
        self._ready()
        self._rules.set(name, "blocked_until", None, "unblock")

    def set_budget(self, host: str, budget: int | None) -> None:
        """``FrontierProtocol.set_budget``: at most 2**53 - 1 (the largest whole number every backend keeps)."""
        name = checks.check_host(host)
        budget = checks.check_count("set_budget()", "budget", budget, 53, optional=True)
        self._ready()
        self._rules.set(name, "budget", budget, "set_budget")

    def set_done_count(self, host: str, done: int) -> None:
        """``FrontierProtocol.set_done_count``: at most 2**53 - 1."""
        name = checks.check_host(host)
        count = checks.check_count("set_done_count()", "done", done, 53)
        self._ready()
        self._rules.set(name, "done", count, "set_done_count")

    def host_failed(self, host: str, *, block_after: int = 5, backoff: float = 60.0,
                    backoff_max: float = 3600.0) -> float | None:
        """``FrontierProtocol.host_failed``: the count and the block in one call; the time is the server's."""
        name = checks.check_host(host)
        block_after, backoff, backoff_max = checks.check_host_failed(block_after, backoff, backoff_max)
        self._ready()
        return self._rules.failed(name, block_after, backoff, backoff_max)

    def robots(self, host: str) -> RobotsEntry | None:
        """``FrontierProtocol.robots``, kept in the crawl's ``robots`` table."""
        name = checks.check_host(host)
        self._ready()
        return self._rules.robots(name)

    def set_robots(self, host: str, entry: RobotsEntry) -> None:
        """``FrontierProtocol.set_robots``: for every client."""
        name = checks.check_host(host)
        checked = checks.check_robots(entry)
        self._ready()
        self._rules.set_robots(name, checked)

    def hosts(self) -> list[HostInfo]:
        """``FrontierProtocol.hosts``."""
        self._ready()
        return self._reading.hosts()

    def host(self, name: str) -> HostInfo | None:
        """``FrontierProtocol.host``, in one query."""
        name = checks.check_host(name)
        self._ready()
        return self._reading.host(name)

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        """``FrontierProtocol.close``: this client's leased requests are pending again at once (at new places, in
        the order they were handed out), its entry in the crawl's clients removed; in a forked child, nothing is
        sent (the leases are the parent's)."""
        shared = self._shared
        if shared.closed:
            return
        import os

        if os.getpid() != shared.pid:
            shared.closed = True
            return
        if self._renewal is not None:
            self._renewal.stop()
        held = shared.leases.closing(_CLOSE_WAIT)
        try:
            self._finishing.flush()
            if held:
                self._finishing.finish("release", held, call="close")
            self._finishing.leave()
        except FrontierError as exc:
            log.warning("close(): %d leased requests of crawl %r could not be given back (%s); they come back "
                        "when their leases run out", len(held), self.crawl, exc)
        finally:
            shared.closed = True
            shared.db.close()
            shared.signal()


__all__ = ["PostgresFrontier"]
