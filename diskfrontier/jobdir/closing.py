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
from collections.abc import Callable

from ..core.errors import FrontierError
from ..files.atomic import fsync_path
from ..request.model import Request
from . import checkpoint, records
from .dispatch import Dispatch
from .hostfile import HostFileRecord, save_host_state
from .maintenance.compaction import Compacted
from .queues import OffsetQueues, queue_crc
from .replay import Progress
from .seenindex import IndexRecord
from .shared import Shared

log = logging.getLogger("diskfrontier")

AUTO_COMPACT_MIN_BYTES = 1 << 20
AUTO_COMPACT_MAX_BYTES = 16 << 20  # larger journals take seconds: left to 'diskfrontier compact', and said so
INDEX_MIN_NEW_KEYS = 1 << 16  # a clean close saves the seen index when this many keys are not in the saved one
_NAN = float("nan")


class Closing:
    """Compaction and the close, over the shared state (and the pop side's host buffers)."""

    def __init__(self, state: Shared, dispatch: Dispatch, compact_now: Callable[[Progress | None], Compacted]) -> None:
        self.state = state
        self.dispatch = dispatch
        self.compact_now = compact_now  # a compaction in the calling thread, swapped in (``Upkeep.compact_now``)

    def compact(self, progress: Progress | None) -> Compacted:
        """``Frontier.compact``: refused after an interrupted call (the next open rebuilds the state first)."""
        st = self.state
        if st.dirty:
            raise FrontierError(
                f"cannot compact {st.path}: an earlier call was interrupted ({st.dirty}); close it and "
                f"open it again first")
        return self.compact_now(progress)

    def checkpoint_and_close(self) -> None:
        """Give back what is in flight, compact if it pays, write every file and a clean checkpoint."""
        st = self.state
        layout = st.layout
        requeued = self._give_back()
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
            self.compact_now(None)
        self.dispatch.return_buffers()
        st.queues.purge_skipped()
        queued = st.queues.sizes()
        active = st.queues.close()
        self._sync_queue_files()
        OffsetQueues.write_active(layout.active, active)
        st.seen.sync()
        st.journal.sync()
        index = st.seen.save_index(min_new_keys=INDEX_MIN_NEW_KEYS)
        pending = {p: n for p, n in st.pending.items() if n}
        hosts_file = save_host_state(layout.hosts, st.hosts, st.delayed, st.failed)
        with st.cursor_lock:
            st.sealed = True
            self._write_clean(queued, pending, hosts_file, index)

    def _write_clean(self, queued: dict[int, int], pending: dict[int, int], hosts_file: HostFileRecord,
                     index: IndexRecord | None) -> None:
        st = self.state
        layout = st.layout
        checkpoint.write_clean(
            layout.cursor, st.ident, journal_bytes=st.journal.size, last_record=st.last_record,
            seen_tail=st.seen.tail(), pending=pending,
            queues={p: queue_crc(layout.queue_dir, p) for p in queued},
            pushes=st.pushes, dones=st.dones, live_bytes=st.live_bytes,
            hosts_file=hosts_file, seen_index=index, journal_crc=st.journal.crc, paused_since=st.paused_since,
            states=st.states, failed_bytes=st.failed_bytes, compactions=st.compactions)

    def _give_back(self) -> int:
        """Put what is in flight back at the end of its queue, with a RETRY record each (same attempts) in one
        write, so that the journal's order is still the queues' order (a compaction or a recovery after this
        close keeps it); how many were stored ones."""
        st = self.state
        given: list[tuple[int, bytes]] = []  # (the request's offset, its RETRY body)
        for seq in st.inflight:
            if seq >= 0:
                given.append((seq, records.returned(st.journal.read_body(seq), seq)))
        if given:
            data, offsets = records.frame_all(st.journal.size, [body for _seq, body in given], st.salt)
            st.journal.write(data)
            try:
                for (seq, body), offset in zip(given, offsets, strict=True):
                    priority = records.priority_of(body)  # the journal's, not request.priority
                    st.queues.push(offset, priority)
                    st.count_pending(priority, 1)
                    st.live_bytes += records.FRAME.size + len(body) - st.inflight[seq]._size
                st.pushes += len(given)
                st.dones += len(given)
                st.last_record = offsets[-1]
            except BaseException as exc:
                st.interrupted("close", exc)
                raise
        for seq, request in st.inflight.items():
            st.hosts.returned(request._hid, done=False, pending=int(seq >= 0))
        return len(given)

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

    def leave(self) -> None:
        """What a close writes before its checkpoint: ``status.json`` removed (nobody runs the crawl now) and
        the outcome counters saved."""
        st = self.state
        with contextlib.suppress(FileNotFoundError):
            os.unlink(st.layout.status)
        if st.outcomes is not None:
            st.outcomes.save_at_close(st.counters)

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
