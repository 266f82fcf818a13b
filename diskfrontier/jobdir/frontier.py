"""``Frontier``: the crash-safe crawl frontier, a façade over the job directory's parts.

It checks the arguments (``contract/checks.py``), holds the lock, refuses calls once the
frontier is closed or cannot go on, wakes waiting pops and delegates: the writes to the
journal (``ledger.py``), the pop side (``dispatch.py``), waiting pops (``waiting.py``), host
settings (``hostrules.py``), opening (``opening.py``), the close (``closing.py``), the
background checkpoints and compactions (``upkeep.py``) and ``status.json`` (``publish.py``).
What each record means and how a crash is recovered from: ``docs/format.md`` and
``docs/design.md``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import weakref
from collections.abc import Iterable
from typing import Any

from ..contract import checks
from ..contract.outcomes import Outcome, tally
from ..contract.values import Dropped, FailedRequest, RobotsEntry
from ..politeness.schedule import HostInfo
from ..request.model import Request
from . import commands, steering
from .closing import Closing
from .dispatch import Dispatch
from .guard import Guard
from .hostmeta import HostHealth, RobotsStore
from .hostrules import HostRules
from .journal import REFETCH, RETRY, cap_error
from .layout import Layout
from .ledger import Ledger
from .maintenance.compaction import Compacted
from .opening import Opening, check_settings
from .outcomefile import OutcomeFile
from .publish import StatusPublisher
from .replay import Progress
from .seenindex import key_of
from .shared import Shared
from .swap import Swap
from .upkeep import Maintenance, Upkeep
from .waiting import Waiting
from .watcher import Watcher

DEFAULT_MAINTENANCE = Maintenance()

log = logging.getLogger("diskfrontier")
_OPEN: weakref.WeakSet[Frontier] = weakref.WeakSet()  # for the fork hooks below


class Frontier:
    """A crawl frontier kept in a job directory, safe across restarts and ``kill -9``.

    Each call does what ``FrontierProtocol`` (the contract) says; its docstring here says how
    the job directory keeps it (the records are described in ``docs/format.md``).

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
        self._state = state = Shared(self.path, self.layout, fsync=fsync, delay=delay, per_host=per_host,
                                     prefer=prefer)
        self._guard = guard = Guard(state)
        self._ledger = Ledger(state)
        self._dispatch = Dispatch(state)
        self._waiting = Waiting(state, self._dispatch, guard)
        self._status = StatusPublisher(state, self._dispatch, guard)
        self._upkeep = Upkeep(state, guard.mutex, maintenance, Swap(state, guard.mutex, self._dispatch))
        self._closing = Closing(state, self._dispatch, self._upkeep.compact_now)
        self._lock = guard.dirlock = Opening(state).open_locked(order, progress, self._closing.release_files)
        self._outcomes = state.outcomes = OutcomeFile(self.path)
        self._commands = commands.Commands(self, state, self._ledger)
        self._rules = HostRules(self._ledger, HostHealth(self.path))  # sidecars: read once the lock is held
        self._robots = RobotsStore(self.path)
        self.order: str = state.order
        self.recovery: str = state.recovery
        guard.closed = False
        _OPEN.add(self)
        self._watcher: Watcher | None = None
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

    # ------------------------------------------------------------------ adding requests
    def push(self, request: Request, *, memory_only: bool = False, not_before: float | None = None) -> bool:
        """``FrontierProtocol.push``: one PUSH record, written before this returns True.

        ``memory_only=True`` keeps it in memory without trying to store it: served in priority
        order in this run, lost at close, outside the host rules and times (so without a
        ``not_before``). A request that cannot be stored is kept the same way, with a warning.
        """
        checks.check_request("push", request)
        if memory_only and (not_before is not None or request.not_before is not None):
            raise ValueError("a request kept in memory only cannot wait for a time: push it without not_before")
        due = 0.0 if not_before is None else checks.check_time("not_before", not_before)
        fingerprint = request.fingerprint  # computed outside the lock: it is the costly part
        key = key_of(fingerprint)
        with self._guard:
            if not self._ledger.push(request, fingerprint, key, due, memory_only):
                return False
            self._waiting.wake()
            return True

    def push_record(self, request: Request, record: bytes) -> bool:
        """``FrontierProtocol.push_record``: dedupe as ``push``, then one journal write."""
        fingerprint = request.fingerprint
        key = key_of(fingerprint)
        with self._guard:
            if not self._ledger.push_record(request, record, fingerprint, key):
                return False
            self._waiting.wake()
            return True

    def push_records(self, pairs: Iterable[tuple[Request, bytes]], *, dedupe: bool = True) -> int:
        """Store already encoded requests as one journal write; return how many were stored.

        ``dedupe=False`` stores every one (still marked seen): for importing another crawl's requests.
        """
        batch = list(pairs)
        with self._guard:
            if dedupe:
                batch = self._ledger.fresh(batch)
            self._ledger.store(batch)
            if batch:
                self._waiting.wake()
            return len(batch)

    def push_many(self, requests: Iterable[Request]) -> int:
        """``FrontierProtocol.push_many`` as one journal write, every request checked before it."""
        batch = list(requests)
        checks.check_requests("push_many", batch)
        for request in batch:
            request.fingerprint  # noqa: B018 - computed outside the lock: it is the costly part
        with self._guard:
            queued = self._ledger.push_many(batch)
            if queued:
                self._waiting.wake()
            return queued

    def has_seen(self, fingerprint: bytes) -> bool:
        """``FrontierProtocol.has_seen``."""
        with self._guard:
            return self._ledger.seen(fingerprint)

    def mark_seen(self, fingerprints: Iterable[bytes]) -> int:
        """``FrontierProtocol.mark_seen``: written to ``requests.seen`` before this returns."""
        batch = checks.check_fingerprints("mark_seen()", fingerprints)
        with self._guard:
            return self._ledger.mark_seen(batch)

    # ------------------------------------------------------------------ handing out and finishing
    def pop(self, timeout: float | None = 0.0) -> Request | None:
        """``FrontierProtocol.pop``; writes nothing (what is in flight is pending in the journal).

        With host rules in force a call pulls at most ``PULL_LIMIT`` (1,024) requests of
        held-back hosts into host buffers; a waiting pop goes on at once.
        """
        if timeout.__class__ is not float or timeout != 0.0:  # the usual pop() is spared the checks
            timeout = None if timeout is None else checks.check_seconds("timeout", timeout)
        with self._guard:
            request = self._dispatch.pop() if self._state.paused_since is None else None
            if request is not None or timeout == 0:
                return request
            return self._waiting.pop(timeout)

    def done(self, request: Request, *, refetch_after: float | None = None) -> None:
        """``FrontierProtocol.done``: one DONE record (with ``refetch_after``, one REFETCH record)."""
        if refetch_after is not None:
            self._requeue(request, "done", REFETCH, checks.check_seconds("refetch_after", refetch_after), 0)
            with self._guard.mutex:
                self._rules.succeeded((request,))
            return
        with self._guard:
            self._ledger.done(request)
            self._rules.succeeded((request,))
            self._waiting.wake()

    def retry(self, request: Request, *, delay: float = 0.0) -> None:
        """``FrontierProtocol.retry``: one RETRY record (a request kept in memory only comes back at once)."""
        self._requeue(request, "retry", RETRY, checks.check_seconds("delay", delay), 1)

    def _requeue(self, request: Request, what: str, kind: int, after: float, more_attempts: int) -> None:
        with self._guard:
            self._ledger.requeue(request, what, kind, after, more_attempts)
            self._waiting.wake()

    def done_many(self, requests: Iterable[Request]) -> None:
        """``FrontierProtocol.done_many`` as one journal write, every request checked before it."""
        batch = list(requests)
        with self._guard:
            if len(batch) == 1:  # the usual call of a scheduler that finishes requests as they come
                self._ledger.done(batch[0])
            else:
                self._ledger.done_many(batch)
            self._rules.succeeded(batch)
            if batch:
                self._waiting.wake()

    def record_outcome(self, *outcomes: Outcome) -> None:
        """``FrontierProtocol.record_outcome``: added in memory, written to ``outcomes.json`` with each
        ``status.json`` and at the close (``outcomefile.py``)."""
        counts = tally(outcomes)
        with self._guard:
            self._outcomes.add(counts)

    def holds(self, request: Request) -> bool:
        """``FrontierProtocol.holds``."""
        with self._guard.mutex:
            return self._dispatch.holds(request)

    # ------------------------------------------------------------------ failed requests
    def fail(self, request: Request, error: str) -> None:
        """``FrontierProtocol.fail``: one FAIL record. A request kept in memory only is counted in
        ``stats()["failed"]`` with no record (``failed()`` cannot list it)."""
        text = cap_error(checks.check_error("fail()", error))
        with self._guard:
            self._ledger.fail(request, text)
            self._waiting.wake()

    def failed(self) -> list[FailedRequest]:
        """``FrontierProtocol.failed``, read from the journal."""
        with self._guard:
            return self._dispatch.failed()

    def requeue_failed(self, limit: int | None = None) -> int:
        """``FrontierProtocol.requeue_failed``: one RETRY record naming each failed request."""
        limit = checks.check_limit("requeue_failed()", limit)
        with self._guard:
            requeued = self._ledger.requeue_failed(limit)
            if requeued:
                self._waiting.wake()
            return requeued

    def record_failed(self, failed: Iterable[FailedRequest]) -> int:
        """``FrontierProtocol.record_failed``: a PUSH and a FAIL record each (what ``fail()`` leaves), in
        one journal write."""
        entries = checks.check_failed("record_failed()", failed)
        prepared = self._ledger.prepare_failed(entries)
        if not prepared:
            return 0
        with self._guard:
            self._ledger.record_failed(entries, prepared)
            return len(entries)

    # ------------------------------------------------------------------ time and hosts
    @property
    def finished(self) -> bool:
        """``FrontierProtocol.finished``."""
        with self._guard.mutex:
            return not self._state.inflight and not any(self._state.pending.values())

    def next_ready(self) -> float | None:
        """``FrontierProtocol.next_ready``."""
        with self._guard:
            if self._state.paused_since is not None:
                return None  # nothing becomes ready by waiting: only resume() hands out again
            return self._dispatch.next_ready()

    # ------------------------------------------------------------------ steering
    def pause(self) -> None:
        """``FrontierProtocol.pause``: a PAUSE record."""
        with self._guard:
            self._ledger.set_paused(True)

    def resume(self) -> None:
        """``FrontierProtocol.resume``: a PAUSE record that ends it."""
        with self._guard:
            if self._ledger.set_paused(False):
                self._guard.cond.notify_all()

    @property
    def paused_since(self) -> float | None:
        """``FrontierProtocol.paused_since``."""
        return self._state.paused_since

    def drop(self, *, host: str | None = None, match: str | None = None, dry_run: bool = False,
             show: int = 0) -> Dropped:
        """``FrontierProtocol.drop``: a DROP record each, found by one scan of the journal."""
        pattern = checks.check_drop(host, match, show, dry_run)
        with self._guard:
            dropped = steering.drop(self._state, Opening(self._state), self._dispatch, host, pattern, dry_run, show)
            return dropped

    # ------------------------------------------------------------------ commands and status for other processes
    def _apply_commands(self) -> int:
        """Apply the commands waiting in the inbox (``commands.py``); return how many."""
        if not self._commands.waiting():
            return 0
        with self._guard:
            applied = self._commands.apply_queued()
            if applied:
                self._guard.cond.notify_all()
            return applied

    def _publish_status(self, *, with_hosts: bool) -> float:
        """Write ``status.json`` (``publish.py``); return the seconds the host list took."""
        return self._status.publish(with_hosts=with_hosts)

    def set_delay(self, host: str, seconds: float | None) -> None:
        """``FrontierProtocol.set_delay``: a HOST record."""
        self._change_host(host, delay=None if seconds is None else checks.check_seconds("seconds", seconds))

    def block(self, host: str, until: float) -> None:
        """``FrontierProtocol.block``: a HOST record."""
        self._change_host(host, blocked_until=checks.check_until("block(): until", until))

    def unblock(self, host: str) -> None:
        """``FrontierProtocol.unblock``: a HOST record."""
        self._change_host(host, blocked_until=0.0)

    def set_budget(self, host: str, budget: int | None) -> None:
        """``FrontierProtocol.set_budget``: a HOST record."""
        self._change_host(host, budget=checks.check_count("set_budget()", "budget", budget, 63, optional=True))

    def _change_host(self, host: str, **changes: object) -> None:
        name = checks.check_host(host)
        with self._guard:
            self._rules.change(name, **changes)
            self._waiting.wake()

    def set_done_count(self, host: str, done: int) -> None:
        """``FrontierProtocol.set_done_count``: a HOST record."""
        name = checks.check_host(host)
        count = checks.check_count("set_done_count()", "done", done, 64)
        with self._guard:
            self._rules.set_done_count(name, count)  # type: ignore[arg-type]
            self._waiting.wake()

    def host_failed(self, host: str, *, block_after: int = 5, backoff: float = 60.0,
                    backoff_max: float = 3600.0) -> float | None:
        """``FrontierProtocol.host_failed``: the count in ``hosts.health`` (replaced whole, fsynced), then
        the block as a HOST record (a kill between the two loses that one block; the next failure sets it)."""
        name = checks.check_host(host)
        block_after, backoff, backoff_max = checks.check_host_failed(block_after, backoff, backoff_max)
        with self._guard:
            return self._rules.failed(name, block_after, backoff, backoff_max)

    def robots(self, host: str) -> RobotsEntry | None:
        """``FrontierProtocol.robots``, kept in ``robots/``."""
        name = checks.check_host(host)
        with self._guard:
            return self._robots.get(name)

    def set_robots(self, host: str, entry: RobotsEntry) -> None:
        """``FrontierProtocol.set_robots``: one file of ``robots/``, replaced whole and fsynced."""
        name = checks.check_host(host)
        checked = checks.check_robots(entry)
        with self._guard:
            self._robots.put(name, checked)

    def hosts(self) -> list[HostInfo]:
        """``FrontierProtocol.hosts``."""
        with self._guard:
            return self._rules.health.annotate(self._dispatch.host_infos(), self._state.hosts.delay)

    def host(self, name: str) -> HostInfo | None:
        """``FrontierProtocol.host``, found without listing the others."""
        name = checks.check_host(name)
        with self._guard:
            return self._rules.health.annotate_one(name, self._dispatch.host_info(name), self._state.hosts.delay)

    # ------------------------------------------------------------------ counts
    def __len__(self) -> int:
        """Requests waiting to be popped (in flight and failed ones not counted)."""
        with self._guard.mutex:
            return sum(self._state.pending.values())

    @property
    def in_flight(self) -> list[Request]:
        """The requests popped and not yet done."""
        with self._guard.mutex:
            return list(self._state.inflight.values())

    def stats(self) -> dict[str, Any]:
        """Counters of this run and the state of the frontier.

        ``failed``: the failed requests not requeued (those ``failed()`` lists, kept across runs), plus
        the requests kept in memory only that failed in this run.
        """
        with self._guard.mutex:
            return {**self._state.stats(journal_open=not self._guard.closed), **self._upkeep.stats()}

    # ------------------------------------------------------------------ compaction and closing
    def checkpoint(self) -> dict[str, Any]:
        """Save the journal's state now (the background does it every so often): a recovery, ``inspect``
        and ``peek`` then read only what is written after it. Other threads' calls go on meanwhile;
        returns ``{"ok": True, "pending": ..., "seconds": ...}``."""
        self._guard.check_now()
        return self._upkeep.run_now("checkpoint")

    def compact(self, progress: Progress | None = None) -> Compacted:
        """Rewrite the journal to hold only what is live (pending and failed requests, host settings), now
        (the background does it by itself, ``maintenance``). Other threads' calls go on meanwhile,
        requests in flight included; ``progress(done, total)`` is called as it goes."""
        self._guard.check_now()
        return self._closing.compact(progress)

    def close(self) -> None:
        """Checkpoint: re-queue what is in flight, write the queue headers and the cursor, unlock.

        In a process that did not open the frontier (a forked child), only this process's file
        descriptors are closed: nothing is written and the lock stays with its owner."""
        guard = self._guard
        if not guard.closed and not self._lock.owned():  # a forked child: nothing of the parent's is touched
            guard.closed = True
            self._closing.forget_files()
            self._lock.release()
            return
        watcher, self._watcher = getattr(self, "_watcher", None), None
        if watcher is not None:
            watcher.stop()  # outside the lock: it may be waiting for it
        upkeep = getattr(self, "_upkeep", None)
        if upkeep is not None:
            upkeep.stop()  # a checkpoint or compaction under way: stopped, its files removed
        with guard.mutex:
            if guard.closed:
                return
            self._commands.apply_at_close()
            self._closing.leave()
            guard.closed = True
            _OPEN.discard(self)
            guard.cond.notify_all()  # waiting pop()s raise FrontierClosed
            try:
                self._closing.close()
            finally:
                self._lock.release()

    def _after_fork(self) -> None:
        """In a forked child: this frontier may not be used (``JobDirNotOwned``) and must not disturb the
        parent's: fresh locks (a copy of one another thread held would never be released), and queue
        files that write nowhere."""
        self._upkeep.forget()
        self._guard.renew()
        self._waiting.waiters = 0
        queues = getattr(self._state, "queues", None)
        if queues is not None and not self._guard.closed:
            with contextlib.suppress(OSError):
                queues.disown()

    def __enter__(self) -> Frontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        # without the lock: a repr must never wait, and the counts are only indicative
        pending = sum(list(self._state.pending.values()))
        state = "closed" if self._guard.closed else f"{pending} pending, {len(self._state.inflight)} in flight"
        return f"<Frontier {self.path} ({state})>"


def _after_fork_in_child() -> None:
    for frontier in list(_OPEN):
        frontier._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
