"""Turning a target — a job directory's path, or a Redis or PostgreSQL URL with a crawl name — into a frontier.

This is the one module that knows every backend: ``open_target`` opens a frontier for
reading and writing (the job directory's ``Frontier``, locked, a ``RedisFrontier`` or a ``PostgresFrontier``),
typed as the contract (``FrontierProtocol``); ``open_view`` opens a read-only view of a
crawl (``CrawlView``) that takes no lock, so it is safe beside a live crawl. ``crawl()``,
the CLI and ``copy`` go through here instead of choosing a class themselves.

Each backend's frontier class is imported when a frontier of it is opened, so that reading a job
directory (``peek``, ``export``) loads neither.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..contract.protocol import FrontierProtocol, LocalFrontierProtocol, SharedFrontierProtocol
from ..contract.values import FailedRequest
from ..core.errors import FrontierError
from ..jobdir.layout import SALTED_FROM, Layout, read_meta
from ..jobdir.reader import (
    FailedRequests,
    HostRow,
    PendingRequests,
    all_seen_fingerprints,
    failed_requests,
    host_table,
    pending_requests,
)
from ..pgfrontier import is_postgres_url
from ..redisfrontier import is_redis_url
from ..request.model import Request

log = logging.getLogger("diskfrontier")

__all__ = [
    "CrawlView",
    "HostCopy",
    "backend_name",
    "backend_of",
    "is_postgres_target",
    "is_redis_target",
    "is_server_target",
    "open_target",
    "open_view",
]


def is_redis_target(target: str | os.PathLike[str]) -> bool:
    """True if ``target`` is a Redis URL (``redis://``, ``rediss://``, ``unix://``), not a job directory."""
    return isinstance(target, str) and is_redis_url(target)


def is_postgres_target(target: str | os.PathLike[str]) -> bool:
    """True if ``target`` is a PostgreSQL URL (``postgresql://``, ``postgres://``), not a job directory."""
    return is_postgres_url(target)


def backend_of(target: str | os.PathLike[str]) -> str:
    """Which backend ``target`` names: ``"redis"``, ``"postgres"`` (a server's URL, whose crawls are named apart)
    or ``"jobdir"`` (a job directory's path). The one place that tells them apart."""
    if is_redis_target(target):
        return "redis"
    if is_postgres_target(target):
        return "postgres"
    return "jobdir"


def is_server_target(target: str | os.PathLike[str]) -> bool:
    """True if ``target`` is a server's URL (Redis or PostgreSQL), which takes a crawl's name beside it."""
    return backend_of(target) != "jobdir"


def backend_name(target: str | os.PathLike[str]) -> str:
    """The backend of ``target`` as a message names it: "Redis", "PostgreSQL" or "job directory"."""
    return {"redis": "Redis", "postgres": "PostgreSQL"}.get(backend_of(target), "job directory")


def _check_crawl(target: str | os.PathLike[str], crawl: str | None) -> None:
    if is_server_target(target):
        if crawl is None:
            raise ValueError(f"a {backend_name(target)} URL names a server: give the crawl's name as crawl=")
    elif crawl is not None:
        raise ValueError(f"crawl= names a crawl in Redis or PostgreSQL, and {os.fspath(target)} is a job directory")


def open_target(target: str | os.PathLike[str], crawl: str | None = None, **options: Any) -> FrontierProtocol:
    """The frontier at ``target``: a job directory (``Frontier(target, **options)``) or, for a Redis or
    PostgreSQL URL, the crawl named ``crawl`` there (``RedisFrontier(target, crawl=crawl, **options)``,
    ``PostgresFrontier(target, crawl=crawl, **options)``).

    ``crawl`` is required with a server's URL and refused with a job directory (ValueError).
    """
    _check_crawl(target, crawl)
    if crawl is not None:
        return open_shared(os.fspath(target), crawl, **options)
    return open_local(target, **options)


def open_local(path: str | os.PathLike[str], **options: Any) -> LocalFrontierProtocol:
    """The job directory at ``path`` as a frontier of this process (``Frontier(path, **options)``)."""
    from ..jobdir.frontier import Frontier

    return Frontier(path, **options)


def open_shared(url: str, crawl: str, **options: Any) -> SharedFrontierProtocol:
    """The crawl ``crawl`` at ``url``, shared with other clients: in Redis (``RedisFrontier``) or PostgreSQL
    (``PostgresFrontier``)."""
    if is_postgres_target(url):
        from ..pgfrontier.frontier import PostgresFrontier

        return PostgresFrontier(url, crawl=crawl, **_postgres_options(options))
    from ..redisfrontier.frontier import RedisFrontier

    return RedisFrontier(url, crawl=crawl, **options)


# The options of RedisFrontier that a PostgreSQL crawl has no use for, and the value at which each asks for
# nothing: given so, they are left out (a caller that opens either backend passes them as it is); given other
# values, the open is refused. ``prefer`` is a preference, not a promise: "idle" (the Scrapy scheduler's choice
# under Scrapy's default queue) is left out and logged.
_REDIS_ONLY = {"prefer": ("priority", None), "shards": (None, 1), "wait_replicas": (0, None)}


def _postgres_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` for ``PostgresFrontier``: those of a Redis crawl that ask for nothing left out; ValueError for
    one that asks for what a PostgreSQL crawl does not do."""
    kept = dict(options)
    for name, neutral in _REDIS_ONLY.items():
        if name in kept:
            value = kept.pop(name)
            if name == "prefer" and value == "idle":
                log.info("prefer='idle' does not apply to a PostgreSQL crawl: it hands out the best request of a "
                         "ready host")
            elif value not in neutral:
                raise ValueError(f"{name}={value!r} is a setting of a Redis crawl; a PostgreSQL crawl has no such "
                                 f"setting (it hands out the best request of a ready host, from one server): leave "
                                 f"{name} out")
    return kept


# ------------------------------------------------------------------ read-only views
@dataclass(frozen=True)
class HostCopy:
    """One host as a view reads it: its own settings (None: none of its own) and done count."""

    host: str
    delay: float | None
    blocked_until: float | None
    budget: int | None
    done: int

    @property
    def has_settings(self) -> bool:
        return self.delay is not None or bool(self.blocked_until) or self.budget is not None


class CrawlView(Protocol):
    """A crawl read without changing it: what ``export``, ``copy``, ``peek`` and ``hosts`` read of either backend."""

    order: str
    settings: dict[str, Any] | None  # the crawl's own delay, per_host and prefer; None: it keeps none
    dedupe: str  # "exact", or "bloom" (a seen set that cannot be listed)
    seen_bits: int | None  # bits of each fingerprint the seen set keeps (None: all of it)

    def pending_count(self) -> int:
        """About how many requests ``pending_requests()`` gives."""
        ...

    def pending_requests(self) -> Iterator[Request]:
        """The requests not done (in flight or leased ones as pending), of the view's priority if it has one."""
        ...

    def failed(self) -> Iterator[FailedRequest]:
        """The failed requests, oldest failure first."""
        ...

    def seen_estimate(self) -> int:
        """About how many fingerprints ``seen_fingerprints`` gives."""
        ...

    def seen_fingerprints(self) -> Iterator[bytes]:
        """Every fingerprint of the seen set (a few may come twice)."""
        ...

    def host_copies(self) -> list[HostCopy]:
        """Every host with its own settings or a done count."""
        ...

    def host_rows(self) -> list[HostRow]:
        """Every host with pending or done requests or a setting, as ``diskfrontier hosts`` lists them."""
        ...

    def close(self) -> None:
        ...

    def __enter__(self) -> CrawlView:
        ...

    def __exit__(self, *exc: object) -> None:
        ...


class JobDirView:
    """A job directory, read without the lock (safe beside a live crawl). Its pending requests (of
    ``priority`` only, if given) are read before its failed ones, so that a request failing meanwhile
    is in one or both, never in neither: both when the view is made, or with ``failed=False`` each
    when first asked for. Priorities highest first, each in push order (``pop_order``: in pop order)."""

    def __init__(self, path: str, *, priority: int | None = None, failed: bool = True,
                 pop_order: bool = False) -> None:
        self.path = path
        self.layout = Layout(path)
        if not os.path.lexists(self.layout.meta):
            raise FrontierError(f"{path} is not a diskfrontier job directory (no frontier.json)")
        meta = read_meta(self.layout)
        self.order: str = meta["order"]
        self.version: int = meta["version"]
        self.settings: dict[str, Any] | None = None  # a job directory keeps no crawl settings
        self.dedupe: str = "exact"
        self.seen_bits: int | None = None
        self._priority, self._push_order = priority, not pop_order
        self._pending: PendingRequests | None = None
        self._failed: FailedRequests | None = None
        if failed:
            self.failed()  # the pending requests, then the failed ones

    def _read_pending(self) -> PendingRequests:
        if self._pending is None:
            self._pending = pending_requests(self.path, priority=self._priority, push_order=self._push_order)
        return self._pending

    def pending_count(self) -> int:
        return len(self._read_pending())

    def pending_requests(self) -> Iterator[Request]:
        return iter(self._read_pending())

    def failed(self) -> Iterator[FailedRequest]:
        if self._failed is None:
            self._read_pending()
            self._failed = failed_requests(self.path)
        return iter(self._failed)

    def seen_estimate(self) -> int:
        try:
            return os.lstat(self.layout.seen).st_size // 22
        except FileNotFoundError:
            return 0

    def seen_fingerprints(self) -> Iterator[bytes]:
        """Every fingerprint of ``requests.seen``, then those of the journal's PUSH records that the
        seen file may not have received yet (after a crash, or while a crawl holds the directory):
        the records from the checkpoint's floor on, as recovery reads them."""
        return all_seen_fingerprints(self.path)

    def host_copies(self) -> list[HostCopy]:
        if self.version < SALTED_FROM:
            return []  # an older format keeps no hosts
        return [HostCopy(row.host, row.delay, row.blocked_until, row.budget, row.done)
                for row in host_table(self.path)]

    def host_rows(self) -> list[HostRow]:
        return host_table(self.path)

    def close(self) -> None:
        pass

    def __enter__(self) -> JobDirView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SharedView:
    """A crawl on a server, read through a client of it opened without taking part (``RedisView``,
    ``PostgresView``: they differ in how the client is opened and what its settings are)."""

    frontier: Any  # the backend's frontier class, opened by the subclass
    priority: int | None
    leased: bool
    order: str
    settings: dict[str, Any] | None
    dedupe: str
    seen_bits: int | None

    def pending_count(self) -> int:
        """Every request not done, or not leased (of every priority: counting one priority takes a scan)."""
        stats = self.frontier.stats()
        return int(stats["pending"]) + (int(stats["in_flight"]) if self.leased else 0)

    def pending_requests(self) -> Iterator[Request]:
        requests = self.frontier.pending_requests(leased=self.leased)
        if self.priority is None:
            return requests
        return (r for r in requests if r.priority == self.priority)

    def failed(self) -> Iterator[FailedRequest]:
        return iter(self.frontier.failed())

    def seen_estimate(self) -> int:
        return int(self.frontier.stats()["seen"])

    def seen_fingerprints(self) -> Iterator[bytes]:
        return self.frontier.seen_fingerprints()

    def host_copies(self) -> list[HostCopy]:
        crawl_delay = self.frontier.delay
        return [HostCopy(info.host, None if info.delay == crawl_delay else info.delay, info.blocked_until,
                         info.budget, info.done)
                for info in self.frontier.hosts()]

    def host_rows(self) -> list[HostRow]:
        crawl_delay = self.frontier.delay
        return [HostRow(info.host, info.pending, info.done, None if info.delay == crawl_delay else info.delay,
                        info.blocked_until, info.budget, info.in_flight, info.failures)
                for info in self.frontier.hosts()]

    def close(self) -> None:
        self.frontier.close()

    def __enter__(self) -> SharedView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RedisView(SharedView):
    """A Redis crawl, read with scans (its leased requests are read as pending, in no order; with
    ``pop_order`` they are left out: a pop cannot take them)."""

    def __init__(self, url: str, crawl: str, *, priority: int | None = None, pop_order: bool = False) -> None:
        self.priority = priority
        self.leased = not pop_order
        from ..redisfrontier.frontier import RedisFrontier

        self.frontier = RedisFrontier(url, crawl=crawl, create=False)
        self.order = self.frontier.order
        self.settings: dict[str, Any] | None = {"delay": self.frontier.delay, "per_host": self.frontier.per_host,
                                                "prefer": self.frontier.prefer}
        self.dedupe: str = self.frontier.dedupe
        self.seen_bits: int | None = 64 if self.frontier.stats()["seen_layout"] == "set64" else None


class PostgresView(SharedView):
    """A PostgreSQL crawl, read page by page beside running clients (its leased requests are read as pending, in
    no order; with ``pop_order`` they are left out: a pop cannot take them)."""

    def __init__(self, url: str, crawl: str, *, priority: int | None = None, pop_order: bool = False) -> None:
        self.priority = priority
        self.leased = not pop_order
        from ..pgfrontier.frontier import PostgresFrontier

        self.frontier = PostgresFrontier(url, crawl=crawl, create=False, renew=False)
        self.order = self.frontier.order
        self.settings: dict[str, Any] | None = {"delay": self.frontier.delay,
                                                "per_host": self.frontier.per_host or None, "prefer": "priority"}
        self.dedupe: str = "exact"
        self.seen_bits: int | None = 64  # the seen set keeps each fingerprint's 64-bit key


def open_view(target: str, crawl: str | None = None, *, priority: int | None = None,
              failed: bool = True, pop_order: bool = False) -> CrawlView:
    """A read-only view of the crawl at ``target`` (a job directory, or a Redis or PostgreSQL URL with ``crawl``), its
    pending requests those of ``priority`` if given.

    A job directory's pending requests, and its failed ones unless ``failed=False`` (then each is
    read when first asked for, the pending ones first), are read when the view is made. Its pending
    requests come in push order within each priority (what ``export`` writes), or with ``pop_order``
    in the order ``pop`` takes them; a Redis or PostgreSQL crawl's in no order, and with ``pop_order`` without
    those leased to a client (a pop cannot take them)."""
    _check_crawl(target, crawl)
    if crawl is not None and is_postgres_target(target):
        return PostgresView(target, crawl, priority=priority, pop_order=pop_order)
    if crawl is not None:
        return RedisView(target, crawl, priority=priority, pop_order=pop_order)
    return JobDirView(target, priority=priority, failed=failed, pop_order=pop_order)


if TYPE_CHECKING:  # mypy proves that both views keep the view's contract
    _JOBDIR_VIEW: type[CrawlView] = JobDirView
    _REDIS_VIEW: type[CrawlView] = RedisView
    _POSTGRES_VIEW: type[CrawlView] = PostgresView
