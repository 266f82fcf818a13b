"""The one scan of the journal: what is pending, checked.

``read_state`` reads ``requests.urls`` once and returns the pending PUSH offsets per
priority (in journal order, which is push order), the counts, and where the intact
records end. Recovery, compaction, verify, inspect, peek and export all use it, so
"pending = PUSH - DONE" is computed in one place and checked in one place:

* every record's checksum covers its own offset (``journal.py``);
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

The records of an intact journal are read by a tight loop here, checked as
``JournalScan`` checks them (both checksums, seeded with the record's identity, and the
record's type and size); at the first record that is not plainly intact (damage, a
torn tail, a record larger than a read), the rest goes to ``JournalScan``, which
decides what it is. A format-1 journal goes to ``JournalScan`` from the start.
"""

from __future__ import annotations

import os
import struct
import zlib
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import compress
from typing import IO

from ..errors import JobDirCorrupt
from ..files.safefs import open_file
from .journal import (
    CHUNK,
    DONE,
    FAIL,
    FLAG_DONT_FILTER,
    FRAME,
    HOST,
    MAGIC,
    MAGIC_CRC,
    MAX_BODY,
    MAX_TIME,
    PUSH,
    PUSH_HEAD,
    PUSH_HEAD_V2,
    RETRY,
    HostRecord,
    JournalScan,
    ScanResult,
    body_ok_v3,
    done_target,
    journal_version,
    parse_host,
)

Progress = Callable[[int, int], None]
_PROGRESS_EVERY = 1 << 16
_WIDER = {"B": "H", "H": "I"}
_DEAD = {"B": 0xFF, "H": 0xFFFF, "I": 0xFFFFFFFF}
_BIG = 0xFFFF  # record sizes from here on are kept aside
_FEW_PRIORITIES = 16  # up to this many, the pending offsets are drawn with one C pass per priority
_TARGET = struct.Struct(">Q").unpack_from
crc32_of = zlib.crc32
_FRAME_AND_KIND = struct.Struct(">IIHB")  # a frame and the type of its body, read in one call
_HEAD_AFTER_KIND = struct.Struct(">iBBBHd")  # the rest of a PUSH head: priority, flags, fplen, slotlen, attempts, time
_FP_START = PUSH_HEAD.size


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
        kind = body[0]
        if kind == DONE:
            self.done(offset, done_target(body))
        elif kind == HOST:
            if self.hosts:
                self.host_record(body)
        elif kind == FAIL:
            self.fail(offset, _TARGET(body, 1)[0])
        else:
            self.push(offset, body, fingerprint)
            if kind != PUSH:
                self.done(offset, _TARGET(body, len(body) - 8)[0], kind)

    def push(self, offset: int, body: memoryview, fingerprint: Callable[[bytes], object] | None) -> None:
        priority = int.from_bytes(body[1:5], "big", signed=True)
        code = self.code_of.get(priority)
        if code is None:
            code = self.code(priority)  # before self.codes is looked up: a new code may widen it
        self.order.append(offset)
        self.codes.append(code)
        if self.lengths is not None:
            self.size(FRAME.size + len(body))
        fp_start = _FP_START if self.version >= 3 else PUSH_HEAD_V2.size
        fp_end = fp_start + body[fp_start - 1 if self.version < 3 else 6]
        if self.version >= 3:
            _, _, _, slotlen, _, not_before = _HEAD_AFTER_KIND.unpack_from(body, 1)
            if self.hosts:
                slot = bytes(body[fp_end:fp_end + slotlen])
                hid = self.host_id.get(slot)
                self.host_ids.append(self.host(slot) if hid is None else hid)
            if not_before:
                self.timed_index.append(len(self.order) - 1)
                self.timed_at.append(not_before)
        if fingerprint is not None and not body[5] & FLAG_DONT_FILTER:
            fingerprint(bytes(body[fp_start:fp_end]))

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
            if i == len(order) or order[i] != target:
                problem = f"a DONE record names byte {target}, where no PUSH record starts"
            elif codes[i] != self.dead:
                codes[i] = self.dead
                self.dones += 1
                if self.hosts and kind != RETRY:
                    self.host_done[self.host_ids[i]] += 1
                return
            elif target not in self.failed:
                problem = f"a second DONE record for the PUSH record at byte {target}"
            elif kind == RETRY:
                del self.failed[target]  # requeued: counted as a done by its FAIL already
                return
            else:
                name = "DONE" if kind == DONE else "REFETCH"
                problem = f"a {name} record names the request at byte {target}, which failed (only a RETRY may)"
        if not self.repair:
            raise JobDirCorrupt(self.path, offset, problem)
        self.bad_dones.append((offset, problem))

    def fail(self, offset: int, target: int) -> None:
        """A FAIL record: the pending request at ``target`` is finished as failed."""
        if target >= offset:
            problem = f"a FAIL record names byte {target}, which is not before it"
        else:
            order, codes = self.order, self.codes
            i = bisect_left(order, target)
            if i == len(order) or order[i] != target:
                problem = f"a FAIL record names byte {target}, where no request record starts"
            elif codes[i] == self.dead:
                what = "failed" if target in self.failed else "done"
                problem = f"a FAIL record names the request at byte {target}, which is not pending (it is {what})"
            else:
                codes[i] = self.dead
                self.dones += 1
                self.failed[target] = offset
                if self.hosts:
                    self.host_done[self.host_ids[i]] += 1
                return
        if not self.repair:
            raise JobDirCorrupt(self.path, offset, problem)
        self.bad_dones.append((offset, problem))

    def alive_mask(self) -> bytes:
        """One byte per PUSH in push order: 1 if it is pending."""
        if self.codes.typecode == "B":
            return self.codes.tobytes().translate(bytes(int(c != self.dead) for c in range(256)))
        return bytes(int(c != self.dead) for c in self.codes)

    def finish(self, state: JournalState, offsets: bool, hold_after: float | None = None) -> None:
        state.order, state.codes, state.priorities = self.order, self.codes, self.priorities
        state.pushes, state.dones, state.bad_dones = len(self.order), self.dones, self.bad_dones
        state.failed = self.failed
        state.timed_index, state.timed_at = self.timed_index, self.timed_at
        if self.hosts:
            state.host_names, state.host_ids, state.host_done = self.host_names, self.host_ids, self.host_done
            state.host_settings = self.host_settings
            state.host_pending = dict(Counter(compress(self.host_ids, self.alive_mask())))
        if self.lengths is not None:
            alive = self.alive_mask()
            state.live_bytes = sum(compress(self.lengths, alive))
            state.live_bytes += sum(size - _BIG for i, size in self.big.items() if alive[i])
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
    ``state.pending`` (they are still counted).
    """
    options = _Options(salt, floor, repair, fingerprint, fingerprints_from, progress, sizes, offsets, hosts, hold_after)
    if floor_crc is not None and not repair:
        try:
            return _read_state(path, options, (floor, floor_crc))
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


class _PrefixMismatch(Exception):
    """The journal's bytes below the floor are not those the checkpoint's crc describes."""


def _read_state(path: str, options: _Options, trusted: tuple[int, int] | None) -> JournalState:
    state = JournalState()
    floor, fingerprint, progress = options.floor, options.fingerprint, options.progress
    last, stop, size, end_crc, version = -1, -1, 0, None, 4
    with open_file(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size >= floor:
            version = journal_version(path, f.read(len(MAGIC)), size)
        collect = _Collector(path, options.repair, options.sizes, options.hosts, version)
        if size >= floor and version >= 3:
            salt = options.salt if version == 4 else 0
            stop, last, end_crc = _fast_scan(f, size, collect, fingerprint, options.fingerprints_from, progress,
                                             trusted, salt)
    if stop == size:  # the fast scan read every record
        state.scan = ScanResult(size=size, end=size, version=version)
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
    collect.finish(state, options.offsets, options.hold_after)
    if progress is not None:
        progress(state.scan.size, state.scan.size)
    return state


def _fast_scan(
    f: IO[bytes], size: int, collect: _Collector, fingerprint: Callable[[bytes], object] | None,
    fingerprints_from: int, progress: Progress | None, trusted: tuple[int, int] | None, salt: int,
) -> tuple[int, int, int]:
    """Read plainly intact format-3 or -4 records from the first one (``salt``: 0 for format 3).

    Returns where it stopped, the last record's offset and the crc32 of the bytes up to
    where it stopped. It stops at the end of the file or at the first record it does
    not take as plainly intact: ``JournalScan`` goes on from there and decides what that
    record is. ``trusted``: (floor, crc32 of the bytes below it): records below the floor
    are taken without their own checks, and ``_PrefixMismatch`` is raised unless the
    bytes below the floor have that crc.
    """
    unpack, head, crc32 = _FRAME_AND_KIND.unpack_from, _HEAD_AFTER_KIND.unpack_from, zlib.crc32
    order_append, code_of = collect.order.append, collect.code_of
    codes_append = collect.codes.append
    lengths_append = collect.lengths.append if collect.lengths is not None else None
    host_append = collect.host_ids.append if collect.hosts else None
    host_id = collect.host_id
    timed_index, timed_at = collect.timed_index.append, collect.timed_at.append
    done, fail = collect.done, collect.fail
    header, least, fp_start = FRAME.size, _FRAME_AND_KIND.size, _FP_START
    pos, last, want = len(MAGIC), -1, CHUNK
    floor, floor_crc = trusted if trusted is not None else (0, 0)
    running = MAGIC_CRC  # the crc32 of the file up to pos
    while pos < size:
        f.seek(pos)
        buf = f.read(min(want, size - pos))
        view = memoryview(buf)
        n, rel = len(buf), 0
        unchecked = floor - pos  # records ending at or before this point of buf were checked by floor_crc
        while rel + least <= n:
            length, crc, check, kind = unpack(buf, rel)
            body = rel + header
            end = body + length
            if end > n or not length:  # (a zero length: damage below the floor, named by JournalScan)
                if length:
                    break
                _check_prefix(running, view, pos, rel, floor, floor_crc, trusted)
                return pos + rel, last, crc32(view[:rel], running)
            at = pos + rel
            if end > unchecked:
                seed = (at ^ (at >> 32) ^ salt) & 0xFFFFFFFF  # identity(at, salt), inline
                if crc32(view[body:end], seed) != crc or crc32(view[rel:rel + 4], seed) & 0xFFFF != check:
                    _check_prefix(running, view, pos, rel, floor, floor_crc, trusted)
                    return at, last, crc32(view[:rel], running)
            if kind == 2 and length == 9:
                done(at, _TARGET(buf, body + 1)[0])
            elif (kind == 1 or kind == 4 or kind == 5) and length >= fp_start:
                priority, flags, fplen, slotlen, _attempts, not_before = head(buf, body + 1)
                if length <= fp_start + fplen + slotlen + (0 if kind == 1 else 8) or (
                        not_before and not 0.0 < not_before <= MAX_TIME):
                    _check_prefix(running, view, pos, rel, floor, floor_crc, trusted)
                    return at, last, crc32(view[:rel], running)
                code = code_of.get(priority)
                if code is None:
                    code = collect.code(priority)
                    codes_append = collect.codes.append  # the array may have widened
                order_append(at)
                codes_append(code)
                if lengths_append is not None:
                    if header + length < _BIG:
                        lengths_append(header + length)
                    else:
                        collect.size(header + length)
                fp = body + fp_start
                if host_append is not None:
                    slot = buf[fp + fplen:fp + fplen + slotlen]
                    hid = host_id.get(slot)
                    host_append(collect.host(slot) if hid is None else hid)
                if not_before:
                    timed_index(len(collect.order) - 1)
                    timed_at(not_before)
                if fingerprint is not None and not flags & 1 and at >= fingerprints_from:
                    fingerprint(buf[fp:fp + fplen])
                if kind != 1:
                    done(at, _TARGET(buf, end - 8)[0], kind)
            elif kind == 3 and body_ok_v3(view[body:end]):
                if host_append is not None:
                    collect.host_record(view[body:end])
            elif kind == 6 and body_ok_v3(view[body:end]):
                fail(at, _TARGET(buf, body + 1)[0])
            else:
                _check_prefix(running, view, pos, rel, floor, floor_crc, trusted)
                return at, last, crc32(view[:rel], running)
            last = at
            rel = end
        if rel == 0:  # the first record does not fit in what was read
            if n >= header:
                length = FRAME.unpack_from(buf, 0)[0]
                if 0 < length <= MAX_BODY and pos + header + length <= size and want < header + length:
                    want = header + length
                    continue
            _check_prefix(running, view, pos, 0, floor, floor_crc, trusted)
            return pos, last, running
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
