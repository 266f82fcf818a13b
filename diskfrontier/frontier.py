"""``Frontier``: the crash-safe crawl frontier, composed of the job directory's parts.

Scrapy's composition (a seen-file dupefilter, a priority queue of disk queues, a
memory fallback) with a recovery journal under it:

* ``push`` appends one PUSH record to the journal (one ``write`` system call), then
  marks the fingerprint seen and queues the record's offset. ``push_many`` is one write
  for the whole group. ``done`` appends one DONE record. ``pop`` writes nothing: what is
  in flight lives in memory, and is pending as far as the journal is concerned.
* The queues and the seen file are derived from the journal. A clean ``close`` makes
  them consistent and says so in the checkpoint; after anything else they are rebuilt
  from the journal at the next open (``recovery.py``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from typing import Any

from queuelib import PriorityQueue
from queuelib.queue import FifoMemoryQueue, LifoMemoryQueue

from . import checkpoint
from .atomic import fsync_path
from .codec import Unencodable, decode_request, encode_request
from .compaction import Compacted, compact_journal
from .errors import FrontierClosed, FrontierError, JobDirCorrupt, NotInFlight, ScrapyQueueFound
from .jobdir import Layout, Lock, read_meta, write_meta
from .journal import JournalWriter, done_frame, parse_push, push_frame
from .queues import OffsetQueues, read_active
from .scrapy_queue import holds_requests, set_aside
from .recovery import Progress, rebuild, save_torn_tail
from .request import Request
from .seen import SeenFile
from .seenindex import key_of

log = logging.getLogger("diskfrontier")

AUTO_COMPACT_MIN_BYTES = 1 << 20


class Frontier:
    """A crawl frontier kept in a job directory, safe across restarts and ``kill -9``.

    ``Frontier(path)`` creates the directory or resumes it, and locks it: a second open
    raises ``JobDirLocked`` naming the holder's pid. ``order`` ("lifo" or "fifo") is fixed
    when the directory is created; ``None`` means "lifo" for a new one and whatever it
    was for an existing one. ``fsync=True`` makes every call also survive a power cut.
    ``progress`` is called as ``progress(done, total)`` during long recovery scans.

    Not thread-safe: use it from one thread, as Scrapy uses its scheduler.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        order: str | None = None,
        fsync: bool = False,
        progress: Progress | None = None,
    ) -> None:
        if order not in (None, "lifo", "fifo"):
            raise ValueError(f"order must be 'lifo' or 'fifo', got {order!r}")
        if not isinstance(fsync, bool):
            raise TypeError(f"fsync must be True or False, got {fsync!r}")
        self.path = os.fspath(path)
        self.layout = Layout(self.path)
        self.fsync = fsync
        self._closed = True
        self._counters = dict.fromkeys(
            ("pushed", "duplicates", "popped", "done", "unserializable", "memory_lost",
             "recovered", "requeued", "torn_bytes_cut", "seen_added_from_journal"), 0)
        self._inflight: dict[int, Request] = {}
        self._pending: dict[int, int] = {}
        self._memory_seq = 0
        self._records = {"pushes": 0, "dones": 0}  # records in the journal since its last compaction
        self._memory_seen: set[bytes] = set()
        self._warned_unserializable = False
        self.recovery = "new"
        os.makedirs(self.path, exist_ok=True)
        self._lock = Lock(self.layout.lock)
        self._lock.acquire()
        try:
            self._open(order, progress)
        except BaseException:
            self._release_files()
            self._lock.release()
            raise
        self._closed = False

    # ------------------------------------------------------------------ opening
    def _open(self, order: str | None, progress: Progress | None) -> None:
        layout = self.layout
        started = time.perf_counter()
        if os.path.exists(layout.meta):
            meta = read_meta(layout)
            if order is not None and order != meta["order"]:
                raise ValueError(
                    f"{self.path} was created with order={meta['order']!r}; it cannot be reopened "
                    f"with order={order!r} (the order is fixed when the directory is created)"
                )
            if not os.path.exists(layout.journal):
                raise JobDirCorrupt(layout.journal, 0, "the journal is missing, so pending requests cannot be read")
            fresh = False
        else:
            self._set_aside_foreign_queue()
            meta = write_meta(layout, order or "lifo")
            JournalWriter.create(layout.journal)
            fresh = True
        self.order: str = meta["order"]
        if os.path.exists(layout.compacting):
            os.unlink(layout.compacting)  # a compaction killed before its rename: the old journal stands
        saved = checkpoint.read_checkpoint(layout.cursor)
        checkpoint.write_open(layout.cursor)
        self._seen = SeenFile(layout.seen)
        loaded = self._seen.open()
        if loaded.torn:
            log.warning("cut %d bytes of torn tail from %s", loaded.torn, layout.seen)
        if loaded.legacy_hex:
            log.warning("converted %s from hex lines (Scrapy < 2.19) to the binary format", layout.seen)
        self._memq = PriorityQueue(lambda _key: LifoMemoryQueue() if self.order == "lifo" else FifoMemoryQueue())
        reason = None if fresh else self._distrust_reason(saved, loaded.end)
        if fresh or reason is None:
            self._open_trusted(saved)
        else:
            self._rebuild(reason, progress)
        self._counters["torn_bytes_cut"] += loaded.torn
        elapsed = time.perf_counter() - started
        if not fresh:
            self._log_resume(elapsed)

    def _set_aside_foreign_queue(self) -> None:
        """A Scrapy JOBDIR's queue: an empty one is set aside; one with requests needs ``adopt-scrapy``."""
        if os.path.isdir(self.layout.queue_dir) and os.listdir(self.layout.queue_dir):
            if holds_requests(self.layout.queue_dir):
                raise ScrapyQueueFound(self.path)
            aside = set_aside(self.layout.queue_dir)
            log.info("moved the empty queue folder %s of a finished Scrapy crawl to %s", self.layout.queue_dir, aside)

    def _distrust_reason(self, saved: checkpoint.Checkpoint, seen_end: int) -> str | None:
        """Why the queue files cannot be used as they are, or None if they can."""
        if not saved.clean:
            return saved.problem or "the last run did not close cleanly"
        try:
            journal_size = os.path.getsize(self.layout.journal)
        except OSError as exc:
            return f"journal unreadable ({exc})"
        if journal_size != saved.journal_bytes:
            return f"the journal is {journal_size} bytes, the checkpoint says {saved.journal_bytes}"
        if seen_end != saved.seen_bytes:
            return f"requests.seen is {seen_end} bytes, the checkpoint says {saved.seen_bytes}"
        try:
            active = read_active(self.layout.active) if saved.pending else []
        except JobDirCorrupt as exc:
            return str(exc)
        if sorted(active) != sorted(saved.pending):
            return "active.json does not match the checkpoint"
        return None

    def _open_trusted(self, saved: checkpoint.Checkpoint) -> None:
        self._journal = JournalWriter(self.layout.journal, os.path.getsize(self.layout.journal), fsync=self.fsync)
        try:
            self._queues = OffsetQueues(self.layout.queue_dir, self.order, saved.pending)
        except JobDirCorrupt as exc:
            self._rebuild(str(exc), None)
            return
        sizes = self._queues.sizes()
        if sizes != {p: n for p, n in saved.pending.items() if n}:
            self._queues.close()
            self._rebuild(f"queue sizes {sizes} do not match the checkpoint {saved.pending}", None)
            return
        self._pending = dict(sizes)
        self._records = {"pushes": saved.journal_pushes, "dones": saved.journal_dones}
        self.recovery = "clean" if saved.clean else "new"

    def _rebuild(self, reason: str, progress: Progress | None) -> None:
        log.info("rebuilding the queues of %s from its journal: %s", self.path, reason)
        if getattr(self, "_journal", None) is not None:
            self._journal.close()
        OffsetQueues.wipe(self.layout.queue_dir)
        self._queues = OffsetQueues(self.layout.queue_dir, self.order)
        result = rebuild(self.layout.journal, self._queues, self._seen, progress)
        torn = result.scan.torn
        if torn:
            aside = save_torn_tail(self.layout.journal, result.scan.end)
            log.warning("cut %d bytes of torn tail from %s (kept in %s)", torn, self.layout.journal, aside)
            self._counters["torn_bytes_cut"] += torn
        self._journal = JournalWriter(self.layout.journal, result.scan.end, fsync=self.fsync)
        self._pending = result.pending
        self._records = {"pushes": result.pushes, "dones": result.dones}
        self._counters["recovered"] = sum(result.pending.values())
        self._counters["seen_added_from_journal"] = result.seen_added
        self._seen.flush()
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

    # ------------------------------------------------------------------ the API
    def push(self, request: Request, *, memory_only: bool = False) -> bool:
        """Queue ``request``; False (and nothing written) if its fingerprint was seen before.

        When this returns True the request is on its way to the OS: a ``kill -9`` from
        now on cannot lose it (with ``fsync=True``, neither can a power cut).
        ``memory_only=True`` keeps it in memory without trying to store it (the caller
        knows it cannot be): served in priority order in this run, lost at close.
        """
        self._check_open()
        if not isinstance(request, Request):
            raise TypeError(f"push() takes a diskfrontier.Request, got {type(request).__name__}")
        fingerprint = request.fingerprint
        key = key_of(fingerprint)
        if not request.dont_filter and (key in self._seen.index or fingerprint in self._memory_seen):
            self._counters["duplicates"] += 1
            return False
        if memory_only:
            self._push_memory(request, None)
            return True
        try:
            record = encode_request(request)
        except Unencodable as exc:
            self._push_memory(request, str(exc))
            return True
        self._push_record(request, record, key)
        return True

    def has_seen(self, fingerprint: bytes) -> bool:
        """True if a request with this fingerprint was accepted, in this or an earlier run."""
        return key_of(fingerprint) in self._seen.index or fingerprint in self._memory_seen

    def _push_record(self, request: Request, record: bytes, key: int | None = None) -> None:
        """Store an accepted request whose msgpack record is ``record`` (dedupe already done)."""
        priority = request.priority
        fingerprint = request.fingerprint
        offset = self._journal.write(push_frame(priority, request.dont_filter, fingerprint, record))
        if not request.dont_filter:
            self._seen.add(fingerprint, key)
        self._queues.push(offset, priority)
        self._count_pending(priority, 1)
        self._counters["pushed"] += 1
        self._records["pushes"] += 1

    def push_many(self, requests: Iterable[Request]) -> int:
        """Push many requests as one group commit (one write); return how many were queued.

        Every request is checked first: a bad one raises before anything is written.
        """
        self._check_open()
        batch = list(requests)
        for request in batch:
            if not isinstance(request, Request):
                raise TypeError(f"push_many() takes diskfrontier.Request objects, got {type(request).__name__}")
        accepted: list[tuple[Request, bytes]] = []
        fresh: set[int] = set()
        index = self._seen.index
        memory: list[tuple[Request, str]] = []
        for request in batch:
            fingerprint = request.fingerprint
            if not request.dont_filter:
                key = key_of(fingerprint)
                if key in index or key in fresh or fingerprint in self._memory_seen:
                    self._counters["duplicates"] += 1
                    continue
                fresh.add(key)
            try:
                record = encode_request(request)
            except Unencodable as exc:
                memory.append((request, str(exc)))
                continue
            accepted.append((request, record))
        self._push_records(accepted)
        for request, reason in memory:
            self._push_memory(request, reason)
        return len(accepted) + len(memory)

    def _push_records(self, accepted: list[tuple[Request, bytes]]) -> None:
        """Store accepted requests with their msgpack records in one journal write (dedupe already done)."""
        if not accepted:
            return
        frames = [push_frame(r.priority, r.dont_filter, r.fingerprint, record) for r, record in accepted]
        position = self._journal.write(b"".join(frames))
        seen_add, queue_push = self._seen.add, self._queues.push
        for (request, _), frame in zip(accepted, frames):
            if not request.dont_filter:
                seen_add(request.fingerprint)
            queue_push(position, request.priority)
            self._count_pending(request.priority, 1)
            position += len(frame)
        self._counters["pushed"] += len(accepted)
        self._records["pushes"] += len(accepted)

    def _push_memory(self, request: Request, reason: str | None) -> None:
        # The fingerprint is kept out of requests.seen: after a restart this request is
        # gone, and a later push of it must be accepted, not rejected as a duplicate.
        if not request.dont_filter:
            self._memory_seen.add(request.fingerprint)
        self._memq.push(request, -request.priority)
        self._count_pending(request.priority, 1)
        self._counters["unserializable"] += 1
        self._counters["pushed"] += 1
        if reason is not None and not self._warned_unserializable:
            self._warned_unserializable = True
            log.warning(
                "%r cannot be stored on disk (%s): it is kept in memory for this run only and will be "
                "lost if the crawl stops before it is done; further such requests are only counted "
                "(stats()['unserializable'])", request, reason)

    def pop(self) -> Request | None:
        """The next request (highest priority first), now in flight until ``done``; None if empty."""
        self._check_open()
        disk_top = self._queues.top_priority()
        memory_top = None if self._memq.curprio is None else -self._memq.curprio
        if disk_top is None and memory_top is None:
            return None
        if memory_top is not None and (disk_top is None or memory_top > disk_top):
            request = self._memq.pop()
            self._memory_seq -= 1
            request._seq = self._memory_seq
        else:
            offset = self._queues.pop()
            assert offset is not None
            request = self._load(offset)
        self._inflight[request._seq] = request  # type: ignore[index]
        self._count_pending(request.priority, -1)
        self._counters["popped"] += 1
        return request

    def _load(self, offset: int) -> Request:
        body = self._journal.read_body(offset)
        priority, dont_filter, fingerprint, record = parse_push(body)
        try:
            return decode_request(record, priority, dont_filter, fingerprint, offset)
        except ValueError as exc:
            raise JobDirCorrupt(self.layout.journal, offset, str(exc)) from None

    def done(self, request: Request) -> None:
        """Acknowledge ``request`` (as returned by ``pop``): it will never be handed out again."""
        self._check_open()
        seq = getattr(request, "_seq", None)
        if seq is None or seq not in self._inflight:
            raise NotInFlight(
                f"done() was given {request!r}, which is not in flight: pass the Request object "
                f"pop() returned, once")
        if seq >= 0:
            self._journal.write(done_frame(seq))
            self._records["dones"] += 1
        del self._inflight[seq]
        self._counters["done"] += 1

    def done_many(self, requests: Iterable[Request]) -> None:
        """``done`` for many requests as one write; all are checked before anything is written."""
        self._check_open()
        batch = list(requests)
        seqs = []
        for request in batch:
            seq = getattr(request, "_seq", None)
            if seq is None or seq not in self._inflight or seq in seqs:
                raise NotInFlight(f"done_many() was given {request!r}, which is not in flight")
            seqs.append(seq)
        frames = b"".join(done_frame(seq) for seq in seqs if seq >= 0)
        if frames:
            self._journal.write(frames)
            self._records["dones"] += sum(1 for seq in seqs if seq >= 0)
        for seq in seqs:
            del self._inflight[seq]
        self._counters["done"] += len(seqs)

    def _count_pending(self, priority: int, delta: int) -> None:
        count = self._pending.get(priority, 0) + delta
        if count:
            self._pending[priority] = count
        else:
            del self._pending[priority]

    def __len__(self) -> int:
        """Requests waiting to be popped (in flight ones not counted)."""
        return sum(self._pending.values())

    @property
    def in_flight(self) -> list[Request]:
        """The requests popped and not yet done."""
        return list(self._inflight.values())

    def stats(self) -> dict[str, Any]:
        """Counters of this run and the state of the frontier."""
        memory_only = len(self._memq) + sum(1 for s in self._inflight if s < 0)
        return {
            **self._counters,
            "pending": len(self),
            "in_flight": len(self._inflight),
            "pending_by_priority": dict(sorted(self._pending.items(), reverse=True)),
            "memory_only": memory_only,
            "seen": len(self._seen),
            "journal_bytes": self._journal.size if not self._closed else None,
            "order": self.order,
            "recovery": self.recovery,
        }

    # ------------------------------------------------------------------ closing
    def compact(self, progress: Progress | None = None) -> Compacted:
        """Rewrite the journal to hold only pending requests (nothing may be in flight)."""
        self._check_open()
        if self._inflight:
            raise FrontierError(
                f"cannot compact with {len(self._inflight)} requests in flight: done() them or close() first")
        return self._compact(progress)

    def _compact(self, progress: Progress | None) -> Compacted:
        self._seen.sync()
        self._queues.close()
        self._journal.close()
        result = compact_journal(self.layout.journal, self.layout.compacting, progress)
        OffsetQueues.wipe(self.layout.queue_dir)
        self._queues = OffsetQueues(self.layout.queue_dir, self.order)
        for offset, priority in result.kept:
            self._queues.push(offset, priority)
        self._journal = JournalWriter(self.layout.journal, result.bytes_after, fsync=self.fsync)
        self._records = {"pushes": len(result.kept), "dones": 0}
        log.info("compacted %s: journal %s -> %s bytes", self.path, f"{result.bytes_before:,}", f"{result.bytes_after:,}")
        return result

    def close(self) -> None:
        """Checkpoint: re-queue what is in flight, write the queue headers and the cursor, unlock."""
        if self._closed:
            return
        self._closed = True
        try:
            self._checkpoint_and_close()
        finally:
            self._release_files()
            self._lock.release()

    def _checkpoint_and_close(self) -> None:
        requeued = 0
        for seq, request in self._inflight.items():
            if seq >= 0:
                self._queues.push(seq, request.priority)
                self._count_pending(request.priority, 1)
                requeued += 1
        memory_lost = len(self._memq) + sum(1 for s in self._inflight if s < 0)
        self._inflight.clear()
        self._counters["requeued"] = requeued
        if memory_lost:
            self._counters["memory_lost"] = memory_lost
            log.warning("%d requests that could not be stored on disk are lost at close", memory_lost)
            for request in self._memory_requests():
                self._count_pending(request.priority, -1)
        if self._should_compact():
            self._compact(None)
        active = self._queues.close()
        self._sync_queue_files()
        OffsetQueues.write_active(self.layout.active, active)
        self._seen.sync()
        self._journal.sync()
        checkpoint.write_clean(
            self.layout.cursor, self._journal.size, os.path.getsize(self.layout.seen),
            {p: n for p, n in self._pending.items() if n}, self._records["pushes"], self._records["dones"])

    def _memory_requests(self) -> list[Request]:
        out = []
        while (request := self._memq.pop()) is not None:
            out.append(request)
        return out

    def _should_compact(self) -> bool:
        """At close: when the journal is big and most of its records are dead."""
        if self._journal.size < AUTO_COMPACT_MIN_BYTES:
            return False
        records = self._records["pushes"] + self._records["dones"]
        live = sum(n for p, n in self._pending.items())
        return records > 3 * live

    def _sync_queue_files(self) -> None:
        """fsync every queue file, so that a clean checkpoint also survives a power cut."""
        for root, _dirs, files in os.walk(self.layout.queue_dir):
            for name in files:
                fsync_path(os.path.join(root, name))

    def _release_files(self) -> None:
        for part in ("_journal", "_seen"):
            obj = getattr(self, part, None)
            if obj is not None:
                obj.close()

    def _check_open(self) -> None:
        if self._closed:
            raise FrontierClosed(f"the frontier of {self.path} is closed; open it again with Frontier(path)")

    def __enter__(self) -> Frontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self)} pending, {len(self._inflight)} in flight"
        return f"<Frontier {self.path} ({state})>"
