"""``Swap``: a compacted journal made beside the running frontier put in the old one's place.

The compaction's job (``maintenance/compaction.py``) has written the new journal up to some
point of the old one's tail, its state, its queue files, and the map of where each old record
went (``tailcopy.py``). The swap, in the frontier's own process:

1. Outside the frontier's lock: reads the map, builds the new delayed requests, and copies the
   tail the job left (``TailCopy``) until little is left; then writes a checkpoint valid for
   both journals (the new one's state named first, the old ones after it; a floor both have).
2. Under the lock, where the journal does not grow: copies the last records; works out, from
   what the tail did and what the frontier holds, the new offset of every request in flight,
   the failed requests, and which entries of the new queues were handed out or finished since
   the job began (they are skipped: ``OffsetQueues.skip_entries``); pushes the requests the
   tail added that wait; prepares the new queues in their folder. Until here a failure (a full
   disk) changes nothing: the compaction is abandoned and the frontier goes on.
3. Still under the lock, the swap itself: the queue folders are exchanged, the new journal is
   renamed over the old one (the moment the new journal becomes the truth: before it a kill
   leaves the old journal, after it the new one, and both rebuild the same requests), and the
   frontier's state takes the new offsets. A failure inside this step leaves the frontier
   unable to go on (``broken``): closed and opened again, it is rebuilt from whichever journal
   is there, and nothing is lost.
4. After the lock: the folder's rename made durable, the checkpoint naming only the new state,
   the old files removed.

The host table, the pending counts, the requests kept in memory and the pause do not depend on
offsets and are left as they are; the host buffers are emptied (their requests are in the new
queues, in the same order).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import threading
import time
from array import array
from bisect import bisect_left
from typing import Any

from ..errors import JobDirCorrupt
from ..files.atomic import fsync_dir
from ..files.safefs import open_fd, remove_tree
from ..politeness.delayed import DelayedRequests
from . import checkpoint
from .dispatch import Dispatch
from .journal import JournalWriter
from .maintenance.steps import reached
from .queues import OffsetQueues
from .shared import Shared
from .statefile import StateRecord
from .tailcopy import TailCopy, load_map

log = logging.getLogger("diskfrontier")

_CATCH_UP_ROUNDS = 16
_LEFT_FOR_THE_LOCK = 16 << 10  # bytes of tail left to copy under the lock


def install(new_path: str, path: str) -> None:
    """Rename the new journal over the old one: the moment a compaction takes effect."""
    os.replace(new_path, path)


class Swap:
    """The swap of one open job directory's compactions (called by ``Upkeep`` when a compaction's job ends)."""

    def __init__(self, state: Shared, mutex: threading.RLock, dispatch: Dispatch) -> None:
        self.state = state
        self.mutex = mutex
        self.dispatch = dispatch
        self.last: dict[str, Any] = {}  # what the last swap did (``Frontier.compact`` reports it)
        self.aside = ""  # where the old queue folder was moved

    def __call__(self, result: dict[str, Any], params: dict[str, Any]) -> bool:
        """Swap the job's journal in; False if the frontier moved on meanwhile (closed, rebuilt)."""
        st = self.state
        generation = params["generation"]
        if st.generation != generation or st.sealed or st.broken:
            return False
        root = st.path
        new_path = os.path.join(root, result["journal_out"])
        copy, extra = load_map(os.path.join(root, params["map_out"]), st.salt)
        record = StateRecord.from_json(result["state"])
        held = DelayedRequests.from_arrays(extra["d_due"], extra["d_offset"], extra["d_priority"])
        held_at = array("Q")
        held_at.frombytes(extra["d_offset"])
        held_due = array("d")
        held_due.frombytes(extra["d_due"])
        codes = array("I")
        codes.frombytes(extra["codes"])
        priorities: list[int] = extra["priorities_by_code"]
        fd = open_fd(new_path, os.O_RDWR)
        try:
            for _ in range(_CATCH_UP_ROUNDS):
                copy.copy(st.layout.journal, fd)
                if st.journal.size - copy.pos < _LEFT_FOR_THE_LOCK:
                    break
            reached("swap-caught-up")
            before = (st.floor, st.floor_crc, list(st.states))
            with st.cursor_lock:
                if st.sealed or st.generation != generation:
                    return False
                checkpoint.write_open(st.layout.cursor, st.ident, result["compacted_end"],
                                      (params["seen_tail"][0], params["seen_tail"][1]), st.seen.index_record,
                                      record.journal_crc, [record, *st.states][:4], st.compactions + 1)
            reached("swap-named")
            try:
                with self.mutex:
                    if st.generation != generation or st.sealed or st.broken or st.dirty:
                        swapped = False
                    else:
                        self._swap(copy, fd, new_path, record, result, params, held, held_at, held_due, codes,
                                   priorities, extra)
                        fd = -1  # the journal writer holds it now
                        swapped = True
            except BaseException:
                self._restore_cursor(generation, *before)
                raise
            if not swapped:
                self._restore_cursor(generation, *before)
                return False
        finally:
            if fd >= 0:
                os.close(fd)
        self._after(record, params)
        reached("swap-done")
        log.info("compacted %s: journal %s -> %s bytes", st.path, f"{self.last['bytes_before']:,}",
                 f"{self.last['bytes_after']:,}")
        return True

    def _swap(self, copy: TailCopy, fd: int, new_path: str, record: StateRecord, result: dict[str, Any],
              params: dict[str, Any], held: DelayedRequests, held_at: array, held_due: array, codes: array,
              priorities: list[int], extra: dict[str, Any]) -> None:
        """Steps 2 and 3 of the module docstring (the frontier's lock is held)."""
        st = self.state
        layout = st.layout
        copy.copy(layout.journal, fd)
        if copy.pos != st.journal.size:
            raise JobDirCorrupt(layout.journal, copy.pos, "the journal's last records could not be copied whole")
        moved, digest = copy.moved, copy.digest
        now = time.time()

        # Where each request in flight is now, and its record's size there.
        inflight: dict[int, Any] = {}
        sizes: dict[int, int] = {}
        tail_sizes = {old: size for old, _new, _p, _due, size in digest.pushes}
        taken_at_compaction: dict[int, int] = {}  # new offset -> priority, of requests the job wrote as waiting
        for seq, request in st.inflight.items():
            if seq < 0:
                inflight[seq] = request
                continue
            if seq >= moved.at:
                new = digest.moved[seq]
                sizes[new] = tail_sizes[seq]
            else:
                i = moved.pending_index(seq)
                if i < 0:
                    raise JobDirCorrupt(layout.journal, seq, "a request in flight was not pending at the compaction")
                new = moved.new[i]
                sizes[new] = moved.sizes[i]
                taken_at_compaction[new] = priorities[codes[i]]
            inflight[new] = request
        for old in digest.finished:
            if old < moved.at:
                i = moved.pending_index(old)
                if i >= 0:
                    taken_at_compaction[moved.new[i]] = priorities[codes[i]]

        # The failed requests, in the order they failed.
        failed: dict[int, int] = {}
        for old, new, fail_at in zip(moved.failed_old, moved.failed_new, moved.fails_new, strict=True):
            if old not in digest.requeued:
                failed[new] = fail_at
        for old, fail_at, _size in digest.fails:
            if old not in digest.requeued:
                failed[digest.moved[old] if old >= moved.at else moved.new[moved.pending_index(old)]] = fail_at

        # Entries of the new queues and delayed requests that are not waiting any more.
        skipped: dict[int, int] = {}
        for new, priority in taken_at_compaction.items():
            j = bisect_left(held_at, new)
            if j < len(held_at) and held_at[j] == new:
                held.discard(new, held_due[j])
            else:
                skipped[new] = priority
        in_flight_old = {seq for seq in st.inflight if seq >= 0}
        waiting = [(new, priority, due) for old, new, priority, due, _size in digest.pushes
                   if old not in digest.finished and old not in in_flight_old]

        # The new queues, in their own folder until the swap.
        staged = os.path.join(st.path, params["queues_out"])
        queues = OffsetQueues(staged, st.order, extra["priorities"])
        try:
            for new, priority, due in waiting:
                if due > now:
                    held.add(due, new, priority)
                else:
                    queues.push(new, priority)
            active = queues.close()
        except BaseException:
            queues.abandon()
            raise
        writer = JournalWriter(new_path, copy.end, salt=st.salt, fsync=st.fsync, crc=copy.crc, fd=fd)
        if st.fsync:
            os.fsync(fd)

        # The swap: from here a failure leaves a frontier that must be opened again.
        try:
            st.queues.abandon()
            aside = f"{layout.queue_dir}.old.{secrets.randbits(48):x}"
            os.rename(layout.queue_dir, aside)
            os.rename(staged, layout.queue_dir)
            st.queues = OffsetQueues(layout.queue_dir, st.order, active)
            st.queues.skip_entries(skipped)
            reached("swap-queues")
            install(new_path, layout.journal)
            reached("swap-installed")
            writer.path = layout.journal
            old_journal, st.journal = st.journal, writer
            old_journal.close()
        except BaseException as exc:
            st.broken = st.dirty = f"{type(exc).__name__} while a compaction was swapped in: {exc}"
            raise
        for new, request in inflight.items():
            if new >= 0:
                request._seq = new
                request._size = sizes[new]
        st.inflight = inflight
        st.failed = failed
        st.hosts.drain(now)
        st.delayed = held
        st.delayed_due = held.next_due()
        self.dispatch.forget_reads()
        counts = extra["counts"]
        st.pushes = counts["pushes"] + digest.push_count
        st.dones = counts["dones"] + digest.done_count
        st.live_bytes = counts["live_bytes"] + digest.live_delta
        st.failed_bytes = counts["failed_bytes"] + digest.failed_delta
        st.last_record = copy.last
        st.floor, st.floor_crc = result["compacted_end"], record.journal_crc
        st.states = [record]
        st.generation += 1
        st.compactions += 1
        self.aside = aside
        self.last = {"bytes_before": result["bytes_before"], "bytes_after": copy.end, "pending": result["pending"],
                     "failed": len(failed), "dropped_records": result["dropped_records"]}

    def _restore_cursor(self, generation: int, floor: int, floor_crc: int | None, states: list[StateRecord]) -> None:
        """A swap that did not happen: the checkpoint names the old journal's states again (best effort)."""
        st = self.state
        with st.cursor_lock, contextlib.suppress(OSError):
            if not st.sealed and st.generation == generation:
                checkpoint.write_open(st.layout.cursor, st.ident, floor, st.seen.tail(), st.seen.index_record,
                                      floor_crc, states, st.compactions)

    def _after(self, record: StateRecord, params: dict[str, Any]) -> None:
        """Step 4: the rename made durable, the checkpoint naming only the new state, the old files removed."""
        st = self.state
        root = st.path
        with contextlib.suppress(OSError):
            fsync_dir(root)
        with st.cursor_lock:
            if not st.sealed and st.states == [record]:
                with contextlib.suppress(OSError):
                    checkpoint.write_open(st.layout.cursor, st.ident, st.floor,
                                          (params["seen_tail"][0], params["seen_tail"][1]), st.seen.index_record,
                                          st.floor_crc, [record], st.compactions)
        with contextlib.suppress(OSError):
            remove_tree(self.aside)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(root, params["map_out"]))
        for name in os.listdir(root):
            if name.startswith("requests.state.") and name != record.name and name != params["name"]:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(root, name))
