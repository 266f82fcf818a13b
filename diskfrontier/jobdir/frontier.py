"""``Frontier``: the crash-safe crawl frontier, composed of the job directory's parts.

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
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
import weakref
from array import array
from collections.abc import Iterable, Iterator
from typing import Any, cast

from queuelib import PriorityQueue
from queuelib.queue import FifoMemoryQueue, LifoMemoryQueue

from ..errors import FrontierClosed, FrontierError, JobDirCorrupt, NotInFlight, ScrapyQueueFound
from ..failures import FailedRequest
from ..files.atomic import fsync_path
from ..files.safefs import check_entries, open_file, remove_stale_temps
from ..files.writeerrors import raise_named
from ..politeness.delayed import DelayedRequests
from ..politeness.schedule import Host, HostInfo, HostSchedule, buffer_top
from ..request.codec import Unencodable, encode_request
from ..request.model import PRIORITY_MAX, Request, check_slot
from ..scrapyfiles.queue import holds_requests, set_aside
from . import checkpoint, records
from .hostfile import HostFileUnusable, load_host_state, save_host_state
from .identity import foreign_meta, foreign_meta_problem
from .journal import (
    FRAME,
    MAGIC,
    MAGIC_CRC,
    MAX_ATTEMPTS,
    MAX_SECONDS,
    MAX_TIME,
    REFETCH,
    RETRY,
    JournalWriter,
    cap_error,
    done_body,
    done_frame,
    fail_body,
    frame,
    frame_all,
    host_body,
)
from .layout import FORMAT_VERSION, Layout, Lock, read_meta, salt_of, write_meta
from .maintenance.compaction import Compacted, install, write_compacted
from .maintenance.upgrade import upgrade_journal
from .queues import OffsetQueues, distrust_reason, queue_crc
from .recovery import rebuild, save_torn_tail
from .replay import Progress
from .seen import SeenFile
from .seenindex import key_of

log = logging.getLogger("diskfrontier")
_OPEN: weakref.WeakSet[Frontier] = weakref.WeakSet()  # for the fork hooks below

AUTO_COMPACT_MIN_BYTES = 1 << 20
AUTO_COMPACT_MAX_BYTES = 16 << 20  # larger journals take seconds: left to 'diskfrontier compact', and said so
INDEX_MIN_NEW_KEYS = 1 << 16  # a clean close saves the seen index when this many keys are not in the saved one
_HEADER = FRAME.size
_PRIORITY_TOP = PRIORITY_MAX  # a host buffer's key part for a priority p is _PRIORITY_TOP - p
_PULL_FOR_IDLE = 1024  # requests a pop may pull looking for a host with nothing in flight (prefer="idle")
_HELD_LOOK = 256  # requests waiting for a time whose hosts are looked at by next_ready()
_REQUEUE_BATCH = 1024  # RETRY records per journal write in requeue_failed
_NAN = float("nan")


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
    ) -> None:
        delay = _check_seconds("delay", delay)
        if prefer not in ("priority", "idle"):
            raise ValueError(f"prefer must be 'priority' or 'idle', got {prefer!r}")
        if per_host is not None and (isinstance(per_host, bool) or not isinstance(per_host, int) or per_host < 1):
            raise ValueError(f"per_host must be None or a whole number of at least 1, got {per_host!r}")
        if order not in (None, "lifo", "fifo"):
            raise ValueError(f"order must be 'lifo' or 'fifo', got {order!r}")
        if not isinstance(fsync, bool):
            raise TypeError(f"fsync must be True or False, got {fsync!r}")
        self.path = os.fspath(path)
        self.layout = Layout(self.path)
        self.fsync = fsync
        self._closed = True
        self._mutex = threading.RLock()  # re-entrant: a compact() progress callback may read stats()
        self._cond = threading.Condition(self._mutex)
        self._waiters = 0  # threads waiting in pop(timeout=...)
        self._delay, self._per_host, self._prefer = delay, per_host, prefer
        self._hosts = HostSchedule("lifo", delay, per_host, prefer)
        self._delayed = DelayedRequests()
        self._delayed_due: float | None = None  # the earliest due time held back, when any is
        self._pulled: tuple[int, bytes | memoryview] | None = None  # the last record read to learn its host
        self._peeked: tuple[int, int] | None = None  # (offset, host id) of the queues' top, read by _fill
        self._compacting = False
        self._counters = dict.fromkeys(
            ("pushed", "duplicates", "popped", "done", "unserializable", "memory_lost",
             "recovered", "requeued", "torn_bytes_cut", "seen_added_from_journal", "retried", "refetch_scheduled"), 0)
        self._inflight: dict[int, Request] = {}
        self._failed: dict[int, int] = {}  # failed request offset -> its FAIL record's offset, in FAIL order
        self._memory_failed = 0  # requests kept in memory only that failed in this run (no record)
        self._pending: dict[int, int] = {}
        self._memory_seq = 0
        self._records = {"pushes": 0, "dones": 0}  # records in the journal since its last compaction
        self._last_record = -1
        self._live_bytes = 0  # bytes of the pending PUSH records (in flight included): what compaction keeps
        self._memory_seen: set[bytes] = set()
        self._warned_unserializable = False
        self._floor_crc: int | None = None  # the crc32 of the journal below the floor, when known
        self._dirty: str | None = None  # why the queues may not match the journal any more
        self._broken: str | None = None  # why no further call can be served
        self.recovery = "new"
        os.makedirs(self.path, exist_ok=True)
        check_entries(self.path, self.layout.entries())
        self._lock = Lock(self.layout.lock)
        self._lock.acquire()
        try:
            self._open(order, progress)
        except BaseException:
            self._release_files()
            self._lock.release()
            raise
        self._closed = False
        _OPEN.add(self)

    # ------------------------------------------------------------------ opening
    def _open(self, order: str | None, progress: Progress | None) -> None:
        layout = self.layout
        started = time.perf_counter()
        remove_stale_temps(layout.cursor)
        remove_stale_temps(layout.meta)
        remove_stale_temps(layout.seen_index)
        remove_stale_temps(layout.hosts)
        if os.path.exists(layout.meta):
            meta = read_meta(layout)
            if order is not None and order != meta["order"]:
                raise ValueError(
                    f"{self.path} was created with order={meta['order']!r}; it cannot be reopened "
                    f"with order={order!r} (the order is fixed when the directory is created)"
                )
            if not os.path.exists(layout.journal):
                raise JobDirCorrupt(layout.journal, 0, "the journal is missing, so pending requests cannot be read")
            if meta["version"] < FORMAT_VERSION:
                upgrade_journal(layout, progress)
                meta = read_meta(layout)
            named = foreign_meta(layout, meta["id"])
            if named is not None:
                problem, advice = foreign_meta_problem(meta["id"], named)
                raise JobDirCorrupt(layout.meta, 0, problem, hint=advice)
            fresh = False
        else:
            if _just_created(layout.journal):
                os.unlink(layout.journal)  # a creation killed before frontier.json was written
            if os.path.lexists(layout.journal):
                named = checkpoint.named_id(layout.cursor) or "<the id its requests.cursor names>"
                raise JobDirCorrupt(layout.meta, 0, "missing, but the directory has a journal (requests.urls)",
                                    hint='restore frontier.json from a backup, or write it anew as {"format": '
                                         f'"diskfrontier", "version": 4, "order": "lifo", "id": "{named}"}} '
                                         '(or "fifo")')
            self._set_aside_foreign_queue()
            JournalWriter.create(layout.journal)
            meta = write_meta(layout, order or "lifo")
            fresh = True
        self.order: str = meta["order"]
        self._ident: str = meta["id"]
        self._salt = salt_of(meta)
        self._hosts = HostSchedule(self.order, self._delay, self._per_host, self._prefer)
        if os.path.lexists(layout.compacting):
            os.unlink(layout.compacting)  # a compaction killed before its rename: the old journal stands
        saved = checkpoint.read_checkpoint(layout.cursor, self._ident)
        self._floor = saved.floor
        checkpoint.write_open(layout.cursor, self._ident, saved.floor, saved.seen_tail, saved.seen_index,
                              saved.journal_crc)
        self._floor_crc = saved.journal_crc
        self._seen = SeenFile(layout.seen, self._salt)
        loaded = self._seen.open(require_sums=not fresh, tail=saved.seen_tail, index=saved.seen_index)
        if loaded.torn:
            log.warning("cut %d bytes of torn tail from %s", loaded.torn, layout.seen)
        if loaded.legacy_hex:
            log.warning("converted %s from hex lines (Scrapy < 2.19) to the binary format", layout.seen)
        memory_queue = LifoMemoryQueue if self.order == "lifo" else FifoMemoryQueue
        self._memq = PriorityQueue(cast(Any, lambda _key: memory_queue()))
        reason = None if fresh else self._distrust_reason(saved)
        if fresh or reason is None:
            self._open_trusted(saved)
        else:
            self._rebuild(reason, progress)
        self._counters["torn_bytes_cut"] += loaded.torn
        self._seen.flush()
        checkpoint.write_open(layout.cursor, self._ident, self._journal.size, self._seen.tail(),
                              self._seen.index_record, self._journal.crc)
        self._floor, self._floor_crc = self._journal.size, self._journal.crc
        self._hosts.active = self._hosts.active or bool(self._hosts.hot)  # a host with a setting
        self._delayed_due = self._delayed.next_due()
        if not fresh:
            self._log_resume(time.perf_counter() - started)

    def _set_aside_foreign_queue(self) -> None:
        """A Scrapy JOBDIR's queue: an empty one is set aside; one with requests needs ``adopt-scrapy``."""
        if os.path.isdir(self.layout.queue_dir) and os.listdir(self.layout.queue_dir):
            if holds_requests(self.layout.queue_dir):
                raise ScrapyQueueFound(self.path)
            aside = set_aside(self.layout.queue_dir)
            log.info("moved the empty queue folder %s of a finished Scrapy crawl to %s", self.layout.queue_dir, aside)

    def _distrust_reason(self, saved: checkpoint.Checkpoint) -> str | None:
        """Why the queue files cannot be used as they are, or None if they can."""
        distrust = distrust_reason(self.layout, saved, self._seen.end, self._salt)
        return None if distrust is None else f"{distrust[0]}: {distrust[1]}"

    def _open_trusted(self, saved: checkpoint.Checkpoint) -> None:
        size = os.path.getsize(self.layout.journal)
        crc = MAGIC_CRC if size == len(MAGIC) else saved.journal_crc if saved.clean else None
        self._journal = JournalWriter(self.layout.journal, size, salt=self._salt, fsync=self.fsync, crc=crc)
        try:
            self._queues = OffsetQueues(self.layout.queue_dir, self.order, saved.queues)
        except JobDirCorrupt as exc:
            self._rebuild(str(exc), None)
            return
        try:
            if saved.clean and saved.hosts_file is None:
                raise HostFileUnusable("the clean checkpoint names no requests.hosts")
            host_state = load_host_state(self.layout.hosts, saved.hosts_file) if saved.hosts_file else None
            if host_state is not None and host_state.failed and next(reversed(host_state.failed.values())) >= size:
                raise HostFileUnusable(f"{self.layout.hosts} names a FAIL record past the end of the journal")
        except HostFileUnusable as exc:
            self._queues.close()
            self._rebuild(str(exc), None)
            return
        sizes = self._queues.sizes()
        if host_state is not None:
            for priority, count in host_state.delayed.by_priority.items():
                sizes[priority] = sizes.get(priority, 0) + count
        if sizes != saved.pending:
            self._queues.close()
            self._rebuild(f"queue sizes {sizes} do not match the checkpoint {saved.pending}", None)
            return
        if host_state is not None:
            self._delayed = host_state.delayed
            self._hosts.counts = host_state.counts
            self._failed = host_state.failed
            for hid, delay, blocked_until, budget in host_state.settings:
                host = self._hosts.host(hid)
                host.delay, host.blocked_until, host.budget = delay, blocked_until, budget
        self._pending = dict(sizes)
        self._records = {"pushes": saved.journal_pushes, "dones": saved.journal_dones}
        self._last_record = saved.last_record
        self._live_bytes = saved.live_bytes
        self.recovery = "clean" if saved.clean else "new"

    def _rebuild(self, reason: str, progress: Progress | None) -> None:
        log.info("rebuilding the queues of %s from its journal: %s", self.path, reason)
        if getattr(self, "_journal", None) is not None:
            self._journal.close()
        OffsetQueues.wipe(self.layout.queue_dir)
        self._queues = OffsetQueues(self.layout.queue_dir, self.order)
        state, added = rebuild(self.layout.journal, self._queues, self._seen, salt=self._salt, floor=self._floor,
                               floor_crc=self._floor_crc, progress=progress, now=time.time())
        self._live_bytes = state.live_bytes
        self._failed = state.failed
        self._delayed = DelayedRequests()
        for offset, priority, due in state.delayed:
            self._delayed.add(due, offset, priority)
        self._hosts = HostSchedule(self.order, self._delay, self._per_host, self._prefer)
        counts = self._hosts.counts
        for index, raw in enumerate(state.host_names):
            hid = counts.add(raw)
            counts.pending[hid], counts.done[hid] = state.host_pending.get(index, 0), state.host_done[index]
            record = state.host_settings.get(index)
            if record is not None:
                host = self._hosts.host(hid)
                host.delay = None if record.delay != record.delay else record.delay  # NaN: the default
                host.blocked_until = record.blocked_until
                host.budget = None if record.budget < 0 else record.budget
                self._hosts.cool(host, 0.0)  # a host whose settings were all undone
        torn = state.scan.torn
        if torn:
            aside = save_torn_tail(self.layout.journal, state.scan.end)
            log.warning("cut %d bytes of torn tail from %s (kept in %s)", torn, self.layout.journal, aside)
            self._counters["torn_bytes_cut"] += torn
        self._journal = JournalWriter(self.layout.journal, state.scan.end, salt=self._salt, fsync=self.fsync,
                                      crc=state.end_crc)
        self._pending = dict(state.counts)
        self._records = {"pushes": state.pushes, "dones": state.dones}
        self._last_record = state.last_record
        self._counters["recovered"] = state.pending_count
        self._counters["seen_added_from_journal"] = added
        self.recovery = "rebuilt"

    def _log_resume(self, elapsed: float) -> None:
        pending = sum(self._pending.values())
        torn = self._counters["torn_bytes_cut"]
        tail = f", {torn:,} bytes of torn tail cut" if torn else ""
        if self.recovery == "rebuilt":
            log.warning(
                "recovered %s after an unclean stop: %s pending (requests in flight at the stop included)%s, "
                "%s seen, in %.2fs", self.path, f"{pending:,}", tail, f"{len(self._seen):,}", elapsed)
        else:
            log.info("resumed %s: %s pending, %s seen%s", self.path, f"{pending:,}", f"{len(self._seen):,}", tail)

    # ------------------------------------------------------------------ guarding every call
    def _interrupted(self, what: str, exc: BaseException) -> None:
        """An exception after a journal write, half-way through the bookkeeping: mark the frontier dirty."""
        if self._dirty is None:
            self._dirty = f"{type(exc).__name__} during {what}"
            log.warning("%s was interrupted during %s (%s: %s): its queues will be rebuilt from the journal at "
                        "the next open", self.path, what, type(exc).__name__, exc)

    # ------------------------------------------------------------------ the API
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
            if not request.dont_filter and (key in self._seen.index or fingerprint in self._memory_seen):
                self._counters["duplicates"] += 1
                return False
            if memory_only:
                self._push_memory(request, None)
                return True
            try:
                record = encode_request(request)
            except Unencodable as exc:
                kept = "" if not due and request.not_before is None else "; its not_before is not kept"
                self._push_memory(request, f"{exc}{kept}")
                return True
            self._store_one(request, record, key, due)
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
            if self._is_duplicate(request, fingerprint, key):
                return False
            self._store_one(request, record, key)
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
                batch = self._fresh(batch)
            self._store(batch)
            return len(batch)

    def _is_duplicate(self, request: Request, fingerprint: bytes, key: int) -> bool:
        if not request.dont_filter and (key in self._seen.index or fingerprint in self._memory_seen):
            self._counters["duplicates"] += 1
            return True
        return False

    def _fresh(self, batch: list[tuple[Request, Any]]) -> list[tuple[Request, Any]]:
        """The requests of ``batch`` that are neither seen nor repeated within it."""
        index, memory_seen = self._seen.index, self._memory_seen
        fresh: set[int] = set()
        out = []
        for pair in batch:
            request = pair[0]
            if not request.dont_filter:
                fingerprint = request.fingerprint
                key = key_of(fingerprint)
                if key in index or key in fresh or fingerprint in memory_seen:
                    self._counters["duplicates"] += 1
                    continue
                fresh.add(key)
            out.append(pair)
        return out

    def has_seen(self, fingerprint: bytes) -> bool:
        """True if a request with this fingerprint was accepted, in this or an earlier run."""
        with self._mutex:
            self._check_open()
            return key_of(fingerprint) in self._seen.index or fingerprint in self._memory_seen

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
            added = sum(self._seen.add(fingerprint) for fingerprint in batch)
            if self.fsync:
                self._seen.sync()
            else:
                self._seen.flush()
            return added

    def _store_one(self, request: Request, record: bytes, key: int, due: float = 0.0) -> None:
        """Append the PUSH record of one accepted request, then index it."""
        priority = request.priority
        slot = request.slot.encode()
        journal = self._journal
        offset = journal.size
        if request.not_before is not None:
            due = max(due, _check_time("Request.not_before", request.not_before))
        if (due and due > time.time()) or request.attempts:
            due = due if due > time.time() else 0.0
            attempts = _attempts(request.attempts)
        else:
            due, attempts = 0.0, 0
        framed = records.framed(offset, request, slot, record, self._salt, attempts=attempts, not_before=due)
        journal.write(framed)
        try:  # the write went through; from here an exception must leave the frontier marked dirty
            if not request.dont_filter:
                self._seen.add(request.fingerprint, key)
            hid = self._hosts.counts.add(slot)
            if due:
                self._hold(due, offset, priority)
            else:
                self._enqueue(offset, priority, hid)
            pending = self._pending
            pending[priority] = pending.get(priority, 0) + 1
            self._hosts.counts.pending[hid] += 1
            self._counters["pushed"] += 1
            self._records["pushes"] += 1
            self._live_bytes += len(framed)
            self._last_record = offset
        except BaseException as exc:
            self._interrupted("push", exc)
            raise
        if self._waiters:
            self._cond.notify_all()

    def _enqueue(self, offset: int, priority: int, hid: int) -> None:
        """Queue a request pushed or given back now. LIFO: a host with buffered requests takes it
        into its buffer, where it comes before them as it would in a LIFO queue (in the queues it
        would wait behind them)."""
        hosts = self._hosts
        if hosts.hot and hosts.lifo:
            host = hosts.hot.get(hid)
            if host is not None and host.buffer:
                hosts.buffer(host, priority, offset, time.time())
                return
        self._queues.push(offset, priority)

    def _hold(self, due: float, offset: int, priority: int) -> None:
        """Keep the request at ``offset`` out of the queues until ``due``."""
        self._delayed.add(due, offset, priority)
        if self._delayed_due is None or due < self._delayed_due:
            self._delayed_due = due

    def _store(self, accepted: list[tuple[Request, bytes]]) -> None:
        """Append PUSH records for accepted requests in one journal write, then index them."""
        if not accepted:
            return
        offsets = []
        frames = []
        offset = self._journal.size
        now = time.time()
        held: dict[int, float] = {}  # offset -> due, for requests with a not_before still ahead
        salt = self._salt
        for request, record in accepted:
            due = request.not_before
            if due is None and not request.attempts:
                framed = records.framed(offset, request, request.slot.encode(), record, salt)
            else:
                due = _check_time("Request.not_before", due) if due is not None and due > now else 0.0
                if due:
                    held[offset] = due
                framed = records.framed(offset, request, request.slot.encode(), record, salt,
                                        attempts=_attempts(request.attempts), not_before=due)
            frames.append(framed)
            offsets.append(offset)
            offset += len(framed)
        self._journal.write(b"".join(frames))  # a failure here is cut back: nothing has changed
        try:
            seen_add = self._seen.add
            groups: dict[int, list[int]] = {}  # offsets per priority, in push order
            hosts = self._hosts
            counts = hosts.counts
            add_host, host_pending = counts.add, counts.pending
            buffering = hosts.lifo and hosts.hot  # see _enqueue
            for (request, _), at in zip(accepted, offsets, strict=True):
                if not request.dont_filter:
                    seen_add(request.fingerprint)
                hid = add_host(request.slot.encode())
                host_pending[hid] += 1
                if held and at in held:
                    self._hold(held[at], at, request.priority)
                    self._count_pending(request.priority, 1)
                    continue
                if buffering and (host := hosts.hot.get(hid)) is not None and host.buffer:
                    hosts.buffer(host, request.priority, at, now)
                    self._count_pending(request.priority, 1)
                    continue
                group = groups.get(request.priority)
                if group is None:
                    group = groups[request.priority] = []
                group.append(at)
            for priority, group in groups.items():
                self._queues.push_many(group, priority)
                self._count_pending(priority, len(group))
            self._counters["pushed"] += len(accepted)
            self._records["pushes"] += len(accepted)
            self._live_bytes += offset - offsets[0]
            self._last_record = offsets[-1]
        except BaseException as exc:
            self._interrupted("push_many", exc)
            raise
        if self._waiters:
            self._cond.notify_all()

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
            stored: list[tuple[Request, bytes]] = []
            memory: list[tuple[Request, str]] = []
            counted = self._counters["duplicates"]
            try:
                for request, _ in self._fresh([(r, None) for r in batch]):
                    try:
                        stored.append((request, encode_request(request)))
                    except Unencodable as exc:
                        kept = "" if request.not_before is None else "; its not_before is not kept"
                        memory.append((request, f"{exc}{kept}"))
            except BaseException:
                self._counters["duplicates"] = counted  # nothing was pushed
                raise
            self._store(stored)
            for request, reason in memory:
                self._push_memory(request, reason)
            return len(stored) + len(memory)

    def _push_memory(self, request: Request, reason: str | None) -> None:
        # The fingerprint is kept out of requests.seen: after a restart this request is
        # gone, and a later push of it must be accepted, not rejected as a duplicate.
        if not request.dont_filter:
            self._memory_seen.add(request.fingerprint)
        self._memq.push(request, -request.priority)
        self._count_pending(request.priority, 1)
        self._hosts.counts.pending[self._hosts.hid(request.slot)] += 1
        if self._waiters:
            self._cond.notify_all()
        self._counters["unserializable"] += 1
        self._counters["pushed"] += 1
        if reason is not None and not self._warned_unserializable:
            self._warned_unserializable = True
            log.warning(
                "%r cannot be stored on disk (%s): it is kept in memory for this run only and will be "
                "lost if the crawl stops before it is done; further such requests are only counted "
                "(stats()['unserializable'])", request, reason)

    def pop(self, timeout: float | None = 0.0) -> Request | None:
        """The next request, now in flight until ``done`` (or ``retry``); None if none is ready.

        The highest-priority request among ready hosts (ties: the host ready longest);
        within a host, priority then LIFO/FIFO. ``timeout=0`` does not wait; ``timeout=t``
        waits up to t seconds for a request to become ready; ``timeout=None`` waits until
        one is, and returns None once the crawl is ``finished`` or when nothing could ever
        become ready without another call (nothing in flight, nothing waiting for a time:
        only hosts blocked for ever or over their budget are left).
        """
        if timeout.__class__ is not float or timeout != 0.0:  # the usual pop() is spared the checks
            timeout = None if timeout is None else _check_seconds("timeout", timeout)
        with self._mutex:
            self._check_open()
            request = self._pop_now()
            if request is not None or timeout == 0:
                return request
            return self._pop_wait(timeout)

    def _pop_wait(self, timeout: float | None) -> Request | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wake = self._next_event()
            if timeout is None and wake is None and not self._inflight:
                return None  # finished, or stalled: nothing can become ready by waiting
            wait = None if wake is None else max(0.0, wake - time.time()) + 0.001
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                wait = left if wait is None else min(wait, left)
            self._waiters += 1
            try:
                self._cond.wait(None if wait is None else min(wait, 3600.0))  # woken again to look
            finally:
                self._waiters -= 1
            self._check_open()
            request = self._pop_now()
            if request is not None:
                return request

    def _next_event(self) -> float | None:
        """The earliest time something held back by time becomes ready, or None."""
        due = self._delayed_due
        if due is not None and self._hosts.hot:
            due = self._next_due_not_held()
        wake = self._hosts.next_wake() if self._hosts.active else None
        if due is None:
            return wake
        return due if wake is None else min(due, wake)

    def _pop_now(self) -> Request | None:
        due = self._delayed_due
        if due is not None or self._hosts.active:
            now = time.time()
            if due is not None and now >= due:
                self._release_due(now)
            if self._hosts.active:
                return self._pop_polite(now)
        else:
            now = time.time()  # kept as the host's last hand-out: a delay set later counts from it
        disk_top = self._queues.pq.curprio  # -priority, as queuelib keys it
        memory_top = self._memq.curprio
        if disk_top is None and memory_top is None:
            return None
        try:  # a queue entry taken and not handed out: the frontier must be rebuilt
            if memory_top is not None and (disk_top is None or memory_top < disk_top):
                request = self._pop_memory()
            else:
                offset = self._queues.pop()
                assert offset is not None
                request = self._load(offset)
            self._hand_out(request, now)
        except BaseException as exc:
            self._interrupted("pop", exc)
            raise
        return request

    def _next_due_not_held(self) -> float | None:
        """The earliest due time of a request waiting for a time whose host waiting alone can
        free (not blocked for ever, not at its budget with nothing in flight); None if there is
        none. Past ``_HELD_LOOK`` requests of held hosts, the next one's time is given (a waiter
        wakes then, lets them into their hosts' buffers and looks again)."""
        hosts, journal = self._hosts, self._journal
        for looked, (offset, _priority, due) in enumerate(self._delayed.first(_HELD_LOOK + 1)):
            if looked == _HELD_LOOK:
                return due
            host = hosts.hot.get(hosts.counts.find(records.slot_of(journal.read_body(offset))))
            if host is None or not hosts.held_for_ever(host):
                return due
        return None

    def _pop_memory(self) -> Request:
        request = self._memq.pop()
        assert request is not None
        self._memory_seq -= 1
        request._seq = self._memory_seq
        return request

    def _hand_out(self, request: Request, now: float) -> None:
        self._inflight[request._seq] = request  # type: ignore[index]  # set by every path here
        pending = self._pending
        left = pending[request.priority] - 1
        if left:
            pending[request.priority] = left
        else:
            del pending[request.priority]
        self._counters["popped"] += 1
        hid = request._hid
        hosts = self._hosts
        if hid < 0:  # a request kept in memory
            hid = request._hid = hosts.hid(request.slot)
        if hosts.active:
            hosts.handed_out(hid, now)
        else:  # the counts alone, inline: this is every pop
            counts = hosts.counts
            counts.pending[hid] -= 1
            counts.inflight[hid] += 1
            counts.last[hid] = now

    def _release_due(self, now: float) -> None:
        """Move the requests whose time has come from the delayed arrays into their hosts' buffers.

        Into the buffers, not the queues: a buffer keeps a host's requests in journal order,
        which is where a rebuild after a crash puts a request that waited (a LIFO or FIFO
        queue could only take it on top or at the back). So the host rules are on from the
        first request that waited for a time.
        """
        hosts, journal = self._hosts, self._journal
        hosts.active = True
        try:
            for offset, priority, _due in self._delayed.release(now):
                hosts.buffer(hosts.host(hosts.counts.add(records.slot_of(journal.read_body(offset)))), priority, offset,
                             now, waited=True)
        except BaseException as exc:
            self._interrupted("pop", exc)
            raise
        finally:
            self._delayed_due = self._delayed.next_due()

    def _pop_polite(self, now: float) -> Request | None:
        """``pop`` when host rules may hold requests back: the best request of a ready host."""
        hosts = self._hosts
        try:
            hosts.wake(now)
            self._fill(now)
            best = hosts.best()
            memory_top = self._memq.curprio
            if memory_top is not None and (best is None or -memory_top >= _PRIORITY_TOP - hosts.ready[0][1]):
                request = self._pop_memory()  # kept in memory only: not held back by host rules
            elif best is None:
                return None
            else:
                _priority, offset = hosts.take(best)
                pulled = self._pulled
                request = self._load(offset, pulled[1] if pulled is not None and pulled[0] == offset else None)
            self._pulled = None
            self._hand_out(request, now)
        except BaseException as exc:
            self._interrupted("pop", exc)
            raise
        return request

    def _fill(self, now: float) -> None:
        """Pull requests from the priority queues into their hosts' buffers while the queues may
        hold something better than the best ready host's request."""
        hosts, queues, journal = self._hosts, self._queues, self._journal
        pq = queues.pq
        top = _PRIORITY_TOP
        idle_first = hosts.idle_first
        pulled = 0
        while pq.curprio is not None:
            best = hosts.best()
            body = None
            if best is not None:
                rank, key = hosts.ready[0][0], hosts.ready[0][1]
                if top + pq.curprio >= key and (rank == 0 or pulled >= _PULL_FOR_IDLE):
                    body = self._same_host_first(best, top + pq.curprio == key)
                    if body is None:
                        return  # with prefer="idle", a while longer for a host with nothing in flight
            pulled += idle_first
            priority = -pq.curprio
            offset = queues.pop()
            assert offset is not None
            if body is None:
                body = journal.read_body(offset)
            hosts.buffer(hosts.host(hosts.counts.add(records.slot_of(body))), priority, offset, now)
            self._pulled = (offset, body)

    def _same_host_first(self, best: Host, same_priority: bool) -> bytes | memoryview | None:
        """The body of the queues' next request if it is ``best``'s own and comes before the
        request that waited for a time that ``best`` would hand out (same priority, earlier in
        journal order: LIFO, pushed after it; FIFO, before it); else None.

        So within a host the order stays priority, then LIFO/FIFO, as a rebuild from the journal
        gives it. (A request of the host further down the queues, behind other hosts', is not
        looked for.)"""
        hosts = self._hosts
        if not same_priority or not hosts.waited:
            return None
        assert best.buffer
        top = buffer_top(best.buffer)
        if top not in hosts.waited:
            return None  # pulled from the queues, or pushed while the host had a buffer: nothing of
            # its host at this priority in the queues comes before it
        offset, curprio = self._queues.peek(), self._queues.pq.curprio
        assert offset is not None and curprio is not None
        if hosts.key(-curprio, offset) > top:
            return None
        peeked = self._peeked
        if peeked is not None and peeked[0] == offset and peeked[1] != best.hid:
            return None  # read before: another host's
        body = self._journal.read_body(offset)
        hid = hosts.counts.add(records.slot_of(body))
        self._peeked = (offset, hid)
        return body if hid == best.hid else None

    def _load(self, offset: int, body: bytes | memoryview | None = None) -> Request:
        if body is None:
            body = self._journal.read_body(offset)
        try:
            request, slot = records.load(body, offset)
        except ValueError as exc:  # UnicodeDecodeError included
            raise JobDirCorrupt(self.layout.journal, offset, str(exc)) from None
        counts = self._hosts.counts
        hid = counts.recent.get(slot)
        request._hid = counts.add(slot) if hid is None else hid
        return request

    def _in_flight_seq(self, request: Request, what: str, taken: Iterable[int] = ()) -> int:
        seq = getattr(request, "_seq", None)
        # the very object pop() returned: a stale one's seq (an offset) may name another request by now
        if seq is None or self._inflight.get(seq) is not request or seq in taken:
            raise NotInFlight(
                f"{what}() was given {request!r}, which is not in flight: pass the Request object "
                f"pop() returned, once")
        return int(seq)

    def done(self, request: Request, *, refetch_after: float | None = None) -> None:
        """Acknowledge ``request`` (as returned by ``pop``): it will never be handed out again.

        ``refetch_after=s``: finished now, and the same request comes back as pending
        after ``s`` seconds (re-crawl scheduling), written as one REFETCH record.
        """
        if refetch_after is not None:
            self._requeue(request, "done", REFETCH, _check_seconds("refetch_after", refetch_after), 0)
            return
        seq = getattr(request, "_seq", None)
        with self._mutex:
            self._check_open()
            inflight = self._inflight
            if inflight.get(seq) is not request:  # type: ignore[arg-type]
                self._in_flight_seq(request, "done")  # raises NotInFlight
            assert isinstance(seq, int)  # it is in flight
            if seq >= 0:
                journal = self._journal
                offset = journal.size
                journal.write(done_frame(offset, seq, self._salt))
            try:
                if seq >= 0:
                    self._records["dones"] += 1
                    self._live_bytes -= inflight[seq]._size
                    self._last_record = offset
                del inflight[seq]
                self._counters["done"] += 1
                hosts = self._hosts
                if hosts.hot or self._waiters:
                    self._host_back(request, seq >= 0)
                else:  # the counts alone, inline: this is every done
                    counts = hosts.counts
                    counts.inflight[request._hid] -= 1
                    if seq >= 0:
                        counts.done[request._hid] += 1
            except BaseException as exc:
                self._interrupted("done", exc)
                raise

    def _host_back(self, request: Request, counted: bool, pending: int = 0) -> None:
        """A request of this host is no longer in flight (done if ``counted``; pending again if ``pending``)."""
        self._hosts.returned(request._hid, done=counted, pending=pending)
        if self._waiters:
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
            seq = self._in_flight_seq(request, what)
            priority = request.priority
            if isinstance(priority, bool) or not isinstance(priority, int) or not -(2**31) <= priority < 2**31:
                raise ValueError(f"{what}(): {request!r} has priority {priority!r}, not a 32-bit int")
            # a re-fetch is a new fetch: its retries count from 0 again
            attempts = 0 if kind == REFETCH else min(_attempts(request.attempts) + more_attempts, MAX_ATTEMPTS)
            if seq < 0:  # kept in memory only (this run): back into the memory queue at once, no time kept
                del self._inflight[seq]
                request.attempts = attempts
                self._memq.push(request, -priority)
                self._count_pending(priority, 1)
                self._counters["retried" if kind == RETRY else "refetch_scheduled"] += 1
                self._host_back(request, False, 1)  # no journal record: not counted in the host's done
                return
            try:
                record = encode_request(request)
            except Unencodable as exc:
                raise FrontierError(f"{what}(): {request!r} can no longer be stored ({exc}); it is still in "
                                    f"flight: done() it, or fix its meta and try again") from None
            due = time.time() + after if after > 0 else 0.0
            journal = self._journal
            offset = journal.size
            framed = records.framed(offset, request, request.slot.encode(), record, self._salt, attempts=attempts,
                                    not_before=due, kind=kind, target=seq)
            journal.write(framed)
            try:
                self._live_bytes += len(framed) - self._inflight.pop(seq)._size
                self._records["pushes"] += 1
                self._records["dones"] += 1
                self._last_record = offset
                if due:
                    self._hold(due, offset, priority)
                else:
                    self._enqueue(offset, priority, request._hid)
                self._count_pending(priority, 1)
                request.attempts = attempts
                request.not_before = due or None
                self._counters["retried" if kind == RETRY else "refetch_scheduled"] += 1
                if kind == REFETCH:
                    self._counters["done"] += 1
                self._host_back(request, kind == REFETCH, 1)
            except BaseException as exc:
                self._interrupted(what, exc)
                raise

    def done_many(self, requests: Iterable[Request]) -> None:
        """``done`` for many requests as one write; all are checked before anything is written."""
        batch = list(requests)
        with self._mutex:
            self._check_open()
            seqs: list[int] = []
            for request in batch:
                seqs.append(self._in_flight_seq(request, "done_many", seqs))
            on_disk = [seq for seq in seqs if seq >= 0]
            if on_disk:
                data, offsets = frame_all(self._journal.size, [done_body(seq) for seq in on_disk], self._salt)
                self._journal.write(data)
            try:
                if on_disk:
                    self._records["dones"] += len(on_disk)
                    self._live_bytes -= sum(self._inflight[seq]._size for seq in on_disk)
                    self._last_record = offsets[-1]
                for request, seq in zip(batch, seqs, strict=True):
                    del self._inflight[seq]
                    self._host_back(request, seq >= 0)
                self._counters["done"] += len(seqs)
            except BaseException as exc:
                self._interrupted("done_many", exc)
                raise

    def holds(self, request: Request) -> bool:
        """True if ``request`` is this frontier's in-flight object: the one ``pop`` returned, not yet
        finished (what ``done``, ``retry`` and ``fail`` accept)."""
        seq = getattr(request, "_seq", None)
        with self._mutex:
            return isinstance(seq, int) and self._inflight.get(seq) is request

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
            seq = self._in_flight_seq(request, "fail")
            if seq < 0:
                del self._inflight[seq]
                self._memory_failed += 1
                self._host_back(request, False)
                return
            journal = self._journal
            offset = journal.size
            journal.write(frame(offset, fail_body(seq, time.time(), text), self._salt))
            try:
                self._records["dones"] += 1
                self._live_bytes -= self._inflight.pop(seq)._size
                self._last_record = offset
                self._failed[seq] = offset
                self._host_back(request, True)
            except BaseException as exc:
                self._interrupted("fail", exc)
                raise

    def failed(self) -> list[FailedRequest]:
        """Every failed request not requeued, oldest failure first (across runs and crashes).

        Each is read from the journal as it was stored: ``request.attempts`` is set,
        ``request.not_before`` is None. Requests kept in memory only that failed are not listed.
        """
        with self._mutex:
            self._check_open()
            journal = self._journal
            out = []
            for target, record_at in self._failed.items():
                info = journal.read_fail(record_at, target)
                request = self._load(target)
                request._seq = None
                request.not_before = None
                out.append(FailedRequest(request, info.error, info.failed_at))
            return out

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
            chosen = list(self._failed)[:limit] if limit is not None else list(self._failed)
            for start in range(0, len(chosen), _REQUEUE_BATCH):
                self._requeue_failed(chosen[start:start + _REQUEUE_BATCH])
            return len(chosen)

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
        prepared: list[tuple[bytes, float, bytes]] = []  # (PUSH body, failed_at, error) of each
        for entry in entries:
            if not isinstance(entry, FailedRequest):
                raise TypeError(f"record_failed() takes FailedRequest objects, got {type(entry).__name__}")
            request = entry.request
            if not isinstance(entry.error, str):
                raise TypeError(f"record_failed(): error must be a str, got {type(entry.error).__name__}")
            at = _check_time("record_failed(): failed_at", entry.failed_at)
            try:
                record = encode_request(request)
            except Unencodable as exc:
                raise ValueError(f"record_failed(): {request!r} cannot be stored: {exc}") from None
            prepared.append((records.body(request, record, attempts=_attempts(request.attempts)), at,
                             cap_error(entry.error)))
        if not prepared:
            return 0
        with self._mutex:
            self._check_open()
            journal = self._journal
            bodies: list[bytes] = []
            offset = journal.size
            for pushed, at, error in prepared:  # each FAIL names the PUSH just before it
                bodies += [pushed, fail_body(offset, at, error)]
                offset += _HEADER + len(bodies[-2]) + _HEADER + len(bodies[-1])
            data, offsets = frame_all(journal.size, bodies, self._salt)
            journal.write(data)
            try:
                hosts = self._hosts
                counts = hosts.counts
                touched: set[int] = set()
                for entry, at, fail_at in zip(entries, offsets[0::2], offsets[1::2], strict=True):
                    request = entry.request
                    if not request.dont_filter:
                        self._seen.add(request.fingerprint)
                    hid = counts.add(request.slot.encode())
                    counts.done[hid] += 1
                    touched.add(hid)
                    self._failed[at] = fail_at
                    self._records["pushes"] += 1
                    self._records["dones"] += 1
                self._last_record = offsets[-1]
                now = time.time()
                for hid in touched:  # a budget counts done requests
                    if (host := hosts.hot.get(hid)) is not None:
                        hosts.place(host, now)
                        hosts.cool(host, now)
            except BaseException as exc:
                self._interrupted("record_failed", exc)
                raise
            return len(entries)

    def _requeue_failed(self, targets: list[int]) -> None:
        """One journal write of a RETRY record for each failed request of ``targets``, then their bookkeeping."""
        journal = self._journal
        bodies: list[bytes] = []
        heads: list[tuple[int, bytes]] = []  # (priority, slot) of each
        for target in targets:
            body, priority, slot = records.retried(journal.read_body(target), target)
            bodies.append(body)
            heads.append((priority, slot))
        data, offsets = frame_all(journal.size, bodies, self._salt)
        journal.write(data)
        try:
            counts = self._hosts.counts
            for target, offset, body, (priority, slot) in zip(targets, offsets, bodies, heads, strict=True):
                del self._failed[target]
                hid = counts.add(slot)
                self._enqueue(offset, priority, hid)
                self._count_pending(priority, 1)
                counts.pending[hid] += 1
                self._records["pushes"] += 1
                self._live_bytes += _HEADER + len(body)
            self._last_record = offsets[-1]
        except BaseException as exc:
            self._interrupted("requeue_failed", exc)
            raise
        if self._waiters:
            self._cond.notify_all()

    # ------------------------------------------------------------------ time and hosts
    @property
    def finished(self) -> bool:
        """True when nothing is pending and nothing is in flight (failed requests do not count)."""
        with self._mutex:
            return not self._inflight and not any(self._pending.values())

    def next_ready(self) -> float | None:
        """When the next pending request may be handed out (a ``time.time()`` value; now if one
        may be now), or None if none can become ready by waiting alone."""
        with self._mutex:
            self._check_open()
            now = time.time()
            try:
                if self._delayed_due is not None and now >= self._delayed_due:
                    self._release_due(now)
                if self._memq.curprio is not None:
                    return now
                if not self._hosts.active:
                    if self._queues.pq.curprio is not None:
                        return now
                else:
                    self._hosts.wake(now)
                    self._fill(now)
                    if self._hosts.best() is not None:
                        return now
            except BaseException as exc:
                self._interrupted("next_ready", exc)
                raise
            return self._next_event()

    def set_delay(self, host: str, seconds: float | None) -> None:
        """Wait at least ``seconds`` between hand-outs of ``host`` (None: the frontier's ``delay``).

        For a robots.txt Crawl-delay. Kept in the journal: it holds across restarts and crashes.
        """
        name = _check_host(host)
        delay = None if seconds is None else _check_seconds("seconds", seconds)
        with self._mutex:
            self._check_open()
            entry = self._hosts.host(self._hosts.hid(name))
            self._set_host(entry, delay, entry.blocked_until, entry.budget)

    def block(self, host: str, until: float) -> None:
        """Hand out nothing of ``host`` before ``until`` (a ``time.time()`` value; ``math.inf``: until
        ``unblock``). For a 429 or 503 with Retry-After. Kept across restarts and crashes."""
        name = _check_host(host)
        if until != math.inf:
            until = _check_time("block(): until", until)
        with self._mutex:
            self._check_open()
            entry = self._hosts.host(self._hosts.hid(name))
            self._set_host(entry, entry.delay, float(until), entry.budget)

    def unblock(self, host: str) -> None:
        """Undo ``block``: ``host`` is ready as soon as its delay allows."""
        name = _check_host(host)
        with self._mutex:
            self._check_open()
            entry = self._hosts.host(self._hosts.hid(name))
            self._set_host(entry, entry.delay, 0.0, entry.budget)

    def set_budget(self, host: str, budget: int | None) -> None:
        """At most ``budget`` requests of ``host`` done or in flight, ever (None: no limit).

        A retried request counts once; a re-fetch counts again. Kept across restarts and crashes.
        """
        name = _check_host(host)
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or not 0 <= budget < 2**63):
            raise ValueError(f"set_budget(): budget must be None or a whole number from 0 to 2**63 - 1, got {budget!r}")
        with self._mutex:
            self._check_open()
            entry = self._hosts.host(self._hosts.hid(name))
            self._set_host(entry, entry.delay, entry.blocked_until, budget)

    def set_done_count(self, host: str, done: int) -> None:
        """Set how many requests of ``host`` are done (for a crawl copied in from elsewhere); kept in
        the journal like the host's settings, and counted by its budget."""
        name = _check_host(host)
        if isinstance(done, bool) or not isinstance(done, int) or not 0 <= done < 2**64:
            raise ValueError(f"set_done_count(): done must be a whole number from 0 to 2**64 - 1, got {done!r}")
        with self._mutex:
            self._check_open()
            entry = self._hosts.host(self._hosts.hid(name))
            before = self._hosts.counts.done[entry.hid]
            self._hosts.counts.done[entry.hid] = done
            try:
                self._set_host(entry, entry.delay, entry.blocked_until, entry.budget)
            except BaseException:
                self._hosts.counts.done[entry.hid] = before
                raise

    def _set_host(self, host: Host, delay: float | None, blocked_until: float, budget: int | None) -> None:
        """Write a HOST record with these settings, then apply them."""
        body = host_body(self._hosts.counts.name_bytes(host.hid), _NAN if delay is None else delay, blocked_until,
                         -1 if budget is None else budget, self._hosts.counts.done[host.hid])
        journal = self._journal
        offset = journal.size
        journal.write(frame(offset, body, self._salt))
        try:
            self._last_record = offset
            host.delay, host.blocked_until, host.budget = delay, blocked_until, budget
            self._hosts.active = True
            now = time.time()
            self._hosts.place(host, now)
            self._hosts.cool(host, now)
        except BaseException as exc:
            self._interrupted("a host setting", exc)
            raise
        if self._waiters:
            self._cond.notify_all()

    def hosts(self) -> list[HostInfo]:
        """Every host with pending, in-flight or done requests or a setting: counts, delay, ready time,
        block and budget, sorted by name."""
        with self._mutex:
            self._check_open()
            schedule = self._hosts
            counts, hot = schedule.counts, schedule.hot
            out = [schedule.info(hid) for hid in counts.ids()
                   if counts.pending[hid] or counts.inflight[hid] or counts.done[hid]
                   or (hid in hot and hot[hid].has_settings)]
            return sorted(out, key=lambda info: info.host)

    def host(self, name: str) -> HostInfo | None:
        """One host as ``hosts()`` tells of it, found without listing the others; None if it has
        no pending, in-flight or done requests and no setting."""
        name = _check_host(name)
        with self._mutex:
            self._check_open()
            schedule = self._hosts
            counts, hot = schedule.counts, schedule.hot
            hid = counts.find(name.encode("utf-8"))
            if hid < 0 or not (counts.pending[hid] or counts.inflight[hid] or counts.done[hid]
                               or (hid in hot and hot[hid].has_settings)):
                return None
            return schedule.info(hid)

    def _count_pending(self, priority: int, delta: int) -> None:
        count = self._pending.get(priority, 0) + delta
        if count:
            self._pending[priority] = count
        else:
            del self._pending[priority]

    def __len__(self) -> int:
        """Requests waiting to be popped (in flight and failed ones not counted)."""
        with self._mutex:
            return sum(self._pending.values())

    @property
    def in_flight(self) -> list[Request]:
        """The requests popped and not yet done."""
        with self._mutex:
            return list(self._inflight.values())

    def stats(self) -> dict[str, Any]:
        """Counters of this run and the state of the frontier.

        ``failed``: the failed requests not requeued (those ``failed()`` lists, kept across runs), plus
        the requests kept in memory only that failed in this run.
        """
        with self._mutex:
            memory_only = len(self._memq) + sum(1 for s in self._inflight if s < 0)
            return {
                **self._counters,
                "pending": sum(self._pending.values()),
                "in_flight": len(self._inflight),
                "pending_by_priority": dict(sorted(self._pending.items(), reverse=True)),
                "memory_only": memory_only,
                "seen": len(self._seen),
                "journal_bytes": self._journal.size if not self._closed else None,
                "order": self.order,
                "recovery": self.recovery,
                "dirty": self._dirty,
                "delayed": len(self._delayed),
                "failed": len(self._failed) + self._memory_failed,
                "hosts": len(self._hosts.counts),
                "buffered": self._hosts.buffered,
                "politeness": self._hosts.active,
            }

    # ------------------------------------------------------------------ closing
    def compact(self, progress: Progress | None = None) -> Compacted:
        """Rewrite the journal to hold only pending requests (nothing may be in flight)."""
        with self._mutex:
            self._check_open()
            if self._inflight:
                raise FrontierError(
                    f"cannot compact with {len(self._inflight)} requests in flight: done() them or close() first")
            if self._dirty:
                raise FrontierError(
                    f"cannot compact {self.path}: an earlier call was interrupted ({self._dirty}); close it and "
                    f"open it again first")
            return self._compact(progress)

    def _host_records(self) -> Iterator[bytes]:
        """A HOST record body for each host with a setting, done or failed requests (what compaction keeps)."""
        counts, hot = self._hosts.counts, self._hosts.hot
        failing = {counts.add(records.slot_of(self._journal.read_body(target))) for target in self._failed}
        for hid in counts.ids():
            host, done = hot.get(hid), counts.done[hid]
            if done or (host is not None and host.has_settings) or hid in failing:
                delay, blocked_until, budget = (None, 0.0, None) if host is None else (
                    host.delay, host.blocked_until, host.budget)
                yield host_body(counts.name_bytes(hid), _NAN if delay is None else delay, blocked_until,
                                -1 if budget is None else budget, done)

    def _compact(self, progress: Progress | None) -> Compacted:
        layout = self.layout
        self._seen.sync()
        # Until the rename, a failure (a full disk) leaves the old journal and this frontier as they were.
        self._compacting = True
        try:
            hosts = tuple(self._host_records())
            result = write_compacted(layout.journal, layout.compacting, salt=self._salt, floor=self._floor,
                                     progress=progress, hosts=hosts)
        finally:
            self._compacting = False
        try:
            # valid for the old journal and the new
            checkpoint.write_open(layout.cursor, self._ident, result.bytes_after, self._seen.tail(),
                                  self._seen.index_record, result.crc)
            self._queues.close()
            self._journal.close()
            install(layout.journal, layout.compacting)
            OffsetQueues.wipe(layout.queue_dir)
            self._queues = OffsetQueues(layout.queue_dir, self.order)
            self._hosts.drain(time.time())
            self._delayed.clear()
            now = time.time()
            for offset, priority, not_before in result.kept:
                if not_before > now:
                    self._delayed.add(not_before, offset, priority)
                else:
                    self._queues.push(offset, priority)
            self._delayed_due = self._delayed.next_due()
            self._pulled = self._peeked = None
            self._journal = JournalWriter(layout.journal, result.bytes_after, salt=self._salt, fsync=self.fsync,
                                          crc=result.crc)
        except BaseException as exc:
            self._broken = self._dirty = f"{type(exc).__name__} during compaction: {exc}"
            raise_named(layout.compacting, exc)
            raise
        self._floor, self._floor_crc = result.bytes_after, result.crc
        self._records = {"pushes": len(result.kept) + len(result.failed), "dones": len(result.failed)}
        self._live_bytes = result.live_bytes
        self._failed = result.failed
        self._last_record = result.last_record
        log.info("compacted %s: journal %s -> %s bytes", self.path, f"{result.bytes_before:,}",
                 f"{result.bytes_after:,}")
        return result

    def close(self) -> None:
        """Checkpoint: re-queue what is in flight, write the queue headers and the cursor, unlock.

        In a process that did not open the frontier (a forked child), only this
        process's file descriptors are closed: nothing is written and the lock stays
        with its owner.
        """
        if not self._closed and not self._lock.owned():  # a forked child: nothing of the parent's is touched
            self._closed = True
            self._forget_files()
            self._lock.release()
            return
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            _OPEN.discard(self)
            self._cond.notify_all()  # waiting pop()s raise FrontierClosed
            try:
                if self._dirty is None:
                    self._checkpoint_and_close()
                else:
                    log.warning("closing %s without a clean checkpoint (%s): it is rebuilt from its journal at the "
                                "next open", self.path, self._dirty)
            finally:
                try:
                    self._release_files()
                finally:
                    self._lock.release()

    def _checkpoint_and_close(self) -> None:
        requeued = 0
        for seq, request in self._inflight.items():
            self._hosts.returned(request._hid, done=False, pending=int(seq >= 0))
            if seq >= 0:
                priority = self._stored_priority(seq)
                self._queues.push(seq, priority)
                self._count_pending(priority, 1)
                requeued += 1
        memory_lost = len(self._memq) + sum(1 for s in self._inflight if s < 0)
        self._inflight.clear()
        self._counters["requeued"] = requeued
        if memory_lost:
            self._counters["memory_lost"] = memory_lost
            log.warning("%d requests that could not be stored on disk are lost at close", memory_lost)
            for request in self._memory_requests():
                self._count_pending(request.priority, -1)
                self._hosts.counts.pending[self._hosts.hid(request.slot)] -= 1
        if self._should_compact():
            self._compact(None)
        self._return_buffers()
        queued = self._queues.sizes()
        active = self._queues.close()
        self._sync_queue_files()
        OffsetQueues.write_active(self.layout.active, active)
        self._seen.sync()
        self._journal.sync()
        index = self._seen.save_index(min_new_keys=INDEX_MIN_NEW_KEYS)
        pending = {p: n for p, n in self._pending.items() if n}
        hosts_file = save_host_state(self.layout.hosts, self._hosts, self._delayed, self._failed)
        checkpoint.write_clean(
            self.layout.cursor, self._ident, journal_bytes=self._journal.size, last_record=self._last_record,
            seen_tail=self._seen.tail(), pending=pending,
            queues={p: queue_crc(self.layout.queue_dir, p) for p in queued},
            pushes=self._records["pushes"], dones=self._records["dones"], live_bytes=self._live_bytes,
            hosts_file=hosts_file, seen_index=index, journal_crc=self._journal.crc)

    def _return_buffers(self) -> None:
        """Put the requests of the host buffers back into their priority queues, in journal order."""
        drained = self._hosts.drain(time.time())
        self._pulled = self._peeked = None
        groups: dict[int, list[int]] = {}
        for priority, offset in drained:
            groups.setdefault(priority, []).append(offset)
        for priority, offsets in groups.items():
            offsets.extend(self._queues.take_all(priority))
            offsets.sort()
            self._queues.load(priority, array("Q", offsets))

    def _stored_priority(self, seq: int) -> int:
        """The priority the journal holds for the in-flight request ``seq`` (its caller may have changed
        ``request.priority`` since; the queues and counts go by the journal)."""
        return records.priority_of(self._journal.read_body(seq))

    def _memory_requests(self) -> list[Request]:
        out = []
        while (request := self._memq.pop()) is not None:
            out.append(request)
        return out

    def _should_compact(self) -> bool:
        """At close: when the journal is big, most of its records are dead, and it is quick to do.

        A journal over ``AUTO_COMPACT_MAX_BYTES`` is never compacted inside ``close()``
        (a Ctrl-C would look hung): the log says so, ``inspect`` shows what is reclaimable,
        and ``diskfrontier compact`` or ``compact()`` does it with a progress bar.
        """
        size = self._journal.size
        if size < AUTO_COMPACT_MIN_BYTES:
            return False
        records = self._records["pushes"] + self._records["dones"]
        live = sum(n for p, n in self._pending.items()) + 2 * len(self._failed)  # the records compaction keeps
        if records <= 3 * live:
            return False
        if size > AUTO_COMPACT_MAX_BYTES:
            log.info("%s: most of its %s-byte journal is finished work; 'diskfrontier compact %s' reclaims it "
                     "(not done at close, where it would take a while)", self.path, f"{size:,}", self.path)
            return False
        return True

    def _sync_queue_files(self) -> None:
        """fsync every queue file, so that a clean checkpoint also survives a power cut."""
        for root, _dirs, files in os.walk(self.layout.queue_dir):
            for name in files:
                fsync_path(os.path.join(root, name))

    def _release_files(self) -> None:
        queues = getattr(self, "_queues", None)
        if queues is not None:
            queues.abandon()  # after a dirty close, or a checkpoint that failed half-way
        for part in ("_journal", "_seen"):
            obj = getattr(self, part, None)
            if obj is not None:
                obj.close()

    def _forget_files(self) -> None:
        """Close this process's copies of the descriptors without writing anything (a forked child)."""
        journal, seen = getattr(self, "_journal", None), getattr(self, "_seen", None)
        for owner, name in ((journal, "fd"), (seen, "fd"), (seen, "sums_fd")):
            fd = getattr(owner, name, -1)
            if fd >= 0:
                setattr(owner, name, -1)  # a later close() of the part must not close the number again
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _check_open(self) -> None:
        # a forked child's copy of the lock is closed right after the fork (lock.py)
        if self._closed or self._broken or self._compacting or self._lock.fd < 0:
            self._refuse()

    def _refuse(self) -> None:
        if self._closed:
            raise FrontierClosed(f"the frontier of {self.path} is closed; open it again with Frontier(path)")
        self._lock.check_owner()
        if self._broken:
            raise FrontierError(f"the frontier of {self.path} cannot go on ({self._broken}); close it and open it "
                                f"again: it is rebuilt from its journal")
        if self._compacting:
            raise FrontierError(f"the frontier of {self.path} is being compacted: a compact() progress callback may "
                                f"read it (len, stats) but not change it")
        raise FrontierClosed(f"the frontier of {self.path} no longer holds its lock; open it again with Frontier(path)")

    def __enter__(self) -> Frontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        # without the lock: a repr must never wait, and the counts are only indicative
        pending = sum(list(self._pending.values()))
        state = "closed" if self._closed else f"{pending} pending, {len(self._inflight)} in flight"
        return f"<Frontier {self.path} ({state})>"


def _check_seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{name} must be a number of seconds from 0 to {MAX_SECONDS:,}, got {value!r}")
    return float(value)


def _check_time(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_TIME:
        raise ValueError(f"{name} must be a time.time() value (0 to {MAX_TIME:,}), got {value!r}")
    return float(value)


def _attempts(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Request.attempts must be a whole number of at least 0, got {value!r}")
    return min(value, MAX_ATTEMPTS)


def _check_host(host: Any) -> str:
    checked = check_slot(host, "host")
    if checked is None:
        raise TypeError("host must be a str, got None")
    return checked


def _just_created(journal: str) -> bool:
    """True if ``journal`` holds no more than (a beginning of) its magic: created, never written."""
    if not os.path.lexists(journal) or os.lstat(journal).st_size > len(MAGIC):
        return False
    with open_file(journal) as f:
        return MAGIC.startswith(f.read())


def _after_fork_in_child() -> None:
    """A forked child may not use its parent's frontiers (``JobDirNotOwned``), and must not
    disturb them: fresh locks (a copy of one another thread held would never be released),
    and queue files that write nowhere."""
    for frontier in list(_OPEN):
        frontier._mutex = threading.RLock()
        frontier._cond = threading.Condition(frontier._mutex)
        frontier._waiters = 0
        queues = getattr(frontier, "_queues", None)
        if queues is not None and not frontier._closed:
            with contextlib.suppress(OSError):
                queues.disown()


os.register_at_fork(after_in_child=_after_fork_in_child)
