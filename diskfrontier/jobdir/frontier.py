"""``Frontier``: the crash-safe crawl frontier, a façade over the job directory's parts.

Scrapy's composition (a seen-file dupefilter, a priority queue of disk queues, a
memory fallback) with a recovery journal under it:

* ``push`` appends one PUSH record to the journal (one ``write`` system call), then
  marks the fingerprint seen and queues the record's offset. ``push_many`` is one write
  for the whole group. ``done`` appends one DONE record, ``fail`` one FAIL record.
  ``pop`` writes nothing: what is in flight lives in memory, and is pending as far as
  the journal is concerned.
* The failed requests are a set of journal offsets (each request's and its FAIL
  record's) kept in memory, in ``requests.hosts`` at a clean close, and rebuilt from the
  FAIL records after anything else; ``requeue_failed`` makes one pending again with one
  RETRY record naming it.
* The queues and the seen file are derived from the journal. A clean ``close`` makes
  them consistent and says so in the checkpoint; after anything else they are rebuilt
  from the journal at the next open (``recovery.py``).
* Every call is atomic with respect to this process's state: a write that fails is cut
  back from the journal, and an exception after the journal write (a Ctrl-C, a
  MemoryError) marks the frontier dirty, so that ``close`` leaves the checkpoint saying
  "rebuild" instead of writing a clean one over inconsistent queues.
* One lock serialises the calls, so a frontier may be shared by many threads.

This class checks the arguments, holds the lock, refuses calls once the frontier is
closed or cannot go on, wakes waiting ``pop`` calls, and delegates the work to its parts,
which share one state object (``shared.py``): the writes (``ledger.py``), the pop side
(``dispatch.py``), opening, from the settings' checks to the directory's lock
(``opening.py``), and compaction and the close (``closing.py``). The stored request has
one codec (``records.py``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

from ..contract.backoff import host_backoff
from ..contract.checks import MAX_TIME as _MAX_TIME
from ..contract.checks import check_attempts as _attempts
from ..contract.checks import check_drop, check_host_failed, check_robots
from ..contract.checks import check_host as _check_host
from ..contract.checks import check_seconds as _check_seconds
from ..contract.checks import check_time as _check_time
from ..contract.snapshot import LATEST_FAILURES, TOP_HOSTS, snapshot
from ..contract.values import Dropped, FailedRequest, RobotsEntry
from ..core.errors import FrontierClosed, FrontierError
from ..files.atomic import write_atomic
from ..politeness.schedule import HostInfo
from ..request.model import Request
from . import commands, inbox, steering
from .closing import Closing
from .dispatch import Dispatch
from .hostmeta import HostHealth, RobotsStore
from .journal import REFETCH, RETRY, cap_error
from .layout import Layout
from .ledger import Ledger
from .maintenance.compaction import Compacted
from .opening import Opening, check_settings
from .replay import Progress
from .seenindex import key_of
from .shared import Shared
from .swap import Swap
from .upkeep import Maintenance, Upkeep
from .watcher import Watcher

DEFAULT_MAINTENANCE = Maintenance()

log = logging.getLogger("diskfrontier")
_OPEN: weakref.WeakSet[Frontier] = weakref.WeakSet()  # for the fork hooks below


class Frontier:
    """A crawl frontier kept in a job directory, safe across restarts and ``kill -9``.

    ``Frontier(path)`` creates the directory or resumes it, and locks it: a second open
    raises ``JobDirLocked`` naming the holder's pid. ``order`` ("lifo" or "fifo") is fixed
    when the directory is created; ``None`` means "lifo" for a new one and whatever it
    was for an existing one. ``fsync=True`` makes every call also survive a power cut.
    ``progress`` is called as ``progress(done, total)`` during long recovery scans.

    Politeness: a host (a request's ``slot``) is *ready* when ``delay`` seconds have
    passed since its last request was handed out (``set_delay`` changes one host's),
    fewer than ``per_host`` of its requests are in flight, it is not blocked and it is
    under its budget. ``pop`` hands out the highest-priority request among ready hosts;
    with ``prefer="idle"``, from the ready host with the fewest requests in flight first
    (Scrapy's ``DownloaderAwarePriorityQueue`` rule). The defaults (``delay=0``,
    ``per_host=None``, ``prefer="priority"``) hold nothing back.

    Thread-safe: one lock serialises the calls, so worker threads may share it, and a
    ``pop(timeout=...)`` waiting for a request wakes on ``push``, ``done``, ``retry`` and
    host changes. Only the process that opened it may use it (a forked child gets
    ``JobDirNotOwned``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        order: str | None = None,
        fsync: bool = False,
        progress: Progress | None = None,
        delay: float = 0.0,
        per_host: int | None = None,
        prefer: str = "priority",
        watch: bool = True,
        maintenance: Maintenance | None = DEFAULT_MAINTENANCE,
    ) -> None:
        delay = check_settings(delay=delay, per_host=per_host, prefer=prefer, order=order, fsync=fsync)
        self.path = os.fspath(path)
        self.layout = Layout(self.path)
        self.fsync = fsync
        if maintenance is not None and not isinstance(maintenance, Maintenance):
            raise TypeError(f"maintenance must be a diskfrontier.Maintenance or None, got {type(maintenance).__name__}")
        self._closed = True
        self._mutex = threading.RLock()  # re-entrant: a compact() progress callback may read stats()
        self._cond = threading.Condition(self._mutex)
        self._state = state = Shared(self.path, self.layout, fsync=fsync, delay=delay, per_host=per_host,
                                     prefer=prefer)
        self._ledger = Ledger(state, check_time=_check_time, check_attempts=_attempts)
        self._dispatch = Dispatch(state)
        self._upkeep = Upkeep(state, self._mutex, maintenance, Swap(state, self._mutex, self._dispatch))
        self._closing = Closing(state, self._dispatch, self._upkeep.compact_now)
        self._lock = Opening(state).open_locked(order, progress, self._closing.release_files)
        self._health = HostHealth(self.path)  # sidecars (hostmeta.py): read once the lock is held
        self._robots = RobotsStore(self.path)
        self.order: str = state.order
        self.recovery: str = state.recovery
        self._closed = False
        _OPEN.add(self)
        self._watcher: Watcher | None = None
        self._hosts_seen: tuple[list[HostInfo], int, int, int] = ([], 0, 0, 0)  # status.json's, refreshed apart
        self._upkeep.reset()  # the counts it starts from are the opened directory's
        try:
            self._apply_commands()  # those sent while nobody held the directory, or cut short by a stop
        except BaseException:
            self.close()
            raise
        if watch or maintenance is not None:
            self._watcher = Watcher(self.path, tick=self._upkeep.tick,
                                    apply_commands=self._apply_commands if watch else None,
                                    publish_status=self._publish_status if watch else None)

    def _wake(self) -> None:
        """Wake the threads waiting in ``pop(timeout=...)``: something changed."""
        if self._state.waiters:
            self._cond.notify_all()

    # ------------------------------------------------------------------ adding requests
    def push(self, request: Request, *, memory_only: bool = False, not_before: float | None = None) -> bool:
        """Queue ``request``; False (and nothing written) if its fingerprint was seen before.

        When this returns True the request is on its way to the OS: a ``kill -9`` from
        now on cannot lose it (with ``fsync=True``, neither can a power cut).
        ``not_before`` (a ``time.time()`` value): not handed out before then.
        ``memory_only=True`` keeps it in memory without trying to store it (the caller
        knows it cannot be): served in priority order in this run, lost at close, outside
        the host rules and times (so it cannot take a ``not_before``). A request that cannot
        be stored is kept the same way (its ``not_before`` is not kept; a warning says so).
        """
        if not isinstance(request, Request):
            raise TypeError(f"push() takes a diskfrontier.Request, got {type(request).__name__}")
        if memory_only and (not_before is not None or request.not_before is not None):
            raise ValueError("a request kept in memory only cannot wait for a time: push it without not_before")
        due = 0.0 if not_before is None else _check_time("not_before", not_before)
        fingerprint = request.fingerprint  # computed outside the lock: it is the costly part
        key = key_of(fingerprint)
        with self._mutex:
            self._check_open()
            if not self._ledger.push(request, fingerprint, key, due, memory_only):
                return False
            if self._state.waiters:
                self._cond.notify_all()
            return True

    def push_record(self, request: Request, record: bytes) -> bool:
        """``push`` for a request already encoded as ``record`` (a msgpack request record).

        For integrations that build their own records (the Scrapy scheduler stores
        Scrapy's request dict): dedupe as ``push``, then one journal write.
        """
        fingerprint = request.fingerprint
        key = key_of(fingerprint)
        with self._mutex:
            self._check_open()
            if not self._ledger.push_record(request, record, fingerprint, key):
                return False
            self._wake()
            return True

    def push_records(self, pairs: Iterable[tuple[Request, bytes]], *, dedupe: bool = True) -> int:
        """Store already encoded requests as one group commit; return how many were stored.

        ``dedupe=False`` stores every one (their fingerprints are still marked seen):
        for importing requests whose fingerprints an earlier crawl already saw.
        """
        batch = list(pairs)
        with self._mutex:
            self._check_open()
            if dedupe:
                batch = self._ledger.fresh(batch)
            self._ledger.store(batch)
            if batch:
                self._wake()
            return len(batch)

    def push_many(self, requests: Iterable[Request]) -> int:
        """Push many requests as one group commit (one write); return how many were queued.

        Every request is checked first: a bad one raises before anything is written.
        """
        batch = list(requests)
        for request in batch:
            if not isinstance(request, Request):
                raise TypeError(f"push_many() takes diskfrontier.Request objects, got {type(request).__name__}")
            request.fingerprint  # noqa: B018 - computed outside the lock: it is the costly part
        with self._mutex:
            self._check_open()
            queued = self._ledger.push_many(batch)
            if queued:
                self._wake()
            return queued

    def has_seen(self, fingerprint: bytes) -> bool:
        """True if a request with this fingerprint was accepted, in this or an earlier run."""
        with self._mutex:
            self._check_open()
            return self._ledger.seen(fingerprint)

    def mark_seen(self, fingerprints: Iterable[bytes]) -> int:
        """Add fingerprints to the seen set without queueing anything; return how many were new.

        For carrying a crawl's seen set to another job directory (``export --seen``).
        They are written to ``requests.seen`` before this returns.
        """
        batch = list(fingerprints)
        for fingerprint in batch:
            if not isinstance(fingerprint, bytes) or not 1 <= len(fingerprint) <= 255:
                raise TypeError(f"mark_seen() takes fingerprints of 1 to 255 bytes, got {fingerprint!r:.80}")
        with self._mutex:
            self._check_open()
            return self._ledger.mark_seen(batch)

    # ------------------------------------------------------------------ handing out and finishing
    def pop(self, timeout: float | None = 0.0) -> Request | None:
        """The next request, now in flight until ``done`` (or ``retry``); None if none is ready.

        The highest-priority request among ready hosts (ties: the host ready longest);
        within a host, priority then LIFO/FIFO. ``timeout=0`` does not wait; ``timeout=t``
        waits up to t seconds for a request to become ready; ``timeout=None`` waits until
        one is, and returns None once the crawl is ``finished`` or when nothing could ever
        become ready without another call (nothing in flight, nothing waiting for a time:
        only hosts blocked for ever or over their budget are left).

        Each call does a bounded amount of work: with host rules in force it pulls at most
        ``PULL_LIMIT`` (1,024) requests of held-back hosts from the priority queues into host
        buffers. A ``pop(timeout=0)`` that stops there returns None while ``next_ready()`` says
        now, and the next call goes on; a waiting pop goes on at once.
        """
        if timeout.__class__ is not float or timeout != 0.0:  # the usual pop() is spared the checks
            timeout = None if timeout is None else _check_seconds("timeout", timeout)
        with self._mutex:
            self._check_open()
            request = self._dispatch.pop() if self._state.paused_since is None else None
            if request is not None or timeout == 0:
                return request
            return self._pop_wait(timeout)

    def _pop_wait(self, timeout: float | None) -> Request | None:
        state, dispatch = self._state, self._dispatch
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            paused = state.paused_since is not None
            wake = None if paused else dispatch.next_event()
            if timeout is None and wake is None and not state.inflight and not paused:
                return None  # finished, or stalled: nothing can become ready by waiting
            wait = None if wake is None else max(0.0, wake - time.time()) + 0.001
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                wait = left if wait is None else min(wait, left)
            state.waiters += 1
            try:
                self._cond.wait(None if wait is None else min(wait, 3600.0))  # woken again to look
            finally:
                state.waiters -= 1
            self._check_open()
            request = dispatch.pop() if state.paused_since is None else None
            if request is not None:
                return request

    def done(self, request: Request, *, refetch_after: float | None = None) -> None:
        """Acknowledge ``request`` (as returned by ``pop``): it will never be handed out again.

        ``refetch_after=s``: finished now, and the same request comes back as pending
        after ``s`` seconds (re-crawl scheduling), written as one REFETCH record.
        """
        if refetch_after is not None:
            self._requeue(request, "done", REFETCH, _check_seconds("refetch_after", refetch_after), 0)
            with self._mutex:
                if self._health.failures:
                    self._health.succeeded(request.slot)
            return
        with self._mutex:
            self._check_open()
            self._ledger.done(request)
            if self._health.failures:
                self._health.succeeded(request.slot)
            if self._state.waiters:
                self._cond.notify_all()

    def retry(self, request: Request, *, delay: float = 0.0) -> None:
        """Give an in-flight request back, ready after ``delay`` seconds, with ``attempts`` one higher.

        One RETRY record: a crash at any point leaves the request either in flight (it
        comes back at the next open) or pending again, never lost. (A request kept in
        memory only comes back at once: no time is kept for it.) The request is stored
        as it is now (a changed ``meta`` is kept).
        """
        self._requeue(request, "retry", RETRY, _check_seconds("delay", delay), 1)

    def _requeue(self, request: Request, what: str, kind: int, after: float, more_attempts: int) -> None:
        with self._mutex:
            self._check_open()
            self._ledger.requeue(request, what, kind, after, more_attempts)
            self._wake()

    def done_many(self, requests: Iterable[Request]) -> None:
        """``done`` for many requests as one write; all are checked before anything is written."""
        batch = list(requests)
        with self._mutex:
            self._check_open()
            self._ledger.done_many(batch)
            if self._health.failures:
                for request in batch:
                    self._health.succeeded(request.slot)
            if batch:
                self._wake()

    def holds(self, request: Request) -> bool:
        """True if ``request`` is this frontier's in-flight object: the one ``pop`` returned, not yet
        finished (what ``done``, ``retry`` and ``fail`` accept)."""
        with self._mutex:
            return self._dispatch.holds(request)

    # ------------------------------------------------------------------ failed requests
    def fail(self, request: Request, error: str) -> None:
        """Finish an in-flight ``request`` (as ``pop`` returned it) as failed, with ``error``.

        One FAIL record: the request is not pending and never handed out again (until
        ``requeue_failed``), and ``failed()`` lists it with the error text (its first
        ``MAX_ERROR`` = 4,000 UTF-8 bytes, cut on a character boundary), the time and its
        ``attempts`` as they were stored (not one higher). It is finished: it counts in its
        host's done count (and so against a budget), as ``done`` would, and in
        ``stats()["failed"]``. A request kept in memory only is dropped and counted in
        ``stats()["failed"]`` with no record (and not in its host's done count, as with ``done``):
        ``failed()`` cannot list it. Raises ``NotInFlight`` for a request that is not in flight.
        """
        if not isinstance(error, str):
            raise TypeError(f"fail(): error must be a str, got {type(error).__name__}")
        text = cap_error(error)
        with self._mutex:
            self._check_open()
            self._ledger.fail(request, text)
            self._wake()

    def failed(self) -> list[FailedRequest]:
        """Every failed request not requeued, oldest failure first (across runs and crashes).

        Each is read from the journal as it was stored: ``request.attempts`` is set,
        ``request.not_before`` is None. Requests kept in memory only that failed are not listed.
        """
        with self._mutex:
            self._check_open()
            return self._dispatch.failed()

    def requeue_failed(self, limit: int | None = None) -> int:
        """Put failed requests back as pending (``attempts`` 0, ready now), oldest failure first;
        at most ``limit`` of them (None: all). Returns how many.

        Each is one RETRY record naming the failed request: a crash at any point leaves each
        one either failed or pending, never both and never lost. Its host's done count
        keeps the failure; a requeued request that is handed out and finished counts again,
        as a re-fetch does.
        """
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"requeue_failed(): limit must be None or a whole number of at least 1, got {limit!r}")
        with self._mutex:
            self._check_open()
            requeued = self._ledger.requeue_failed(limit)
            if requeued:
                self._wake()
            return requeued

    def record_failed(self, failed: Iterable[FailedRequest]) -> int:
        """Store requests as failed, each with its error text, ``failed_at`` time and ``request.attempts``
        as given (for a crawl copied in from elsewhere); returns how many. ``failed()`` lists them
        after those already failed, in the order given.

        Each is a PUSH record followed by a FAIL record naming it, all in one journal write: the
        same records ``fail()`` leaves, so nothing new is on disk. No dedupe: each is stored even
        if its fingerprint was seen (it is marked seen, as a push marks it). Each counts as done
        for its host, as a failure does.
        """
        entries = list(failed)
        prepared = self._ledger.prepare_failed(entries)
        if not prepared:
            return 0
        with self._mutex:
            self._check_open()
            self._ledger.record_failed(entries, prepared)
            return len(entries)

    # ------------------------------------------------------------------ time and hosts
    @property
    def finished(self) -> bool:
        """True when nothing is pending and nothing is in flight (failed requests do not count)."""
        with self._mutex:
            return not self._state.inflight and not any(self._state.pending.values())

    def next_ready(self) -> float | None:
        """When the next pending request may be handed out (a ``time.time()`` value; now if one
        may be now), or None if none can become ready by waiting alone."""
        with self._mutex:
            self._check_open()
            if self._state.paused_since is not None:
                return None  # nothing becomes ready by waiting: only resume() hands out again
            return self._dispatch.next_ready()

    # ------------------------------------------------------------------ steering
    def pause(self) -> None:
        """Hand out nothing until ``resume()``: ``pop`` returns None (waiting out its timeout).

        A PAUSE record: the pause holds across restarts and crashes until ``resume``.
        Requests in flight are not affected; pushes, dones and host changes go on.
        """
        with self._mutex:
            self._check_open()
            self._ledger.set_paused(True)

    def resume(self) -> None:
        """End a pause (nothing happens if the crawl is not paused)."""
        with self._mutex:
            self._check_open()
            if self._ledger.set_paused(False):
                self._cond.notify_all()

    @property
    def paused_since(self) -> float | None:
        """When the crawl was paused (``time.time()``); None if it is not paused."""
        return self._state.paused_since

    def drop(self, *, host: str | None = None, match: str | None = None, dry_run: bool = False,
             show: int = 0) -> Dropped:
        """Remove the pending requests of ``host`` (its slot, exactly) or whose URL ``match`` (a regular
        expression, searched) finds; give exactly one of the two.

        Each is a DROP record: never handed out, its fingerprint stays seen, counted in
        ``stats()["dropped"]``. Requests in flight, failed or kept in memory only are left
        alone. ``dry_run``: count them and change nothing. ``show``: also return up to that many
        of their URLs. Costs one scan of the journal.
        """
        pattern = check_drop(host, match, show)
        with self._mutex:
            self._check_open()
            dropped = steering.drop(self._state, Opening(self._state), self._dispatch, host, pattern, dry_run, show)
            return dropped

    # ------------------------------------------------------------------ commands and status for other processes
    def _apply_commands(self) -> int:
        """Apply the commands waiting in the inbox (``jobdir/inbox.py``); return how many."""
        state = self._state
        if not inbox.queued(state.path, state.inbox_skips) and state.open_group is None:
            return 0
        with self._mutex:
            self._check_open()
            applied = commands.apply_queued(self, state, self._ledger)
            if applied:
                self._cond.notify_all()
            return applied

    def _publish_status(self, *, with_hosts: bool) -> float:
        """Write ``status.json`` (``snapshot.snapshot``); return the seconds the host list took."""
        state = self._state
        cost = 0.0
        with self._mutex:
            self._check_open()
            stats = state.stats(journal_open=True)
            ready = None if state.paused_since is not None else self._dispatch.next_ready()
            if with_hosts:
                started = time.perf_counter()
                self._hosts_seen = self._dispatch.busiest_hosts(TOP_HOSTS, time.time())
                cost = time.perf_counter() - started
            failures = self._dispatch.latest_failed(LATEST_FAILURES)
        busiest, total, ready_hosts, waiting = self._hosts_seen
        value = snapshot(stats, busiest, failures, ready, source=self.path, host_counts=(total, ready_hosts, waiting))
        write_atomic(self.layout.status, json.dumps(value, default=str).encode(), durable=False)
        return cost

    def set_delay(self, host: str, seconds: float | None) -> None:
        """Wait at least ``seconds`` between hand-outs of ``host`` (None: the frontier's ``delay``).

        For a robots.txt Crawl-delay. Kept in the journal: it holds across restarts and crashes.
        """
        name = _check_host(host)
        delay = None if seconds is None else _check_seconds("seconds", seconds)
        with self._mutex:
            self._check_open()
            entry = self._ledger.host(name)
            self._ledger.set_host(entry, delay, entry.blocked_until, entry.budget)
            self._wake()

    def block(self, host: str, until: float) -> None:
        """Hand out nothing of ``host`` before ``until`` (a ``time.time()`` value; ``math.inf``: until
        ``unblock``). For a 429 or 503 with Retry-After. Kept across restarts and crashes."""
        name = _check_host(host)
        if until != math.inf:
            until = _check_time("block(): until", until)
        with self._mutex:
            self._check_open()
            entry = self._ledger.host(name)
            self._ledger.set_host(entry, entry.delay, float(until), entry.budget)
            self._wake()

    def unblock(self, host: str) -> None:
        """Undo ``block``: ``host`` is ready as soon as its delay allows."""
        name = _check_host(host)
        with self._mutex:
            self._check_open()
            entry = self._ledger.host(name)
            self._ledger.set_host(entry, entry.delay, 0.0, entry.budget)
            self._wake()

    def set_budget(self, host: str, budget: int | None) -> None:
        """At most ``budget`` requests of ``host`` done or in flight, ever (None: no limit).

        A retried request counts once; a re-fetch counts again. Kept across restarts and crashes.
        """
        name = _check_host(host)
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or not 0 <= budget < 2**63):
            raise ValueError(f"set_budget(): budget must be None or a whole number from 0 to 2**63 - 1, got {budget!r}")
        with self._mutex:
            self._check_open()
            entry = self._ledger.host(name)
            self._ledger.set_host(entry, entry.delay, entry.blocked_until, budget)
            self._wake()

    def set_done_count(self, host: str, done: int) -> None:
        """Set how many requests of ``host`` are done (for a crawl copied in from elsewhere); kept in
        the journal like the host's settings, and counted by its budget."""
        name = _check_host(host)
        if isinstance(done, bool) or not isinstance(done, int) or not 0 <= done < 2**64:
            raise ValueError(f"set_done_count(): done must be a whole number from 0 to 2**64 - 1, got {done!r}")
        with self._mutex:
            self._check_open()
            self._ledger.set_done_count(self._ledger.host(name), done)
            self._wake()

    def host_failed(self, host: str, *, block_after: int = 5, backoff: float = 60.0,
                    backoff_max: float = 3600.0) -> float | None:
        """Count one more consecutive failure of ``host``; from ``block_after`` on, block it for
        ``backoff`` seconds doubled for each failure past ``block_after``, at most ``backoff_max``.

        A ``done`` of any request of the host ends the streak. The count is kept in
        ``hosts.health`` (replaced whole, fsynced) before the block is written to the journal as
        a HOST record: a kill between the two keeps the count and loses that one block, which
        the host's next failure sets again. Returns the time the host is blocked until, or None.
        """
        name = _check_host(host)
        block_after, backoff, backoff_max = check_host_failed(block_after, backoff, backoff_max)
        with self._mutex:
            self._check_open()
            count = self._health.failed(name)
            seconds = host_backoff(count, block_after, backoff, backoff_max)
            if not seconds:
                return None
            entry = self._ledger.host(name)
            until = max(entry.blocked_until, min(time.time() + seconds, float(_MAX_TIME)))
            if until != entry.blocked_until:
                self._ledger.set_host(entry, entry.delay, until, entry.budget)
            return until

    def robots(self, host: str) -> RobotsEntry | None:
        """The robots.txt kept for ``host`` (in ``robots/``); None if none is kept."""
        name = _check_host(host)
        with self._mutex:
            self._check_open()
            return self._robots.get(name)

    def set_robots(self, host: str, entry: RobotsEntry) -> None:
        """Keep ``entry`` as the robots.txt of ``host``: one file of ``robots/``, replaced whole and fsynced
        (losing it only means fetching it again)."""
        name = _check_host(host)
        checked = check_robots(entry)
        with self._mutex:
            self._check_open()
            self._robots.put(name, checked)

    def hosts(self) -> list[HostInfo]:
        """Every host with pending, in-flight or done requests or a setting: counts, delay, ready time,
        block, budget and consecutive failures, sorted by name."""
        with self._mutex:
            self._check_open()
            return self._health.annotate(self._dispatch.host_infos(), self._state.hosts.delay)

    def host(self, name: str) -> HostInfo | None:
        """One host as ``hosts()`` tells of it, found without listing the others; None if it has
        no pending, in-flight or done requests and no setting."""
        name = _check_host(name)
        with self._mutex:
            self._check_open()
            return self._health.annotate_one(name, self._dispatch.host_info(name), self._state.hosts.delay)

    # ------------------------------------------------------------------ counts
    def __len__(self) -> int:
        """Requests waiting to be popped (in flight and failed ones not counted)."""
        with self._mutex:
            return sum(self._state.pending.values())

    @property
    def in_flight(self) -> list[Request]:
        """The requests popped and not yet done."""
        with self._mutex:
            return list(self._state.inflight.values())

    def stats(self) -> dict[str, Any]:
        """Counters of this run and the state of the frontier.

        ``failed``: the failed requests not requeued (those ``failed()`` lists, kept across runs), plus
        the requests kept in memory only that failed in this run.
        """
        with self._mutex:
            return {**self._state.stats(journal_open=not self._closed), **self._upkeep.stats()}

    # ------------------------------------------------------------------ compaction and closing
    def checkpoint(self) -> dict[str, Any]:
        """Save the journal's state now (as the background does every so often): a recovery after a crash, and
        ``inspect`` or ``peek`` of the directory, then read only what is written after this point.

        Runs in the calling thread; other threads' calls go on meanwhile. Returns what was
        done: ``{"ok": True, "pending": ..., "seconds": ...}``.
        """
        with self._mutex:
            self._check_open()
        return self._upkeep.run_now("checkpoint")

    def compact(self, progress: Progress | None = None) -> Compacted:
        """Rewrite the journal to hold only what is live (pending and failed requests, host settings), now.

        The background does it by itself (``maintenance``); this is for when you want it at once.
        Runs in the calling thread; other threads' calls go on meanwhile, requests in flight
        included (their ``done``, ``retry`` and ``fail`` work after it as before it).
        ``progress(done, total)`` is called as it goes.
        """
        with self._mutex:
            self._check_open()
        return self._closing.compact(progress)

    def close(self) -> None:
        """Checkpoint: re-queue what is in flight, write the queue headers and the cursor, unlock.

        In a process that did not open the frontier (a forked child), only this
        process's file descriptors are closed: nothing is written and the lock stays
        with its owner.
        """
        if not self._closed and not self._lock.owned():  # a forked child: nothing of the parent's is touched
            self._closed = True
            self._closing.forget_files()
            self._lock.release()
            return
        watcher, self._watcher = getattr(self, "_watcher", None), None
        if watcher is not None:
            watcher.stop()  # outside the lock: it may be waiting for it
        upkeep = getattr(self, "_upkeep", None)
        if upkeep is not None:
            upkeep.stop()  # a checkpoint or compaction under way: stopped, its files removed
        with self._mutex:
            if self._closed:
                return
            if not self._state.broken:
                try:
                    commands.apply_queued(self, self._state, self._ledger)  # those sent while it ran
                except Exception as exc:
                    log.warning("%s: commands left in the inbox for the next open (%s: %s)", self.path,
                                type(exc).__name__, exc)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.layout.status)
            self._closed = True
            _OPEN.discard(self)
            self._cond.notify_all()  # waiting pop()s raise FrontierClosed
            try:
                self._closing.close()
            finally:
                self._lock.release()

    # ------------------------------------------------------------------ guarding every call
    def _check_open(self) -> None:
        # a forked child's copy of the lock is closed right after the fork (lock.py)
        state = self._state
        if self._closed or state.broken or self._lock.fd < 0:
            self._refuse()

    def _refuse(self) -> None:
        state = self._state
        if self._closed:
            raise FrontierClosed(f"the frontier of {self.path} is closed; open it again with Frontier(path)")
        self._lock.check_owner()
        if state.broken:
            raise FrontierError(f"the frontier of {self.path} cannot go on ({state.broken}); close it and open it "
                                f"again: it is rebuilt from its journal")
        raise FrontierClosed(f"the frontier of {self.path} no longer holds its lock; open it again with Frontier(path)")

    def __enter__(self) -> Frontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        # without the lock: a repr must never wait, and the counts are only indicative
        pending = sum(list(self._state.pending.values()))
        state = "closed" if self._closed else f"{pending} pending, {len(self._state.inflight)} in flight"
        return f"<Frontier {self.path} ({state})>"


def compact_jobdir(path: str | os.PathLike[str],
                   progress: Callable[[], AbstractContextManager[Progress | None]] = contextlib.nullcontext,
                   ) -> tuple[Compacted, int]:
    """Open the job directory at ``path`` (locked), compact it and close it: ``diskfrontier compact``.

    ``progress()`` is entered once the directory is open, and gives the compaction's progress
    callback (or None). Returns what the compaction did, and how many requests are pending.
    """
    with Frontier(path) as frontier, progress() as report:
        return frontier.compact(report), len(frontier)


def _after_fork_in_child() -> None:
    """A forked child may not use its parent's frontiers (``JobDirNotOwned``), and must not
    disturb them: fresh locks (a copy of one another thread held would never be released),
    and queue files that write nowhere."""
    for frontier in list(_OPEN):
        frontier._upkeep.forget()
        frontier._mutex = threading.RLock()
        frontier._cond = threading.Condition(frontier._mutex)
        frontier._state.waiters = 0
        queues = getattr(frontier._state, "queues", None)
        if queues is not None and not frontier._closed:
            with contextlib.suppress(OSError):
                queues.disown()


os.register_at_fork(after_in_child=_after_fork_in_child)
