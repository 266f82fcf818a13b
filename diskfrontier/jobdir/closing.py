"""``Closing``: compaction and the clean close of the job directory's frontier.

Both make the files consistent again. A compaction rewrites the journal to hold only
what is pending and failed (``maintenance/compaction.py``) and rebuilds the queues over
it; a clean close gives back what is in flight, compacts when most of the journal is
finished work and quick to rewrite, writes the queue files, the seen index and the host
file, and then a clean checkpoint naming them all. A close after an interrupted call
writes none of it (the next open rebuilds from the journal); either way the files are
closed. The caller (the façade) holds the lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator

from ..errors import FrontierError
from ..files.atomic import fsync_path
from ..files.writeerrors import raise_named
from ..request.model import Request
from . import checkpoint, records
from .dispatch import Dispatch
from .hostfile import save_host_state
from .journal import JournalWriter
from .maintenance.compaction import Compacted, install, write_compacted
from .queues import OffsetQueues, queue_crc
from .records import host_body
from .replay import Progress
from .shared import Shared

log = logging.getLogger("diskfrontier")

AUTO_COMPACT_MIN_BYTES = 1 << 20
AUTO_COMPACT_MAX_BYTES = 16 << 20  # larger journals take seconds: left to 'diskfrontier compact', and said so
INDEX_MIN_NEW_KEYS = 1 << 16  # a clean close saves the seen index when this many keys are not in the saved one
_NAN = float("nan")


class Closing:
    """Compaction and the close, over the shared state (and the pop side's host buffers)."""

    def __init__(self, state: Shared, dispatch: Dispatch) -> None:
        self.state = state
        self.dispatch = dispatch

    def compact(self, progress: Progress | None) -> Compacted:
        """``Frontier.compact``: refused while requests are in flight or after an interrupted call."""
        st = self.state
        if st.inflight:
            raise FrontierError(
                f"cannot compact with {len(st.inflight)} requests in flight: done() them or close() first")
        if st.dirty:
            raise FrontierError(
                f"cannot compact {st.path}: an earlier call was interrupted ({st.dirty}); close it and "
                f"open it again first")
        return self._compact(progress)

    def _host_records(self) -> Iterator[bytes]:
        """A HOST record body for each host with a setting, done or failed requests (what compaction keeps)."""
        st = self.state
        counts, hot = st.hosts.counts, st.hosts.hot
        failing = {counts.add(records.slot_of(st.journal.read_body(target))) for target in st.failed}
        for hid in counts.ids():
            host, done = hot.get(hid), counts.done[hid]
            if done or (host is not None and host.has_settings) or hid in failing:
                delay, blocked_until, budget = (None, 0.0, None) if host is None else (
                    host.delay, host.blocked_until, host.budget)
                yield host_body(counts.name_bytes(hid), _NAN if delay is None else delay, blocked_until,
                                -1 if budget is None else budget, done)

    def _compact(self, progress: Progress | None) -> Compacted:
        st = self.state
        layout = st.layout
        st.seen.sync()
        # Until the rename, a failure (a full disk) leaves the old journal and this frontier as they were.
        st.compacting = True
        try:
            hosts = tuple(self._host_records())
            if st.paused_since is not None:  # the pause goes on in the new journal
                hosts += (records.pause_body(True, st.paused_since),)
            result = write_compacted(layout.journal, layout.compacting, salt=st.salt, floor=st.floor,
                                     progress=progress, hosts=hosts)
        finally:
            st.compacting = False
        try:
            # valid for the old journal and the new
            checkpoint.write_open(layout.cursor, st.ident, result.bytes_after, st.seen.tail(),
                                  st.seen.index_record, result.crc)
            st.queues.close()
            st.journal.close()
            install(layout.journal, layout.compacting)
            OffsetQueues.wipe(layout.queue_dir)
            st.queues = OffsetQueues(layout.queue_dir, st.order)
            st.hosts.drain(time.time())
            st.delayed.clear()
            now = time.time()
            for offset, priority, not_before in result.kept:
                if not_before > now:
                    st.delayed.add(not_before, offset, priority)
                else:
                    st.queues.push(offset, priority)
            st.delayed_due = st.delayed.next_due()
            self.dispatch.forget_reads()
            st.journal = JournalWriter(layout.journal, result.bytes_after, salt=st.salt, fsync=st.fsync,
                                       crc=result.crc)
        except BaseException as exc:
            st.broken = st.dirty = f"{type(exc).__name__} during compaction: {exc}"
            raise_named(layout.compacting, exc)
            raise
        st.floor, st.floor_crc = result.bytes_after, result.crc
        st.pushes, st.dones = len(result.kept) + len(result.failed), len(result.failed)
        st.live_bytes = result.live_bytes
        st.failed = result.failed
        st.last_record = result.last_record
        log.info("compacted %s: journal %s -> %s bytes", st.path, f"{result.bytes_before:,}",
                 f"{result.bytes_after:,}")
        return result

    def checkpoint_and_close(self) -> None:
        """Give back what is in flight, compact if it pays, write every file and a clean checkpoint."""
        st = self.state
        layout = st.layout
        requeued = 0
        for seq, request in st.inflight.items():
            st.hosts.returned(request._hid, done=False, pending=int(seq >= 0))
            if seq >= 0:
                priority = records.priority_of(st.journal.read_body(seq))  # the journal's, not request.priority
                st.queues.push(seq, priority)
                st.count_pending(priority, 1)
                requeued += 1
        memory_lost = st.memory_only()
        st.inflight.clear()
        st.counters["requeued"] = requeued
        if memory_lost:
            st.counters["memory_lost"] = memory_lost
            log.warning("%d requests that could not be stored on disk are lost at close", memory_lost)
            for request in self._memory_requests():
                st.count_pending(request.priority, -1)
                st.hosts.counts.pending[st.hosts.hid(request.slot)] -= 1
        if self._should_compact():
            self._compact(None)
        self.dispatch.return_buffers()
        queued = st.queues.sizes()
        active = st.queues.close()
        self._sync_queue_files()
        OffsetQueues.write_active(layout.active, active)
        st.seen.sync()
        st.journal.sync()
        index = st.seen.save_index(min_new_keys=INDEX_MIN_NEW_KEYS)
        pending = {p: n for p, n in st.pending.items() if n}
        hosts_file = save_host_state(layout.hosts, st.hosts, st.delayed, st.failed)
        checkpoint.write_clean(
            layout.cursor, st.ident, journal_bytes=st.journal.size, last_record=st.last_record,
            seen_tail=st.seen.tail(), pending=pending,
            queues={p: queue_crc(layout.queue_dir, p) for p in queued},
            pushes=st.pushes, dones=st.dones, live_bytes=st.live_bytes,
            hosts_file=hosts_file, seen_index=index, journal_crc=st.journal.crc, paused_since=st.paused_since)

    def _memory_requests(self) -> list[Request]:
        out = []
        while (request := self.state.memq.pop()) is not None:
            out.append(request)
        return out

    def _should_compact(self) -> bool:
        """At close: when the journal is big, most of its records are dead, and it is quick to do.

        A journal over ``AUTO_COMPACT_MAX_BYTES`` is never compacted inside ``close()``
        (a Ctrl-C would look hung): the log says so, ``inspect`` shows what is reclaimable,
        and ``diskfrontier compact`` or ``compact()`` does it with a progress bar.
        """
        st = self.state
        size = st.journal.size
        if size < AUTO_COMPACT_MIN_BYTES:
            return False
        live = sum(n for p, n in st.pending.items()) + 2 * len(st.failed)  # the records compaction keeps
        if st.pushes + st.dones <= 3 * live:
            return False
        if size > AUTO_COMPACT_MAX_BYTES:
            log.info("%s: most of its %s-byte journal is finished work; 'diskfrontier compact %s' reclaims it "
                     "(not done at close, where it would take a while)", st.path, f"{size:,}", st.path)
            return False
        return True

    def _sync_queue_files(self) -> None:
        """fsync every queue file, so that a clean checkpoint also survives a power cut."""
        for root, _dirs, files in os.walk(self.state.layout.queue_dir):
            for name in files:
                fsync_path(os.path.join(root, name))

    def close(self) -> None:
        """The files' part of ``Frontier.close``: a clean checkpoint (``checkpoint_and_close``) unless an
        interrupted call left the state dirty (then a warning: the next open rebuilds it from the
        journal); every file is closed whatever happens."""
        st = self.state
        try:
            if st.dirty is None:
                self.checkpoint_and_close()
            else:
                log.warning("closing %s without a clean checkpoint (%s): it is rebuilt from its journal at the "
                            "next open", st.path, st.dirty)
        finally:
            self.release_files()

    def release_files(self) -> None:
        """Close the files without writing anything more (after a dirty close, or a checkpoint that failed)."""
        st = self.state
        queues = getattr(st, "queues", None)
        if queues is not None:
            queues.abandon()  # after a dirty close, or a checkpoint that failed half-way
        for part in ("journal", "seen"):
            obj = getattr(st, part, None)
            if obj is not None:
                obj.close()

    def forget_files(self) -> None:
        """Close this process's copies of the descriptors without writing anything (a forked child)."""
        st = self.state
        journal, seen = getattr(st, "journal", None), getattr(st, "seen", None)
        for owner, name in ((journal, "fd"), (seen, "fd"), (seen, "sums_fd")):
            fd = getattr(owner, name, -1)
            if fd >= 0:
                setattr(owner, name, -1)  # a later close() of the part must not close the number again
                with contextlib.suppress(OSError):
                    os.close(fd)
