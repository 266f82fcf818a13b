"""The one scan of the journal: what is pending, checked.

``read_state`` reads ``requests.urls`` once and returns the pending PUSH offsets per
priority (in journal order, which is push order), the counts, and where the intact
records end. Recovery, compaction, verify, inspect, peek and export all use it, so
"pending = PUSH - DONE" is computed in one place and checked in one place:

* every record's checksum covers its own offset (``records.py``, checked by ``journal.walk``);
* a DONE must name an earlier PUSH record that is not done yet; a DONE that names
  anything else is damage, not something to skip;
* a FAIL must name an earlier request that is pending; it finishes it as failed, and
  the failed set (target offset -> FAIL offset, in FAIL order) is kept. A RETRY that
  names a failed request makes it pending again (it leaves the failed set, and is not
  counted as a done); a DONE or REFETCH that names one is damage.

Memory is compact arrays, not Python objects: each PUSH costs its offset (8 bytes,
in an array in journal order, which is sorted, so a DONE finds its PUSH by bisection)
and a one-byte code of its priority, which becomes ``DEAD`` when a DONE names it; with
``sizes=True`` also its size (4 bytes). The pending offsets per priority are drawn
from these arrays at the end in C loops.

The records of a format-3 or -4 journal are taken chunk by chunk as ``journal.walk``
finds them intact (the journal's one set of record checks, which ``JournalScan`` uses
too), each read with the fields of its frame and head (``records.FRAMED_HEAD``); at the
first record the walk does not take (damage, a torn tail), the rest goes to
``JournalScan``, which decides what it is and reads on past damage when repairing. A
format-1 or -2 journal goes to ``JournalScan`` from the start.
"""

from __future__ import annotations

import os
import zlib
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from itertools import compress
from typing import IO

from ..core.errors import JobDirCorrupt
from ..files.safefs import open_file
from .journal import CHUNK, MAGIC, MAGIC_CRC, JournalScan, ScanResult, Stop, journal_version, walk
from .records import (
    DONE,
    DROP,
    FAIL,
    FLAG_DONT_FILTER,
    FRAME,
    HOST,
    MARK,
    MARK_BEGIN,
    OFFSET,
    PAUSE,
    PUSH,
    PUSH_HEAD,
    REFETCH,
    RETRY,
    TARGET_AT,
    HostRecord,
    done_target,
    fail_target,
    kind_of,
    parse_host,
    parse_mark,
    parse_pause,
    parse_push,
)
from .statefile import MAX_COMMANDS, SavedState, StateUnusable

Progress = Callable[[int, int], None]
_PROGRESS_EVERY = 1 << 16
_WIDER = {"B": "H", "H": "I"}
_DEAD = {"B": 0xFF, "H": 0xFFFF, "I": 0xFFFFFFFF}
_BIG = 0xFFFF  # record sizes from here on are kept aside
_FEW_PRIORITIES = 16  # up to this many, the pending offsets are drawn with one C pass per priority
_TARGET = OFFSET.unpack_from
crc32_of = zlib.crc32


@dataclass
class JournalState:
    """What the journal says: pending offsets per priority, counts, and where it ends."""

    pending: dict[int, array] = field(default_factory=dict)  # empty unless offsets were asked for
    counts: dict[int, int] = field(default_factory=dict)  # pending requests per priority
    pushes: int = 0  # PUSH, RETRY and REFETCH records
    dones: int = 0  # requests finished: by a DONE, as a RETRY's or REFETCH's pending target, or by a FAIL
    last_record: int = -1
    bad_dones: list[tuple[int, str]] = field(default_factory=list)  # (offset, problem), repair scans only
    scan: ScanResult = field(default_factory=ScanResult)
    live_bytes: int = 0  # bytes of the pending records (0 unless the scan kept sizes)
    end_crc: int | None = None  # the crc32 of the journal's first scan.end bytes, when the scan could tell
    order: array = field(default_factory=lambda: array("Q"))  # every PUSH offset, in journal order
    codes: array = field(default_factory=lambda: array("B"))  # each PUSH's priority code, or dead
    priorities: list[int] = field(default_factory=list)  # the priority of each code
    host_names: list[bytes] = field(default_factory=list)  # by host id (with hosts=True)
    host_ids: array = field(default_factory=lambda: array("I"))  # each PUSH's host id (with hosts=True)
    host_done: list[int] = field(default_factory=list)  # requests done per host id (with hosts=True)
    host_pending: dict[int, int] = field(default_factory=dict)  # pending requests per host id (with hosts=True)
    host_settings: dict[int, HostRecord] = field(default_factory=dict)  # the last HOST record per host id
    timed_index: array = field(default_factory=lambda: array("Q"))  # push indexes of requests with a not_before
    timed_at: array = field(default_factory=lambda: array("d"))  # their not_before
    delayed: list[tuple[int, int, float]] = field(default_factory=list)  # (offset, priority, due) held back
    failed: dict[int, int] = field(default_factory=dict)  # failed request offset -> its FAIL offset, in FAIL order
    failed_bytes: int = 0  # bytes of the failed requests' records and FAIL records (0 unless the scan kept sizes)
    paused_since: float | None = None  # the last PAUSE record's time, unless it resumed
    dropped: int = 0  # DROP records
    applied: dict[str, str] = field(default_factory=dict)  # inbox command id -> its result (JSON), by MARK records
    open_group: OpenGroup | None = None  # the inbox command whose MARK_BEGIN has no MARK_END yet
    saved: SavedState | None = None  # the state as a state file keeps it (with save=True)
    started_at: int = 0  # where the scan began: 0, or the offset of the saved state it started from

    def find_pending(self, offset: int) -> tuple[int, int] | None:
        """(its index in push order, its priority) of the pending PUSH record at ``offset``; None if none is."""
        i = bisect_left(self.order, offset)
        if i == len(self.order) or self.order[i] != offset or self.codes[i] == _DEAD[self.codes.typecode]:
            return None
        return i, self.priorities[self.codes[i]]

    @property
    def pending_count(self) -> int:
        return sum(self.counts.values())

    def alive_in_order(self) -> Iterator[bool]:
        """For each PUSH record in journal order: is it still pending?"""
        dead = _DEAD[self.codes.typecode]
        return (code != dead for code in self.codes)

    def held_after(self, now: float) -> list[float]:
        """The not_before of every pending request that is still waiting at ``now``."""
        dead = _DEAD[self.codes.typecode]
        codes = self.codes
        return [at for index, at in zip(self.timed_index, self.timed_at, strict=True)
                if at > now and codes[index] != dead]


@dataclass(frozen=True)
class OpenGroup:
    """An inbox command whose records were cut short by a stop: its id, where it began, and what its
    records after the MARK_BEGIN did (requests stored by PUSH or RETRY records, and DROP records)."""

    ident: str
    offset: int
    stored: int
    dropped: int


class _Collector:
    """The arrays a scan fills, and the DONE rule."""

    def __init__(self, path: str, repair: bool, sizes: bool, hosts: bool = False, version: int = 4) -> None:
        self.path, self.repair, self.version = path, repair, version
        self.hosts = hosts and version >= 3
        self.host_ids = array("I")
        self.host_id: dict[bytes, int] = {}
        self.host_names: list[bytes] = []
        self.host_done: list[int] = []
        self.host_settings: dict[int, HostRecord] = {}
        self.timed_index = array("Q")
        self.timed_at = array("d")
        self.order = array("Q")
        self.codes = array("B")
        self.dead = _DEAD["B"]
        self.code_of: dict[int, int] = {}
        self.priorities: list[int] = []
        self.lengths = array("H") if sizes else None  # a record's size, or _BIG and the size in self.big
        self.big: dict[int, int] = {}  # push index -> size, for records of _BIG bytes or more
        self.dones = 0
        self.bad_dones: list[tuple[int, str]] = []
        self.failed: dict[int, int] = {}  # failed request offset -> its FAIL offset
        self.paused_since: float | None = None
        self.dropped = 0
        self.applied: dict[str, str] = {}
        self.group: tuple[str, int, int, int] | None = None  # (id, offset, stored, dropped) at its MARK_BEGIN
        self.fail_sizes: dict[int, int] = {}  # failed request offset -> bytes of its record and its FAIL record
        self.pushes_before = 0  # request records before ``start`` that a saved state no longer lists (done ones)
        self.start = 0  # where the scan begins: 0, or the ``at`` of the saved state loaded
        self.left_out_bytes = 0  # bytes of the pending requests ``leave_out`` took out (in flight)

    def load(self, saved: SavedState) -> None:
        """Start from a saved state (``statefile.py``) instead of an empty journal: the scan goes on at ``saved.at``.

        Its arrays hold only what was pending there, so a DONE that names a request
        finished before ``saved.at`` finds no record: damage, as in a scan from the start.
        """
        self.start = saved.at
        self.order = array("Q", saved.order)
        self.priorities = list(saved.priorities)
        self.code_of = {p: code for code, p in enumerate(self.priorities)}
        self.codes = array(saved.codes.typecode, saved.codes)
        self.dead = _DEAD[self.codes.typecode]
        if self.lengths is not None:
            if not saved.sizes or max(saved.sizes) < _BIG:
                self.lengths = array("H", saved.sizes)
            else:
                for size in saved.sizes:
                    if size < _BIG:
                        self.lengths.append(size)
                    else:
                        self.big[len(self.lengths)] = size
                        self.lengths.append(_BIG)
        if self.hosts:
            self.host_ids = array("I", saved.hosts)
            self.host_names = list(saved.names)
            self.host_id = {name: hid for hid, name in enumerate(self.host_names)}
            self.host_done = list(saved.host_done)
            self.host_settings = {hid: HostRecord(self.host_names[hid], r.delay, r.blocked_until, r.budget, r.done)
                                  for hid, r in saved.settings.items()}
        self.timed_index = array("Q", saved.timed_index)
        self.timed_at = array("d", saved.timed_at)
        self.dones = saved.dones
        self.pushes_before = saved.pushes - len(saved.order)
        self.failed = dict(zip(saved.failed, saved.fails, strict=True))
        self.fail_sizes = dict(zip(saved.failed, saved.fail_sizes, strict=True))
        self.paused_since = saved.paused_since
        self.dropped = saved.dropped
        self.applied = dict(saved.applied)

    def saved(self, ident: str, at: int, journal_crc: int, last_record: int) -> SavedState | None:
        """The state of what was scanned (``at``: where the scan ended), pending requests only; None while an
        inbox command is applied only in part (its records are kept whole, from its MARK_BEGIN on)."""
        if self.group is not None:
            return None
        if not self.hosts or self.lengths is None:
            raise ValueError("a state is made from a scan that keeps hosts and sizes")
        alive = self.alive_mask()
        lengths = self.lengths
        sizes = array("I", lengths)
        for index, size in self.big.items():
            sizes[index] = size
        out = SavedState(ident=ident, at=at, journal_crc=journal_crc, last_record=last_record,
                         pushes=self.pushes_before + len(self.order), dones=self.dones, dropped=self.dropped,
                         paused_since=self.paused_since, priorities=list(self.priorities))
        out.order = array("Q", compress(self.order, alive))
        out.codes = array(self.codes.typecode, compress(self.codes, alive))
        out.hosts = array("I", compress(self.host_ids, alive))
        out.sizes = array("I", compress(sizes, alive))
        rank = previous = 0
        for index, when in zip(self.timed_index, self.timed_at, strict=True):
            rank += alive.count(1, previous, index)
            previous = index
            if alive[index]:
                out.timed_index.append(rank)
                out.timed_at.append(when)
        out.failed = array("Q", self.failed)
        out.fails = array("Q", self.failed.values())
        out.fail_sizes = array("I", (self.fail_sizes.get(target, 0) for target in self.failed))
        out.names = list(self.host_names)
        out.host_done = array("Q", self.host_done)
        out.settings = dict(self.host_settings.items())
        out.applied = list(self.applied.items())[-MAX_COMMANDS:]
        return out

    def code(self, priority: int) -> int:
        """The code of a priority not seen before (the code array widens past 255 priorities)."""
        code = len(self.priorities)
        if code >= self.dead:
            wider = _WIDER[self.codes.typecode]
            old, new = self.dead, _DEAD[wider]
            self.codes = array(wider, (new if c == old else c for c in self.codes))
            self.dead = new
        self.code_of[priority] = code
        self.priorities.append(priority)
        return code

    def host(self, name: bytes) -> int:
        """The id of a host not seen before."""
        hid = self.host_id[name] = len(self.host_names)
        self.host_names.append(name)
        self.host_done.append(0)
        return hid

    def host_record(self, body: memoryview) -> None:
        record = parse_host(body)
        hid = self.host_id.get(record.name)
        if hid is None:
            hid = self.host(record.name)
        self.host_settings[hid] = record
        self.host_done[hid] = record.done

    def record(self, offset: int, body: memoryview, fingerprint: Callable[[bytes], object] | None) -> None:
        """Take one record of any type (the records the fast scan did not read)."""
        kind = kind_of(body)
        if kind == DONE:
            self.done(offset, done_target(body))
        elif kind == HOST:
            if self.hosts:
                self.host_record(body)
        elif kind == FAIL:
            self.fail(offset, fail_target(body), FRAME.size + len(body))
        elif kind == DROP:
            self.drop(offset, done_target(body))
        elif kind in (PAUSE, MARK):
            self.control(offset, kind, body)
        else:
            pushed = parse_push(body, self.version)
            self.push(offset, pushed.priority, FRAME.size + len(body), pushed.slot, pushed.not_before,
                      None if fingerprint is None or pushed.dont_filter else fingerprint, pushed.fingerprint)
            if pushed.target is not None:
                self.done(offset, pushed.target, kind)

    def push(self, offset: int, priority: int, size: int, slot: bytes, not_before: float,
             fingerprint: Callable[[bytes], object] | None, fp: bytes) -> None:
        code = self.code_of.get(priority)
        if code is None:
            code = self.code(priority)  # before self.codes is looked up: a new code may widen it
        self.order.append(offset)
        self.codes.append(code)
        if self.lengths is not None:
            self.size(size)
        if self.hosts:
            hid = self.host_id.get(slot)
            self.host_ids.append(self.host(slot) if hid is None else hid)
        if not_before:
            self.timed_index.append(len(self.order) - 1)
            self.timed_at.append(not_before)
        if fingerprint is not None:
            fingerprint(fp)

    def size(self, size: int) -> None:
        """Keep the size of the PUSH record just added (2 bytes; larger ones aside)."""
        assert self.lengths is not None
        if size < _BIG:
            self.lengths.append(size)
        else:
            self.lengths.append(_BIG)
            self.big[len(self.order) - 1] = size

    def done(self, offset: int, target: int, kind: int = DONE) -> None:
        """A DONE, or the target of a RETRY or REFETCH (``kind``): the request at ``target`` is finished.

        A RETRY may also name a failed request: it is then no longer failed (the RETRY
        record, already taken as a push, is that request pending again).
        """
        if target >= offset:
            problem = f"a DONE record names byte {target}, which is not before it"
        else:
            order, codes = self.order, self.codes
            i = bisect_left(order, target)
            if (i == len(order) or order[i] != target) and target in self.failed:
                i = -1  # a failed request that a saved state lists only as failed
            if i >= 0 and (i == len(order) or order[i] != target):
                problem = self.missing("DONE", target)
            elif i >= 0 and codes[i] != self.dead:
                codes[i] = self.dead
                self.dones += 1
                if self.hosts and kind != RETRY:
                    self.host_done[self.host_ids[i]] += 1
                return
            elif target not in self.failed:
                problem = f"a second DONE record for the PUSH record at byte {target}"
            elif kind == RETRY:
                del self.failed[target]  # requeued: counted as a done by its FAIL already
                self.fail_sizes.pop(target, None)
                return
            else:
                name = "DONE" if kind == DONE else "REFETCH"
                problem = f"a {name} record names the request at byte {target}, which failed (only a RETRY may)"
        if not self.repair:
            raise JobDirCorrupt(self.path, offset, problem)
        self.bad_dones.append((offset, problem))

    def drop(self, offset: int, target: int) -> None:
        """A DROP record: the pending request at ``target`` is removed (not done, not failed)."""
        i = bisect_left(self.order, target) if target < offset else len(self.order)
        if target >= offset:
            problem = f"a DROP record names byte {target}, which is not before it"
        elif i == len(self.order) or self.order[i] != target:
            problem = self.missing("DROP", target)
        elif self.codes[i] == self.dead:
            problem = f"a DROP record names the request at byte {target}, which is not pending"
        else:
            self.codes[i] = self.dead
            self.dones += 1
            self.dropped += 1
            return
        if not self.repair:
            raise JobDirCorrupt(self.path, offset, problem)
        self.bad_dones.append((offset, problem))

    def control(self, offset: int, kind: int, body: memoryview | bytes) -> None:
        """A PAUSE or MARK record (format 5)."""
        if kind == PAUSE:
            paused, at = parse_pause(body)
            self.paused_since = at if paused else None
            return
        mark = parse_mark(body)
        assert mark is not None  # the walk checked it
        problem = None
        if mark.phase == MARK_BEGIN:
            if self.group is not None:
                problem = f"command {mark.ident} begins before command {self.group[0]} ended"
            else:
                self.group = (mark.ident, offset, len(self.order), self.dropped)
                return
        elif self.group is None or self.group[0] != mark.ident:
            problem = f"command {mark.ident} ends without having begun"
        else:
            self.group = None
            self.applied[mark.ident] = mark.result
            return
        if not self.repair:
            raise JobDirCorrupt(self.path, offset, f"a MARK record out of place: {problem}")
        self.bad_dones.append((offset, problem))

    def fail(self, offset: int, target: int, size: int = 0) -> None:
        """A FAIL record (of ``size`` bytes): the pending request at ``target`` is finished as failed."""
        if target >= offset:
            problem = f"a FAIL record names byte {target}, which is not before it"
        else:
            order, codes = self.order, self.codes
            i = bisect_left(order, target)
            if (i == len(order) or order[i] != target) and target in self.failed:
                problem = f"a FAIL record names the request at byte {target}, which is not pending (it is failed)"
            elif i == len(order) or order[i] != target:
                problem = self.missing("FAIL", target)
            elif codes[i] == self.dead:
                what = "failed" if target in self.failed else "done"
                problem = f"a FAIL record names the request at byte {target}, which is not pending (it is {what})"
            else:
                codes[i] = self.dead
                self.dones += 1
                self.failed[target] = offset
                lengths = self.lengths
                if lengths is not None:
                    self.fail_sizes[target] = size + (lengths[i] if lengths[i] < _BIG else self.big[i])
                if self.hosts:
                    self.host_done[self.host_ids[i]] += 1
                return
        if not self.repair:
            raise JobDirCorrupt(self.path, offset, problem)
        self.bad_dones.append((offset, problem))

    def missing(self, name: str, target: int) -> str:
        """The problem of a record ``name`` naming ``target``, where the scan found no request record."""
        if target < self.start:
            return (f"a {name} record names byte {target}, where no request that was pending at the checkpoint "
                    f"(byte {self.start}) starts")
        return f"a {name} record names byte {target}, where no {'PUSH' if name == 'DONE' else 'request'} record starts"

    def leave_out(self, offsets: tuple[int, ...]) -> None:
        """Take the pending requests at ``offsets`` out of the pending ones, not counted as done."""
        order, lengths = self.order, self.lengths
        for offset in offsets:
            i = bisect_left(order, offset)
            if i < len(order) and order[i] == offset and self.codes[i] != self.dead:
                self.codes[i] = self.dead
                if lengths is not None:  # still pending as far as the journal goes: its bytes are live
                    self.left_out_bytes += lengths[i] if lengths[i] < _BIG else self.big[i]

    def alive_mask(self) -> bytes:
        """One byte per PUSH in push order: 1 if it is pending."""
        if self.codes.typecode == "B":
            return self.codes.tobytes().translate(bytes(int(c != self.dead) for c in range(256)))
        return bytes(int(c != self.dead) for c in self.codes)

    def finish(self, state: JournalState, offsets: bool, hold_after: float | None = None) -> None:
        state.order, state.codes, state.priorities = self.order, self.codes, self.priorities
        state.pushes, state.dones, state.bad_dones = self.pushes_before + len(self.order), self.dones, self.bad_dones
        state.failed = self.failed
        state.failed_bytes = sum(self.fail_sizes.values())
        state.started_at = self.start
        state.paused_since, state.dropped, state.applied = self.paused_since, self.dropped, self.applied
        if self.group is not None:
            ident, at, stored, dropped = self.group
            state.open_group = OpenGroup(ident, at, len(self.order) - stored, self.dropped - dropped)
        state.timed_index, state.timed_at = self.timed_index, self.timed_at
        if self.hosts:
            state.host_names, state.host_ids, state.host_done = self.host_names, self.host_ids, self.host_done
            state.host_settings = self.host_settings
            state.host_pending = dict(Counter(compress(self.host_ids, self.alive_mask())))
        if self.lengths is not None:
            alive = self.alive_mask()
            state.live_bytes = sum(compress(self.lengths, alive))
            state.live_bytes += sum(size - _BIG for i, size in self.big.items() if alive[i]) + self.left_out_bytes
        held: list[tuple[int, int]] = []  # (push index, code) of the requests held back until later
        if hold_after is not None:
            for index, due in zip(self.timed_index, self.timed_at, strict=True):
                code = self.codes[index]
                if due > hold_after and code != self.dead:
                    held.append((index, code))
                    state.delayed.append((self.order[index], self.priorities[code], due))
                    self.codes[index] = self.dead
        try:
            self._draw(state, offsets)
        finally:
            for index, code in held:
                self.codes[index] = code
        for _offset, priority, _due in state.delayed:
            state.counts[priority] = state.counts.get(priority, 0) + 1

    def _draw(self, state: JournalState, offsets: bool) -> None:
        few = self.codes.typecode == "B" and len(self.priorities) <= _FEW_PRIORITIES
        if few or not offsets:
            raw = self.codes.tobytes() if few else None
            for code, priority in enumerate(self.priorities):
                if raw is not None:
                    count = raw.count(code.to_bytes(1, "big"))
                else:
                    count = self.codes.count(code)
                if not count:
                    continue
                state.counts[priority] = count
                if offsets and raw is not None:
                    selector = raw.translate(_selector_table(code))
                    state.pending[priority] = array("Q", compress(self.order, selector))
            return
        for i, code in enumerate(self.codes):  # many priorities: one Python pass
            if code == self.dead:
                continue
            priority = self.priorities[code]
            bucket = state.pending.get(priority)
            if bucket is None:
                bucket = state.pending[priority] = array("Q")
            bucket.append(self.order[i])
        state.counts = {p: len(bucket) for p, bucket in state.pending.items()}


def _selector_table(code: int) -> bytes:
    table = bytearray(256)
    table[code] = 1
    return bytes(table)


def read_state(
    path: str, *, salt: int, floor: int = 0, repair: bool = False, fingerprint: Callable[[bytes], object] | None = None,
    fingerprints_from: int = 0, progress: Progress | None = None, sizes: bool = False, offsets: bool = True,
    floor_crc: int | None = None, hosts: bool = False, hold_after: float | None = None,
    prefix: tuple[int, int] | None = None, exclude: Collection[int] = (), start: SavedState | None = None,
    until: int | None = None, save: str | None = None,
) -> JournalState:
    """Scan the journal at ``path`` once; see the module docstring.

    ``salt``: the job directory's (``jobdir.salt_of``), which a format-4 journal's checksums hold.
    ``floor``: the length the journal had at its last checkpoint (a shorter file, or
    damage below it, is an error, not a torn tail). ``repair``: damage is collected in
    ``state.scan.damage`` and ``state.bad_dones`` instead of raised. ``fingerprint`` is
    called with each filtered PUSH's fingerprint at or after byte ``fingerprints_from``.
    ``sizes``: keep each pending record's size (for ``live_bytes``). ``offsets=False``:
    only the counts per priority (``pending`` stays empty). ``floor_crc``: the crc32 of
    the journal's first ``floor`` bytes as a checkpoint recorded it; the records below the
    floor are then checked by that one crc instead of one by one (if it does not match,
    the scan starts again checking every record). ``state.end_crc`` is the crc32 of the
    journal up to ``state.scan.end`` when the scan could tell. ``hosts``: keep each
    request's host and the HOST records (``state.host_*``). ``hold_after``: pending
    requests whose not_before is later than this go to ``state.delayed`` instead of
    ``state.pending`` (they are still counted). ``prefix``: (length, crc32) of a start of the journal
    that a checkpoint vouches for, used as ``floor_crc`` is but without making that length a floor
    (for a read-only view, which reports a cut journal rather than refusing it). ``exclude``: offsets of
    pending requests to leave out of the pending ones (those in flight in a running frontier; they are
    not counted as done).

    ``start``: a saved state (``statefile.py``) to begin from instead of the journal's first record:
    only the records from ``start.at`` on are read, after checking that the journal's first
    ``start.at`` bytes have the crc32 it names (else ``StateUnusable``; ``repair`` never starts from
    one). ``until``: read no record at or past this offset (the end the journal had when a checkpoint
    was asked for; the records before it must all be intact). ``save``: the directory's id, to
    return the state at the end of the scan as ``state.saved`` (``hosts`` and ``sizes`` are then
    needed; None when the scan could not vouch for every byte up to its end, or left an inbox command
    half applied).
    """
    if start is not None and repair:
        raise ValueError("a repair reads the journal from its start")
    options = _Options(salt, floor, repair, fingerprint, fingerprints_from, progress, sizes, offsets, hosts, hold_after,
                       tuple(exclude), start, until, save)
    trusted = (floor, floor_crc) if floor_crc is not None else prefix
    if trusted is not None and not repair:
        try:
            return _read_state(path, options, trusted)
        except _PrefixMismatch:
            pass  # checked record by record below: damage is named where it is
    return _read_state(path, options, None)


@dataclass(frozen=True)
class _Options:
    salt: int
    floor: int
    repair: bool
    fingerprint: Callable[[bytes], object] | None
    fingerprints_from: int
    progress: Progress | None
    sizes: bool
    offsets: bool
    hosts: bool
    hold_after: float | None
    exclude: tuple[int, ...]
    start: SavedState | None = None
    until: int | None = None
    save: str | None = None


class _PrefixMismatch(Exception):
    """The journal's bytes below the floor are not those the checkpoint's crc describes."""


def _read_state(path: str, options: _Options, trusted: tuple[int, int] | None) -> JournalState:
    state = JournalState()
    floor, fingerprint, progress = options.floor, options.fingerprint, options.progress
    last, stop, size, end_crc, version = -1, -1, 0, None, 4
    start, until = options.start, options.until
    with open_file(path) as f:
        size = os.fstat(f.fileno()).st_size
        if until is not None:
            if size < until:
                raise JobDirCorrupt(path, size, f"the journal is {size:,} bytes, shorter than the {until:,} asked for")
            size = until
        if size >= floor:
            version = journal_version(path, f.read(len(MAGIC)), size)
        collect = _Collector(path, options.repair, options.sizes, options.hosts, version)
        begin = (len(MAGIC), -1, MAGIC_CRC)
        if start is not None:
            if version != 4:
                raise StateUnusable(f"the journal is of format {version}")
            check_state_prefix(f, size, start)
            collect.load(start)
            begin = (start.at, start.last_record, start.journal_crc)
            if fingerprint is not None and options.fingerprints_from < start.at:
                _fingerprints_between(f, max(options.fingerprints_from, len(MAGIC)), start.at, options.salt,
                                      fingerprint)
        if size >= floor and version >= 3:
            stop, last, end_crc = _fast_scan(f, size, collect, fingerprint, options.fingerprints_from, progress,
                                             trusted, options.salt, version, begin)
    if stop == size:  # the fast scan read every record
        state.scan = ScanResult(size=size, end=size, version=version)
    elif until is not None:
        raise JobDirCorrupt(path, stop, "a record before the end asked for is not intact")
    else:
        scan = JournalScan(path, salt=options.salt, repair=options.repair, floor=floor, start=max(stop, 0))
        pushes = len(collect.order)
        for offset, body in scan:
            last = offset
            collect.record(offset, body, fingerprint if offset >= options.fingerprints_from else None)
            pushes += 1
            if progress is not None and pushes % _PROGRESS_EVERY == 0:
                progress(offset, scan.result.size)
        state.scan = scan.result
    state.end_crc = end_crc if state.scan.end == stop else None
    state.last_record = last
    if options.save is not None and state.end_crc is not None and not state.scan.damage and not collect.bad_dones:
        state.saved = collect.saved(options.save, state.scan.end, state.end_crc, last)
    collect.leave_out(options.exclude)
    collect.finish(state, options.offsets, options.hold_after)
    if progress is not None:
        progress(state.scan.size, state.scan.size)
    return state


def _fingerprints_between(f: IO[bytes], low: int, high: int, salt: int, fingerprint: Callable[[bytes], object]) -> None:
    """Call ``fingerprint`` with the fingerprint of each request record (not ``dont_filter``) from byte ``low`` to
    byte ``high``: records a saved state covers whose fingerprints requests.seen may still lack (the checkpoint's
    floor is below the state). Those bytes are vouched for by the state's crc32, checked before."""
    fp_start = FRAME.size + PUSH_HEAD.size
    pos, want = low, CHUNK
    stop = Stop()
    while pos < high:
        f.seek(pos)
        buf = f.read(min(want, high - pos))
        for rel, fields in walk(buf, pos, salt, 4, stop, at_end=pos + len(buf) == high, trusted_to=len(buf)):
            kind = fields[3]
            if kind in (PUSH, RETRY, REFETCH) and not fields[5] & FLAG_DONT_FILTER:
                at = rel + fp_start
                fingerprint(buf[at:at + fields[6]])
        if stop.problem is not None or (stop.rel == 0 and not want < stop.want <= high - pos):
            raise StateUnusable(f"the journal's records from byte {low} on do not follow one another")
        want = stop.want if stop.rel == 0 else CHUNK
        pos += stop.rel


def check_state_prefix(f: IO[bytes], size: int, start: SavedState) -> None:
    """Raise ``StateUnusable`` unless the journal open as ``f`` (``size`` bytes) has ``start.journal_crc``
    as the crc32 of its first ``start.at`` bytes."""
    if start.at > size:
        raise StateUnusable(f"it describes {start.at:,} bytes of journal, and the journal holds {size:,}")
    if start.at < len(MAGIC):
        raise StateUnusable(f"it describes {start.at} bytes of journal, fewer than its magic")
    crc, pos = 0, 0
    f.seek(0)
    while pos < start.at:
        chunk = f.read(min(CHUNK, start.at - pos))
        if not chunk:
            break
        crc = zlib.crc32(chunk, crc)
        pos += len(chunk)
    if pos != start.at or crc != start.journal_crc:
        raise StateUnusable(f"the journal's first {start.at:,} bytes are not those it describes (another journal, "
                            f"or one compacted or changed since)")


def _fast_scan(
    f: IO[bytes], size: int, collect: _Collector, fingerprint: Callable[[bytes], object] | None,
    fingerprints_from: int, progress: Progress | None, trusted: tuple[int, int] | None, salt: int, version: int,
    begin: tuple[int, int, int] = (len(MAGIC), -1, MAGIC_CRC),
) -> tuple[int, int, int]:
    """Take the intact records of a format-3 or -4 journal from the first one, as ``journal.walk`` finds them.

    Returns where it stopped, the last record's offset and the crc32 of the bytes up to
    where it stopped. It stops at the end of the file or at the first record that the walk
    does not take: ``JournalScan`` goes on from there and decides what that record is.
    ``trusted``: (floor, crc32 of the bytes below it): records below the floor are taken
    without their checksums, and ``_PrefixMismatch`` is raised unless the bytes below the
    floor have that crc.
    """
    crc32 = zlib.crc32
    order_append, code_of = collect.order.append, collect.code_of
    codes_append = collect.codes.append
    lengths_append = collect.lengths.append if collect.lengths is not None else None
    host_append = collect.host_ids.append if collect.hosts else None
    host_id = collect.host_id
    timed_index, timed_at = collect.timed_index.append, collect.timed_at.append
    done, fail = collect.done, collect.fail
    order, codes, dead = collect.order, collect.codes, collect.dead
    host_ids, host_done = (collect.host_ids, collect.host_done) if collect.hosts else (None, None)
    finished = 0  # DONE records taken on the usual path below (collect.dones gains them at the end)
    header, fp_start = FRAME.size, FRAME.size + PUSH_HEAD.size  # where a request's fingerprint starts in its record
    pos, last, running = begin  # running: the crc32 of the file up to pos
    want = CHUNK
    floor, floor_crc = trusted if trusted is not None else (0, 0)
    if floor <= pos:
        trusted = None  # the bytes below the floor are vouched for by what the scan began from
    stop = Stop()
    while pos < size:
        f.seek(pos)
        buf = f.read(min(want, size - pos))
        for rel, fields in walk(buf, pos, salt, version, stop, at_end=pos + len(buf) == size, trusted_to=floor - pos):
            at = pos + rel
            kind = fields[3]
            if kind == DONE:  # the usual one inline (collect.done's first case); anything else goes to it
                target = _TARGET(buf, rel + header + TARGET_AT)[0]
                i = bisect_left(order, target)
                if target < at and i < len(order) and order[i] == target and codes[i] != dead:
                    codes[i] = dead
                    finished += 1
                    if host_done is not None:
                        host_done[host_ids[i]] += 1  # type: ignore[index]
                else:
                    done(at, target)
            elif kind == HOST:
                if host_append is not None:
                    collect.host_record(memoryview(buf)[rel + header:rel + header + fields[0]])
            elif kind == FAIL:
                fail(at, _TARGET(buf, rel + header + TARGET_AT)[0], header + fields[0])
            elif kind > FAIL:  # DROP, PAUSE or MARK (format 5): rare, so one test on the way of every PUSH
                if kind == DROP:
                    collect.drop(at, _TARGET(buf, rel + header + TARGET_AT)[0])
                else:
                    collect.control(at, kind, memoryview(buf)[rel + header:rel + header + fields[0]])
            else:  # PUSH, RETRY or REFETCH: records.FRAMED_HEAD, then fingerprint, slot, record (and target)
                length, _crc, _check, _kind, priority, flags, fplen, slotlen, _attempts, not_before = fields
                code = code_of.get(priority)
                if code is None:
                    code = collect.code(priority)
                    codes = collect.codes  # the array may have widened
                    codes_append, dead = codes.append, collect.dead
                order_append(at)
                codes_append(code)
                if lengths_append is not None:
                    if header + length < _BIG:
                        lengths_append(header + length)
                    else:
                        collect.size(header + length)
                fp = rel + fp_start
                if host_append is not None:
                    slot = buf[fp + fplen:fp + fplen + slotlen]
                    hid = host_id.get(slot)
                    host_append(collect.host(slot) if hid is None else hid)
                if not_before:
                    timed_index(len(collect.order) - 1)
                    timed_at(not_before)
                if fingerprint is not None and not flags & FLAG_DONT_FILTER and at >= fingerprints_from:
                    fingerprint(buf[fp:fp + fplen])
                if kind != PUSH:
                    done(at, _TARGET(buf, rel + header + length - 8)[0], kind)
            last = at
        rel = stop.rel
        view = memoryview(buf)
        if stop.problem is not None or (rel == 0 and not want < stop.want <= size - pos):
            collect.dones += finished
            finished = 0
            _check_prefix(running, view, pos, rel, floor, floor_crc, trusted)
            return pos + rel, last, crc32(view[:rel], running)
        if rel == 0:  # a record longer than what was read: read it whole
            want = stop.want
            continue
        if pos < floor <= pos + rel:
            running = crc32(view[:floor - pos], running)
            if running != floor_crc:
                raise _PrefixMismatch
            running = crc32(view[floor - pos:rel], running)
        else:
            running = crc32(view[:rel], running)
        pos += rel
        want = CHUNK
        if progress is not None:
            progress(pos, size)
    collect.dones += finished
    _check_prefix(running, b"", pos, 0, floor, floor_crc, trusted)
    return pos, last, running


def _check_prefix(
    running: int, view: memoryview | bytes, pos: int, rel: int, floor: int, floor_crc: int,
    trusted: tuple[int, int] | None,
) -> None:
    """Where the fast scan stops: raise ``_PrefixMismatch`` unless the bytes below the floor were checked and match.

    ``running`` is the crc32 of the file up to ``pos``; ``view[:rel]`` follows it.
    """
    if trusted is None or pos >= floor:
        return  # nothing was taken unchecked, or the floor's crc was checked when the scan passed it
    if pos + rel < floor or crc32_of(view[:floor - pos], running) != floor_crc:
        raise _PrefixMismatch
