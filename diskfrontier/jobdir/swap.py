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
from dataclasses import dataclass
from typing import Any

from ..core.errors import JobDirCorrupt
from ..files.atomic import fsync_dir
from ..files.safefs import open_fd, remove_tree
from ..politeness.delayed import DelayedRequests
from . import checkpoint
from .dispatch import Dispatch
from .journal import JournalWriter
from .maintenance.steps import reached
from .queues import OffsetQueues
from .seenindex import IndexRecord
from .shared import Shared
from .statefile import StateRecord
from .tailcopy import REQUEUED, TailCopy, load_map

log = logging.getLogger("diskfrontier")

_CATCH_UP_ROUNDS = 16
_LEFT_FOR_THE_LOCK = 16 << 10  # bytes of tail left to copy under the lock


def take_seen_index(st: Shared, result: dict[str, Any], params: dict[str, Any]) -> IndexRecord | None:
    """Put the seen index a job saved in place of ``requests.seen.index`` (the caller holds the cursor's lock and
    then names it); the record of the index in place."""
    if result.get("seen_index") is None:
        return st.seen.index_record
    os.replace(os.path.join(st.path, params["index_out"]), st.layout.seen_index)
    return IndexRecord.from_json(result["seen_index"])


def install(new_path: str, path: str) -> None:
    """Rename the new journal over the old one: the moment a compaction takes effect."""
    os.replace(new_path, path)


@dataclass
class _Staged:
    """What the swap prepared outside the lock, as of the tail copied then (``pos``)."""

    pos: int
    mark: int  # the digest's events, pushes and fails then
    pushes: int
    fails: int
    held: DelayedRequests  # the new journal's requests waiting for a time
    held_due: dict[int, float]  # new offset -> due, of each request ``held`` holds
    skip: set[int]  # entries of the new queues not to hand out
    skipped: dict[int, int]  # priority -> how many of them
    failed: dict[int, int]  # new request offset -> new FAIL offset, in FAIL order
    tail: dict[int, tuple[int, int, int]]  # the tail's requests then: old offset -> (new offset, priority, size)
    codes: array  # the priority code of each request pending at the compaction
    by_code: list[int]
    counts: dict[str, int]  # the new state's pushes, dones, live and failed bytes
    priorities: list[int]  # the new queue folder's priorities


def _take(new: int, priority: int, staged: _Staged) -> None:
    """The request at ``new`` in the new journal no longer waits: out of the delayed ones, or skipped in the queues."""
    due = staged.held_due.pop(new, None)
    if due is not None:
        staged.held.discard(new, due)
        return
    if new not in staged.skip:
        staged.skip.add(new)
        staged.skipped[priority] = staged.skipped.get(priority, 0) + 1


def _new_of(copy: TailCopy, old: int) -> int:
    """The new offset of the request whose record was at ``old``: pending or failed at the compaction, or the tail's."""
    moved = copy.moved
    if old >= moved.at:
        return copy.digest.moved[old]
    i = moved.pending_index(old)
    if i >= 0:
        return int(moved.new[i])
    i = moved.failed_index(old)
    if i < 0:
        raise JobDirCorrupt("requests.urls", old, "a request the tail names was neither pending nor failed")
    return int(moved.failed_new[i])


class Swap:
    """The swap of one open job directory's compactions (called by ``Upkeep`` when a compaction's job ends)."""

    def __init__(self, state: Shared, mutex: threading.RLock, dispatch: Dispatch) -> None:
        self.state = state
        self.mutex = mutex
        self.dispatch = dispatch
        self.last: dict[str, Any] = {}  # what the last swap did (``Frontier.compact`` reports it)
        self.aside = ""  # where the old queue folder was moved
        self.held_for = 0.0  # seconds the last swap held the frontier's lock

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
        fd = open_fd(new_path, os.O_RDWR)
        try:
            for _ in range(_CATCH_UP_ROUNDS):
                copy.copy(st.layout.journal, fd)
                if st.journal.size - copy.pos < _LEFT_FOR_THE_LOCK:
                    break
            staged = self._stage(copy, params, extra)
            reached("swap-caught-up")
            before = (st.floor, st.floor_crc, list(st.states))
            with st.cursor_lock:
                if st.sealed or st.generation != generation:
                    return False
                st.seen.index_record = index = take_seen_index(st, result, params)
                checkpoint.write_open(st.layout.cursor, st.ident, result["compacted_end"],
                                      (params["seen_tail"][0], params["seen_tail"][1]), index,
                                      result["compacted_crc"], [record, *st.states][:4], st.compactions + 1)
            reached("swap-named")
            try:
                with self.mutex:
                    began = time.perf_counter()
                    if st.generation != generation or st.sealed or st.broken or st.dirty:
                        swapped = False
                    else:
                        self._swap(copy, fd, new_path, record, result, params, staged)
                        fd = -1  # the journal writer holds it now
                        swapped = True
                    self.held_for = time.perf_counter() - began
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
        log.info("compacted %s: journal %s -> %s bytes (the lock held %.1f ms)", st.path,
                 f"{self.last['bytes_before']:,}", f"{self.last['bytes_after']:,}", 1000 * self.held_for)
        return True

    def _stage(self, copy: TailCopy, params: dict[str, Any], extra: dict[str, Any]) -> _Staged:
        """Step 1 of the module docstring, as of the tail copied so far: everything that does not need the lock."""
        st = self.state
        moved, digest = copy.moved, copy.digest
        due_at, held_at, codes = array("d"), array("Q"), array("I")
        due_at.frombytes(extra["d_due"])
        held_at.frombytes(extra["d_offset"])
        codes.frombytes(extra["codes"])
        staged = _Staged(
            copy.pos, len(digest.events), len(digest.pushes), len(digest.fails),
            DelayedRequests.from_arrays(extra["d_due"], extra["d_offset"], extra["d_priority"]),
            dict(zip(held_at, due_at, strict=True)), set(), {}, {}, {}, codes, extra["priorities_by_code"],
            extra["counts"], [])
        by_code = staged.by_code
        for old in digest.finished:  # pending at the compaction and finished since: never handed out again
            if old < moved.at:
                i = moved.pending_index(old)
                if i >= 0:
                    _take(moved.new[i], by_code[codes[i]], staged)
        for old, new, fail_at in zip(moved.failed_old, moved.failed_new, moved.fails_new, strict=True):
            if old not in digest.requeued:
                staged.failed[new] = fail_at
        for old, fail_at, _size in digest.fails:
            if old not in digest.requeued:
                staged.failed[_new_of(copy, old)] = fail_at
        now = time.time()
        queues = OffsetQueues(os.path.join(st.path, params["queues_out"]), st.order, extra["priorities"])
        try:
            for old, new, priority, due, size in digest.pushes:
                staged.tail[old] = (new, priority, size)
                if old in digest.finished:
                    continue
                if due > now:
                    staged.held.add(due, new, priority)
                    staged.held_due[new] = due
                else:
                    queues.push(new, priority)
            staged.priorities = queues.close()
        except BaseException:
            queues.abandon()
            raise
        return staged

    def _swap(self, copy: TailCopy, fd: int, new_path: str, record: StateRecord, result: dict[str, Any],
              params: dict[str, Any], staged: _Staged) -> None:
        """Steps 2 and 3 of the module docstring (the frontier's lock is held): only what happened since the
        staging, and the requests in flight, are worked out here."""
        st = self.state
        layout = st.layout
        copy.copy(layout.journal, fd)
        if copy.pos != st.journal.size:
            raise JobDirCorrupt(layout.journal, copy.pos, "the journal's last records could not be copied whole")
        moved, digest = copy.moved, copy.digest
        late = {old: (new, priority, due, size) for old, new, priority, due, size in digest.pushes[staged.pushes:]}

        def no_longer_waits(old: int) -> None:
            if old in late:
                return  # pushed since the staging: not in the new queues, and not put there below
            if old < moved.at:
                i = moved.pending_index(old)
                _take(int(moved.new[i]), staged.by_code[staged.codes[i]], staged)
            else:
                new, priority, _size = staged.tail[old]
                _take(new, priority, staged)

        for kind, old in digest.events[staged.mark:]:
            if kind == REQUEUED:
                staged.failed.pop(_new_of(copy, old), None)
            else:
                no_longer_waits(old)
        for old, fail_at, _size in digest.fails[staged.fails:]:
            if old not in digest.requeued:
                staged.failed[_new_of(copy, old)] = fail_at

        # Where each request in flight is now (handed out before or after the staging), and its record's size.
        inflight: dict[int, Any] = {}
        sizes: dict[int, int] = {}
        for seq, request in st.inflight.items():
            if seq < 0:
                inflight[seq] = request
                continue
            if seq < moved.at:
                i = moved.pending_index(seq)
                if i < 0:
                    raise JobDirCorrupt(layout.journal, seq, "a request in flight was not pending at the compaction")
                new, size = int(moved.new[i]), int(moved.sizes[i])
            elif seq in late:
                new, size = late[seq][0], late[seq][3]
            else:
                new, _priority, size = staged.tail[seq]
            no_longer_waits(seq)
            inflight[new] = request
            sizes[new] = size
        waiting = [(new, priority, due) for old, (new, priority, due, _size) in late.items()
                   if old not in digest.finished and old not in st.inflight]
        writer = JournalWriter(new_path, copy.end, salt=st.salt, fsync=st.fsync, crc=copy.crc, fd=fd)
        if st.fsync:
            os.fsync(fd)
        now = time.time()

        # The swap: from here a failure leaves a frontier that must be opened again.
        held = staged.held
        try:
            st.queues.abandon()
            aside = f"{layout.queue_dir}.old.{secrets.randbits(48):x}"
            os.rename(layout.queue_dir, aside)
            os.rename(os.path.join(st.path, params["queues_out"]), layout.queue_dir)
            queues = OffsetQueues(layout.queue_dir, st.order, staged.priorities)
            queues.skip, queues.skipped = staged.skip, staged.skipped
            for new, priority, due in waiting:
                if due > now:
                    held.add(due, new, priority)
                else:
                    queues.push(new, priority)
            queues.skip_entries({})  # the top of the queues is one to hand out
            st.queues = queues
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
        st.failed = staged.failed
        st.hosts.drain(now)
        st.delayed = held
        st.delayed_due = held.next_due()
        self.dispatch.forget_reads()
        counts = staged.counts
        st.pushes = counts["pushes"] + digest.push_count
        st.dones = counts["dones"] + digest.done_count
        st.live_bytes = counts["live_bytes"] + digest.live_delta
        st.failed_bytes = counts["failed_bytes"] + digest.failed_delta
        st.last_record = copy.last
        st.floor, st.floor_crc = result["compacted_end"], result["compacted_crc"]
        st.states = [record]
        st.generation += 1
        st.compactions += 1
        self.aside = aside
        self.last = {"bytes_before": result["bytes_before"], "bytes_after": copy.end, "pending": result["pending"],
                     "failed": len(staged.failed), "dropped_records": result["dropped_records"]}

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
