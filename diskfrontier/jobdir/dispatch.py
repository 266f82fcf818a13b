"""``Dispatch``: the pop side of the job directory's frontier — hosts, times and what is in flight.

Which request is handed out next: from the priority queues, or, once host rules or times
are in play, from the per-host buffers of the host schedule (``politeness/schedule.py``),
with the requests that waited for a time let in when they are due. A request handed
out is read back from its journal record (``records.load``) and kept in ``inflight``
until the ledger finishes it. Nothing here writes to the journal. The caller (the
façade) holds the lock and has checked that the frontier is open.
"""

from __future__ import annotations

import heapq
import itertools
import time
from array import array
from collections.abc import Iterable

from ..contract.values import FailedRequest
from ..core.errors import JobDirCorrupt
from ..politeness.schedule import Host, HostInfo, buffer_top
from ..request.model import PRIORITY_MAX, Request
from . import records
from .shared import Shared

_PRIORITY_TOP = PRIORITY_MAX  # a host buffer's key part for a priority p is _PRIORITY_TOP - p
_PULL_FOR_IDLE = 1024  # requests a pop may pull looking for a host with nothing in flight (prefer="idle")
# Requests one pop (or next_ready) pulls from the priority queues into host buffers at most. When
# every host found so far waits for its delay, the next ready request may be anywhere in the queues;
# a pop that has pulled this many stops there (None), says so (``cut``), and the next call goes on.
PULL_LIMIT = 1024
_HELD_LOOK = 256  # requests waiting for a time whose hosts are looked at by next_ready()


class Dispatch:
    """The pop side of a ``Frontier``, over the shared state."""

    def __init__(self, state: Shared) -> None:
        self.state = state
        self.memory_seq = 0  # the seq of the last request handed out of the memory queue (negative)
        self.pulled: tuple[int, bytes | memoryview] | None = None  # the last record read to learn its host
        self.cut = False  # the last fill stopped at PULL_LIMIT with requests left in the queues

    def forget_reads(self) -> None:
        """Drop what was read ahead from the journal (its offsets are no longer valid: a compaction)."""
        self.pulled = None

    def pop(self) -> Request | None:
        """The next request now in flight, or None if none is ready now."""
        st = self.state
        due = st.delayed_due
        if due is not None or st.hosts.active:
            now = time.time()
            if due is not None and now >= due:
                self.release_due(now)
            if st.hosts.active:
                return self.pop_polite(now)
        else:
            now = time.time()  # kept as the host's last hand-out: a delay set later counts from it
        disk_top = st.queues.pq.curprio  # -priority, as queuelib keys it
        memory_top = st.memq.curprio
        if disk_top is None and memory_top is None:
            return None
        try:  # a queue entry taken and not handed out: the frontier must be rebuilt
            if memory_top is not None and (disk_top is None or memory_top < disk_top):
                request = self.pop_memory()
            else:
                offset = st.queues.pop()
                assert offset is not None
                request = self.load(offset)
            self.hand_out(request, now)
        except BaseException as exc:
            st.interrupted("pop", exc)
            raise
        return request

    def next_event(self) -> float | None:
        """The earliest time something held back by time becomes ready, or None (now, while a pop
        that stopped at ``PULL_LIMIT`` has more of the queues to look at)."""
        st = self.state
        if self.cut and st.queues.pq.curprio is not None:
            return time.time()
        due = st.delayed_due
        if due is not None and st.hosts.hot.count:
            due = self.next_due_not_held()
        wake = st.hosts.next_wake() if st.hosts.active else None
        if due is None:
            return wake
        return due if wake is None else min(due, wake)

    def next_ready(self) -> float | None:
        """When the next pending request may be handed out (now if one may be now), or None."""
        st = self.state
        now = time.time()
        try:
            if st.delayed_due is not None and now >= st.delayed_due:
                self.release_due(now)
            if st.memq.curprio is not None:
                return now
            if not st.hosts.active:
                if st.queues.pq.curprio is not None:
                    return now
            else:
                st.hosts.wake(now)
                self.fill(now)
                if self.cut or st.hosts.best() is not None:
                    return now
        except BaseException as exc:
            st.interrupted("next_ready", exc)
            raise
        return self.next_event()

    def next_due_not_held(self) -> float | None:
        """The earliest due time of a request waiting for a time whose host waiting alone can
        free (not blocked for ever, not at its budget with nothing in flight); None if there is
        none. Past ``_HELD_LOOK`` requests of held hosts, the next one's time is given (a waiter
        wakes then, lets them into their hosts' buffers and looks again)."""
        st = self.state
        hosts, journal = st.hosts, st.journal
        for looked, (offset, _priority, due) in enumerate(st.delayed.first(_HELD_LOOK + 1)):
            if looked == _HELD_LOOK:
                return due
            host = hosts.hot.get(hosts.counts.find(records.slot_of(journal.read_body(offset))))
            if host is None or not hosts.held_for_ever(host):
                return due
        return None

    def pop_memory(self) -> Request:
        """The top request of the memory queue, given its (negative) seq."""
        request = self.state.memq.pop()
        assert request is not None
        self.memory_seq -= 1
        request._seq = self.memory_seq
        return request

    def holds(self, request: Request) -> bool:
        """True if ``request`` is the very object handed out (not a copy, nor an earlier one of the
        same record) and not finished yet."""
        seq = getattr(request, "_seq", None)
        return isinstance(seq, int) and self.state.inflight.get(seq) is request

    def hand_out(self, request: Request, now: float) -> None:
        """Count ``request`` as in flight (no longer pending), handed out at ``now``."""
        st = self.state
        st.inflight[request._seq] = request  # type: ignore[index]  # set by every path here
        pending = st.pending
        left = pending[request.priority] - 1
        if left:
            pending[request.priority] = left
        else:
            del pending[request.priority]
        st.counters["popped"] += 1
        hid = request._hid
        hosts = st.hosts
        if hid < 0:  # a request kept in memory
            hid = request._hid = hosts.hid(request.slot)
        if hosts.active:
            hosts.handed_out(hid, now)
        else:  # the counts alone, inline: this is every pop
            counts = hosts.counts
            counts.pending[hid] -= 1
            counts.inflight[hid] += 1
            counts.last[hid] = now

    def release_due(self, now: float) -> None:
        """Move the requests whose time has come from the delayed arrays into their hosts' buffers.

        Into the buffers, not the queues: a buffer keeps a host's requests in journal order,
        which is where a rebuild after a crash puts a request that waited (a LIFO or FIFO
        queue could only take it on top or at the back). So the host rules are on from the
        first request that waited for a time.
        """
        st = self.state
        hosts, journal = st.hosts, st.journal
        hosts.active = True
        try:
            for offset, priority, _due in st.delayed.release(now):
                hosts.buffer(hosts.host(hosts.counts.add(records.slot_of(journal.read_body(offset)))), priority,
                             offset, now, waited=True)
        except BaseException as exc:
            st.interrupted("pop", exc)
            raise
        finally:
            st.delayed_due = st.delayed.next_due()

    def pop_polite(self, now: float) -> Request | None:
        """``pop`` when host rules may hold requests back: the best request of a ready host."""
        st = self.state
        hosts = st.hosts
        try:
            hosts.wake(now)
            self.fill(now)
            if self.cut:
                return None  # the next call goes on looking
            best = hosts.best()
            memory_top = st.memq.curprio
            if memory_top is not None and (best is None or -memory_top >= _PRIORITY_TOP - hosts.ready[0][1]):
                request = self.pop_memory()  # kept in memory only: not held back by host rules
            elif best is None:
                return None
            else:
                _priority, offset = hosts.take(best)
                pulled = self.pulled
                request = self.load(offset, pulled[1] if pulled is not None and pulled[0] == offset else None)
            self.pulled = None
            self.hand_out(request, now)
        except BaseException as exc:
            st.interrupted("pop", exc)
            raise
        return request

    def fill(self, now: float) -> None:
        """Pull requests from the priority queues into their hosts' buffers while the queues may
        hold something better than the best ready host's request (at most ``PULL_LIMIT`` of them)."""
        st = self.state
        hosts, queues, journal = st.hosts, st.queues, st.journal
        pq = queues.pq
        top = _PRIORITY_TOP
        idle_first = hosts.idle_first
        pulled = 0
        left = PULL_LIMIT
        self.cut = False
        while pq.curprio is not None:
            best = hosts.best()
            body = None
            if best is not None:
                rank, key = hosts.ready[0][0], hosts.ready[0][1]
                if top + pq.curprio >= key and (rank == 0 or pulled >= _PULL_FOR_IDLE):
                    body = self.queued_first(best, top + pq.curprio == key)
                    if body is None:
                        return  # with prefer="idle", a while longer for a host with nothing in flight
            if not left:
                self.cut = True  # the queues may still hold a better request than any found
                return
            left -= 1
            pulled += idle_first
            priority = -pq.curprio
            offset = queues.pop()
            assert offset is not None
            if body is None:
                body = journal.read_body(offset)
            hosts.buffer(hosts.host(hosts.counts.add(records.slot_of(body))), priority, offset, now)
            self.pulled = (offset, body)

    def queued_first(self, best: Host, same_priority: bool) -> bytes | memoryview | None:
        """The body of the queues' next request if it comes before the request that waited for a
        time that ``best`` would hand out (same priority, earlier in journal order: LIFO, pushed after
        it; FIFO, before it), whichever host it is of; else None.

        A request that waited for a time goes into its host's buffer when it is due, not to the
        queues: without this, the requests of the queues that come before it would stay there for
        as long as waited requests keep a host ready at their priority (the refetches of a revisit
        crawl could hold back every request never fetched). So the queues give up what comes
        before it first, in their order, and within a host the order stays priority, then
        LIFO/FIFO, as a rebuild from the journal gives it."""
        st = self.state
        hosts = st.hosts
        if not same_priority or not hosts.waited:
            return None
        assert best.buffer
        top = buffer_top(best.buffer)
        if top not in hosts.waited:
            return None  # pulled from the queues, or pushed while the host had a buffer: nothing in
            # the queues at this priority comes before it
        offset, curprio = st.queues.peek(), st.queues.pq.curprio
        assert offset is not None and curprio is not None
        if hosts.key(-curprio, offset) > top:
            return None
        return st.journal.read_body(offset)

    def load(self, offset: int, body: bytes | memoryview | None = None) -> Request:
        """The request stored at ``offset`` (``body``: its record's body, if already read)."""
        st = self.state
        if body is None:
            body = st.journal.read_body(offset)
        try:
            request, slot = records.load(body, offset)
        except ValueError as exc:  # UnicodeDecodeError included
            raise JobDirCorrupt(st.layout.journal, offset, str(exc)) from None
        counts = st.hosts.counts
        hid = counts.recent.get(slot)
        request._hid = counts.add(slot) if hid is None else hid
        return request

    def failed(self) -> list[FailedRequest]:
        """Every failed request not requeued, read back from the journal, oldest failure first."""
        return self._failed_of(self.state.failed.items())

    def latest_failed(self, count: int) -> list[FailedRequest]:
        """The ``count`` latest failed requests, latest first."""
        return self._failed_of(itertools.islice(reversed(self.state.failed.items()), count))

    def _failed_of(self, entries: Iterable[tuple[int, int]]) -> list[FailedRequest]:
        """The failed requests of (request offset, FAIL record offset) pairs, read back from the journal."""
        journal = self.state.journal
        out = []
        for target, record_at in entries:
            info = journal.read_fail(record_at, target)
            request = self.load(target)
            request._seq = None
            request.not_before = None
            out.append(FailedRequest(request, info.error, info.failed_at))
        return out

    def host_infos(self) -> list[HostInfo]:
        """Every host with pending, in-flight or done requests or a setting, sorted by name."""
        schedule = self.state.hosts
        counts, hot = schedule.counts, schedule.hot
        out = [schedule.info(hid) for hid in counts.ids()
               if counts.pending[hid] or counts.inflight[hid] or counts.done[hid]
               or (hid in hot and hot[hid].has_settings)]
        return sorted(out, key=lambda info: info.host)

    def busiest_hosts(self, count: int, now: float) -> tuple[list[HostInfo], int, int, int]:
        """The ``count`` busiest hosts (blocked ones first, then by requests pending, in flight and done:
        ``contract.snapshot.host_rank``), and how many hosts there are, are ready now and are waiting,
        without an object per host (for ``status.json``)."""
        schedule = self.state.hosts
        counts, hot = schedule.counts, schedule.hot
        pending, inflight, done = counts.pending, counts.inflight, counts.done
        total = sum(1 for hid in counts.ids() if pending[hid] or inflight[hid] or done[hid] or hid in hot)
        with_pending = sum(1 for n in pending if n)
        waiting = 0
        if schedule.active or schedule.delay:
            for hid in counts.ids():
                if pending[hid]:
                    info = schedule.info(hid)
                    if info.ready_at is None or info.ready_at > now or info.blocked_until:
                        waiting += 1
        def rank(hid: int) -> tuple[bool, int]:
            host = hot.get(hid)
            return host is not None and host.blocked_until > now, pending[hid] + inflight[hid] + done[hid]

        top = heapq.nlargest(count, (hid for hid in counts.ids() if pending[hid] or inflight[hid] or done[hid]
                                     or hid in hot), key=rank)
        return [schedule.info(hid) for hid in top], total, with_pending - waiting, waiting

    def host_info(self, name: str) -> HostInfo | None:
        """One host as ``host_infos`` tells of it; None if it has nothing to tell."""
        schedule = self.state.hosts
        counts, hot = schedule.counts, schedule.hot
        hid = counts.find(name.encode("utf-8"))
        if hid < 0 or not (counts.pending[hid] or counts.inflight[hid] or counts.done[hid]
                           or (hid in hot and hot[hid].has_settings)):
            return None
        return schedule.info(hid)

    def return_buffers(self) -> None:
        """Put the requests of the host buffers back into their priority queues, in journal order."""
        st = self.state
        drained = st.hosts.drain(time.time())
        self.forget_reads()
        groups: dict[int, list[int]] = {}
        for priority, offset in drained:
            groups.setdefault(priority, []).append(offset)
        for priority, offsets in groups.items():
            offsets.extend(st.queues.take_all(priority))
            offsets.sort()
            st.queues.load(priority, array("Q", offsets))
