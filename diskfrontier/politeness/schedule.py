"""Hosts: per-host counts, settings and the politeness schedule, in memory.

Every request belongs to a host (its ``slot``). For each host the frontier keeps how
many of its requests are pending, in flight and done, and its settings: a delay
between hand-outs (``set_delay``, else the frontier's ``delay``), a time it is blocked
until, and a budget (at most that many of its requests done or in flight).

Politeness is a layer over the priority queues, in the way Mercator and Heritrix do
it. While no host rule can hold a request back (``delay=0``, ``per_host=None``, no host
settings), ``pop`` takes the next request of the priority queues as it always did.
Otherwise ``pop`` pulls requests from the priority queues in their order into small
per-host buffers (a heap of journal offsets per host) until the best request of a
host that may be fetched now is found, and keeps two heaps of hosts: those ready now,
keyed by their best priority and then by how long they have been ready, and those
waiting for a time (their delay or a block). A host held back by ``per_host`` or its
budget is in neither heap until one of its requests is done or given back. Each pop
costs O(log hosts). With ``prefer="idle"`` the ready heap puts the hosts with the fewest
requests in flight first, then priority (the rule of Scrapy's
``DownloaderAwarePriorityQueue``).

The buffers are an index too: a clean close puts their offsets back into the priority
queues; after a crash they are rebuilt from the journal like the queues.
"""

from __future__ import annotations

import heapq
import math
import time
from array import array
from collections.abc import Iterator
from typing import cast

from ..contract.values import HostInfo
from ..request.model import PRIORITY_MAX
from .hosttable import HostTable

_PRIORITY_TOP = PRIORITY_MAX
_OFFSET_MASK = (1 << 64) - 1
_SMALL = 64  # a host buffer holding more keys than this becomes a _BigBuffer
_PARTS_KEPT = 4096  # priority parts shared by the ready heap's entries


class _Run:
    """The buffered keys of one priority of one host, low 64 bits only: those that came in
    order in a sorted array (8 bytes each), the few that did not in a small heap."""

    __slots__ = ("keys", "start", "late")

    def __init__(self) -> None:
        self.keys = array("Q")
        self.start = 0  # keys before this were taken
        self.late: list[int] = []

    def __len__(self) -> int:
        return len(self.keys) - self.start + len(self.late)

    def push(self, low: int) -> None:
        keys = self.keys
        if self.start == len(keys):
            if keys:
                self.keys = keys = array("Q")
                self.start = 0
            keys.append(low)
        elif low >= keys[-1]:
            keys.append(low)
        else:
            heapq.heappush(self.late, low)

    def top(self) -> int:
        if self.start < len(self.keys):
            first = self.keys[self.start]
            return min(first, self.late[0]) if self.late else first
        return self.late[0]

    def pop(self) -> int:
        late, keys, start = self.late, self.keys, self.start
        if late and (start == len(keys) or late[0] < keys[start]):
            return heapq.heappop(late)
        low = keys[start]
        self.start = start = start + 1
        if start >= 4096 and 2 * start > len(keys):
            del keys[:start]
            self.start = 0
        return low

    def lows(self) -> Iterator[int]:
        yield from self.keys[self.start:]
        yield from self.late


class _BigBuffer:
    """A large host buffer: a _Run per priority and a heap of the priorities (their key parts).

    Requests are mostly pulled from the priority queues in their host's order, so nearly
    every key lands in a run's array: 8 bytes a buffered request instead of a Python int."""

    __slots__ = ("runs", "parts", "size")

    def __init__(self, keys: list[int]) -> None:
        self.runs: dict[int, _Run] = {}
        self.parts: list[int] = []
        self.size = 0
        for key in sorted(keys):
            self.push(key)

    def __len__(self) -> int:
        return self.size

    def push(self, key: int) -> None:
        part = key >> 64
        run = self.runs.get(part)
        if run is None:
            run = self.runs[part] = _Run()
            heapq.heappush(self.parts, part)
        run.push(key & _OFFSET_MASK)
        self.size += 1

    def top(self) -> int:
        part = self.parts[0]
        return part << 64 | self.runs[part].top()

    def pop(self) -> int:
        part = self.parts[0]
        run = self.runs[part]
        low = run.pop()
        if not len(run):
            del self.runs[part]
            heapq.heappop(self.parts)
        self.size -= 1
        return part << 64 | low

    def keys(self) -> Iterator[int]:
        for part, run in self.runs.items():
            for low in run.lows():
                yield part << 64 | low


# One key alone (the usual case: a host with one request buffered costs no list), a heap of
# keys, or a _BigBuffer once it is large. A key is never 0 (see HostSchedule.key).
Buffer = int | list[int] | _BigBuffer


def buffer_top(buffer: Buffer) -> int:
    """The best (smallest) key of a non-empty host buffer."""
    kind = type(buffer)
    if kind is int:
        return buffer  # type: ignore[return-value]
    return buffer[0] if kind is list else buffer.top()  # type: ignore[index,union-attr]


def buffer_keys(buffer: Buffer | None) -> Iterator[int]:
    """Every key of a host buffer, in no order."""
    if buffer is None:
        return iter(())
    kind = type(buffer)
    if kind is int:
        return iter((buffer,))  # type: ignore[arg-type]
    return iter(buffer) if kind is list else buffer.keys()  # type: ignore[arg-type,union-attr]


class Host:
    """A host that politeness is working on: its settings, last hand-out and buffer.

    Its name and counts are in the schedule's ``HostTable``, under ``hid``."""

    __slots__ = ("hid", "delay", "blocked_until", "budget", "buffer", "entry")

    def __init__(self, hid: int) -> None:
        self.hid = hid
        self.delay: float | None = None  # None: the frontier's delay
        self.blocked_until = 0.0
        self.budget: int | None = None
        # keys (top priority - priority) << 64 | order: one alone, a heap, or a _BigBuffer
        self.buffer: Buffer | None = None
        self.entry: tuple | None = None  # its current heap entry (any other entry of it is stale)

    @property
    def has_settings(self) -> bool:
        """True if something about this host must be kept across restarts."""
        return self.delay is not None or self.blocked_until > 0 or self.budget is not None


class HotHosts:
    """The ``Host`` of each host politeness is working on, by host id.

    A list as long as the ids seen (8 bytes a host known) rather than a dict (about 70 bytes an
    entry with its key), so that a host being worked on costs its ``Host`` and little more."""

    __slots__ = ("by_id", "count")

    def __init__(self) -> None:
        self.by_id: list[Host | None] = []
        self.count = 0

    def get(self, hid: int) -> Host | None:
        by_id = self.by_id
        return by_id[hid] if hid < len(by_id) else None

    def put(self, host: Host) -> None:
        by_id, hid = self.by_id, host.hid
        if hid >= len(by_id):
            by_id.extend([None] * (hid + 1 - len(by_id)))
        if by_id[hid] is None:
            self.count += 1
        by_id[hid] = host

    def discard(self, hid: int) -> None:
        by_id = self.by_id
        if hid < len(by_id) and by_id[hid] is not None:
            by_id[hid] = None
            self.count -= 1

    def values(self) -> list[Host]:
        return [host for host in self.by_id if host is not None]

    def __contains__(self, hid: int) -> bool:
        return self.get(hid) is not None

    def __getitem__(self, hid: int) -> Host:
        host = self.get(hid)
        if host is None:
            raise KeyError(hid)
        return host

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0


class HostSchedule:
    """The hosts of one frontier and, once any rule can hold a request back, the politeness heaps."""

    def __init__(self, order: str, delay: float, per_host: int | None, prefer: str = "priority") -> None:
        self.lifo = order == "lifo"
        self.delay = delay
        self.per_host = per_host
        self.idle_first = prefer == "idle"
        self.counts = HostTable()
        self.hot = HotHosts()  # the hosts politeness is working on
        # (in flight if idle_first else 0, priority key, ready since, tie-break, host); an entry is current
        # while it is its host's ``entry`` (one that is not is stale, dropped when it comes to the top)
        self.ready: list[tuple[int, int, float, int, Host]] = []
        self.sleeping: list[tuple[float, int, Host]] = []  # (wake time, tie-break, host)
        self.buffered = 0
        self.waited: set[int] = set()  # buffer keys of requests that came out of the delayed arrays
        self._tokens = 0  # a count that makes every heap entry unique (entries never compare their hosts)
        self._parts: dict[int, int] = {}
        self.active = delay > 0 or per_host is not None or self.idle_first

    # ------------------------------------------------------------------ the table
    def hid(self, name: str) -> int:
        """The id of the host called ``name``, added if it is new."""
        return self.counts.add(name.encode())

    def host(self, hid: int) -> Host:
        """The ``Host`` of id ``hid``, made if politeness was not working on it."""
        by_id = self.hot.by_id
        host = by_id[hid] if hid < len(by_id) else None
        if host is None:
            host = Host(hid)
            self.hot.put(host)
        return host

    def cool(self, host: Host, now: float) -> None:
        """Let go of the ``Host`` of a host that nothing holds back any more (its counts stay)."""
        if (host.buffer is None and not host.has_settings and not self.counts.inflight[host.hid]
                and self.counts.last[host.hid] + self.delay_of(host) <= now):
            self.hot.discard(host.hid)
            host.entry = None  # any heap entry of it is stale

    def delay_of(self, host: Host) -> float:
        """The delay in effect for ``host``."""
        return self.delay if host.delay is None else host.delay

    def info(self, hid: int) -> HostInfo:
        """What ``Frontier.hosts()`` tells of host ``hid``."""
        counts, host = self.counts, self.hot.get(hid)
        pending = counts.pending[hid]
        if host is None:  # its last hand-out (kept across a clean close) may still hold it back
            last = counts.last[hid]
            ready_at = (last + self.delay if last and self.delay > 0 else 0.0) if pending else None
            return HostInfo(counts.name(hid), pending, counts.inflight[hid], counts.done[hid], self.delay,
                            ready_at, None, None)
        return HostInfo(counts.name(hid), pending, counts.inflight[hid], counts.done[hid], self.delay_of(host),
                        self.wake_time(host) if pending else None, host.blocked_until or None, host.budget)

    # ------------------------------------------------------------------ order keys
    def key(self, priority: int, offset: int) -> int:
        """A host buffer's heap key, never 0: higher priority first, then newest (LIFO) or oldest (FIFO) push."""
        return (_PRIORITY_TOP - priority) << 64 | (_OFFSET_MASK - offset if self.lifo else offset)

    def unkey(self, key: int) -> tuple[int, int]:
        """(priority, offset) of a key."""
        low = key & _OFFSET_MASK
        return _PRIORITY_TOP - (key >> 64), (_OFFSET_MASK - low if self.lifo else low)

    # ------------------------------------------------------------------ readiness
    def held_by_count(self, host: Host) -> bool:
        """True if ``per_host`` or the budget keeps ``host`` from another hand-out now."""
        inflight = self.counts.inflight[host.hid]
        if self.per_host is not None and inflight >= self.per_host:
            return True
        return host.budget is not None and self.counts.done[host.hid] + inflight >= host.budget

    def held_for_ever(self, host: Host) -> bool:
        """True if nothing but a call (unblock, a budget raised, a request given back) can let
        ``host`` hand out again: blocked for ever, or at its budget with nothing in flight."""
        if host.blocked_until == math.inf:
            return True
        hid = host.hid
        return (host.budget is not None and not self.counts.inflight[hid]
                and self.counts.done[hid] >= host.budget)

    def wake_time(self, host: Host) -> float:
        """When the delay and the block of ``host`` let it have its next hand-out."""
        return max(self.counts.last[host.hid] + self.delay_of(host), host.blocked_until)

    def place(self, host: Host, now: float) -> None:
        """Put ``host`` in the heap its state calls for (its older entries become stale).

        A host whose entry in a heap already says what a new one would (the same wake time,
        or the same rank, priority and ready time) keeps it: otherwise a host blocked for long
        would leave a stale entry behind for every request pulled into its buffer."""
        entry = host.entry
        if not host.buffer or self.held_by_count(host):
            host.entry = None
            return
        wake = self.wake_time(host)
        if wake > now:
            if entry is not None and len(entry) == 3 and entry[0] == wake:
                return
            self._tokens += 1
            host.entry = entry = (wake, self._tokens, host)
            heapq.heappush(self.sleeping, entry)
        else:
            rank = self.counts.inflight[host.hid] if self.idle_first else 0
            part = buffer_top(host.buffer) >> 64
            parts = self._parts
            if len(parts) >= _PARTS_KEPT:  # priorities that change over a long crawl
                parts.clear()
            part = parts.setdefault(part, part)  # one int object per priority, not one per host
            if entry is not None and len(entry) == 5 and entry[0] == rank and entry[1] == part and entry[2] == wake:
                return
            self._tokens += 1
            host.entry = entry = (rank, part, wake, self._tokens, host)
            heapq.heappush(self.ready, entry)

    def wake(self, now: float) -> None:
        """Move the hosts whose wake time has come from the sleeping heap to the ready one."""
        sleeping = self.sleeping
        while sleeping and sleeping[0][0] <= now:
            entry = heapq.heappop(sleeping)
            host = entry[2]
            if entry is host.entry:
                host.entry = None  # out of the heap
                self.place(host, now)

    def best(self) -> Host | None:
        """The ready host with the best request (stale heap entries are dropped on the way)."""
        ready = self.ready
        while ready:
            entry = ready[0]
            if entry is entry[4].entry:
                return entry[4]
            heapq.heappop(ready)
        return None

    def next_wake(self) -> float | None:
        """The earliest time a sleeping host wakes (a host blocked for ever does not count), or None."""
        sleeping = self.sleeping
        while sleeping and sleeping[0] is not sleeping[0][2].entry:
            heapq.heappop(sleeping)
        if not sleeping or math.isinf(sleeping[0][0]):
            return None
        return sleeping[0][0]

    # ------------------------------------------------------------------ buffers
    def buffer(self, host: Host, priority: int, offset: int, now: float, *, waited: bool = False) -> None:
        """Add a request to its host's buffer: pulled from the priority queues, pushed for a host
        whose requests are buffered (LIFO), or due after waiting for a time (``waited``)."""
        key = self.key(priority, offset)
        if waited:
            self.waited.add(key)
        buffer = host.buffer
        self.buffered += 1
        if buffer is None:
            host.buffer = key
            self.place(host, now)
            return
        top = buffer_top(buffer)
        kind = type(buffer)
        if kind is int:
            host.buffer = [top, key] if top < key else [key, top]  # a sorted list is a heap
        elif kind is list:
            heapq.heappush(buffer, key)  # type: ignore[arg-type]
            if len(buffer) > _SMALL:  # type: ignore[arg-type]
                host.buffer = _BigBuffer(buffer)  # type: ignore[arg-type]
        else:
            buffer.push(key)  # type: ignore[union-attr]
        if key < top:
            self.place(host, now)

    def take(self, host: Host) -> tuple[int, int]:
        """Take the best buffered request of ``host``: (priority, offset)."""
        self.buffered -= 1
        buffer = host.buffer
        assert buffer
        kind = type(buffer)
        key: int
        if kind is int:
            key, host.buffer = cast(int, buffer), None
        else:
            key = heapq.heappop(buffer) if kind is list else buffer.pop()  # type: ignore[arg-type,union-attr]
            if not buffer:
                host.buffer = None
        if self.waited:
            self.waited.discard(key)
        return self.unkey(key)

    def handed_out(self, hid: int, now: float) -> None:
        """Count a hand-out of host ``hid`` (from its buffer or straight from the queues), and re-place it."""
        counts = self.counts
        counts.pending[hid] -= 1
        counts.inflight[hid] += 1
        counts.last[hid] = now
        if self.active:
            self.place(self.host(hid), now)

    def returned(self, hid: int, *, done: bool, pending: int) -> None:
        """A request of host ``hid`` is no longer in flight: done (counted) and/or pending again."""
        counts = self.counts
        counts.inflight[hid] -= 1
        counts.pending[hid] += pending
        if done:
            counts.done[hid] += 1
        host = self.hot.get(hid)
        if host is not None:
            now = time.time()
            self.place(host, now)
            self.cool(host, now)

    def drain(self, now: float) -> list[tuple[int, int]]:
        """Empty every buffer: (priority, offset) of each request that was in one."""
        out = []
        for host in self.hot.values():
            for key in buffer_keys(host.buffer):
                out.append(self.unkey(key))
            host.buffer = None
        self.ready, self.sleeping, self.buffered = [], [], 0
        self.waited.clear()
        self._parts.clear()
        for host in self.hot.values():
            host.entry = None  # the heaps are empty now
        for host in list(self.hot.values()):
            self.cool(host, now)
        return out
