"""``requests.urls``: the recovery journal, the truth of what is pending.

Format 4. The file starts with the 8-byte magic ``DFURLS\\x00\\x04``. Then records, each
a 10-byte frame ``length:u32 crc32:u32 check:u16`` (big-endian) and a body of ``length``
bytes whose first byte is its type:

* PUSH ``0x01 priority:i32 flags:u8 fplen:u8 slotlen:u8 attempts:u16 not_before:f64
  fingerprint slot request-record``; flags bit 0 is ``dont_filter``; ``slot`` is the
  request's queue key (its host, UTF-8); ``not_before`` is a ``time.time()`` value, 0
  for "now". The request record is msgpack (``request/codec.py``).
* DONE ``0x02 offset:u64``: the PUSH record at that byte offset is finished.
* HOST ``0x03 namelen:u8 delay:f64 blocked_until:f64 budget:i64 done:u64 name``: the
  settings of one host, and how many of its requests were done, as of this record
  (``delay`` NaN: the frontier's default; ``blocked_until`` 0: not blocked; ``budget``
  -1: none). The last HOST record of a host wins.
* RETRY ``0x04`` and REFETCH ``0x05``: a PUSH body (with this type byte) followed by
  ``target:u64``: the in-flight PUSH at ``target`` is finished and this request is
  pending in its place, in one record (REFETCH counts the target as done, RETRY not).
  A RETRY may also name a failed request (below): it is then no longer failed, and this
  record is it, pending again (``requeue_failed``).
* FAIL ``0x06 target:u64 failed_at:f64 error``: the in-flight request at ``target`` is
  finished as failed (not pending, counted as done for its host) at ``failed_at`` (a
  ``time.time()`` value), with ``error``: UTF-8 text of at most ``MAX_ERROR`` (4,000)
  bytes, possibly empty.

Both checksums start from the record's identity, its byte offset folded to 32 bits
and mixed with the job directory's salt (``(offset ^ offset >> 32 ^ salt) & 0xFFFFFFFF``;
the salt comes from the random ``id`` made when the directory was created, see
``jobdir.salt_of``): ``crc32`` is the crc32 of the body continued from it, and
``check`` the low 16 bits of the crc32 of the length (u32) continued from it. So a
record is only valid where it was written, in the directory that wrote it (a record
copied, swapped or shifted elsewhere, or taken from a sibling directory built by the
same steps, fails its check), and a damaged length field is told apart from a write
cut short. A request's identity is the byte offset of its PUSH (or RETRY, REFETCH) record.
Pending = PUSH + RETRY + REFETCH - DONE - RETRY - REFETCH - FAIL targets; a RETRY whose
target is a failed request makes it pending again instead of finishing it. Failed =
FAIL targets not named by a later RETRY. A DONE, RETRY, REFETCH or FAIL must name an
earlier request that is pending (a RETRY: or failed); anything else is damage.

A bad record is a torn tail (cut at the next open) only when it looks like what a
kill leaves (a frame cut short, or an intact frame whose record runs past the end of
the file, or zeros to the end), nothing intact follows it, and it lies at or above
the journal's last checkpointed end (the ``floor``). Anything else is damage, named
by its byte offset.

Format 3 (``DFURLS\\x00\\x03``) is format 4 with no salt (the identity is the folded
offset alone). Format 2 (``DFURLS\\x00\\x02``: the same frame, PUSH ``0x01 priority:i32 flags:u8
fplen:u8 fingerprint request-record`` and DONE only) and format 1 (``DFURLS\\x00\\x01``,
an 8-byte frame ``length crc32`` with the crc32 of the body alone) are read to upgrade
them (``maintenance/upgrade.py``) and never written.
"""

from __future__ import annotations

import math
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO

from ..contract import MAX_ATTEMPTS as MAX_ATTEMPTS  # the limits are the contract's; kept here for old imports
from ..contract import MAX_ERROR, MAX_SECONDS, MAX_TIME
from ..errors import FormatError, FrontierError, JobDirCorrupt
from ..files.atomic import write_all
from ..files.safefs import open_fd, open_file
from ..files.writeerrors import naming, raise_named

MAGIC = b"DFURLS\x00\x04"
MAGIC_V3 = b"DFURLS\x00\x03"
MAGIC_V2 = b"DFURLS\x00\x02"
MAGIC_V1 = b"DFURLS\x00\x01"
FRAME = struct.Struct(">IIH")
FRAME_V1 = struct.Struct(">II")
_crc32 = zlib.crc32
_U32_PACK = struct.Struct(">I").pack
_FRAME_PACK = FRAME.pack
_FRAME_UNPACK = FRAME.unpack_from
_HEADER = FRAME.size
PUSH_HEAD = struct.Struct(">BiBBBHd")  # type, priority, flags, fplen, slotlen, attempts, not_before
PUSH_HEAD_V2 = struct.Struct(">BiBB")
_PUSH_SIZE = PUSH_HEAD.size
_PUSH_HEAD_PACK = PUSH_HEAD.pack
DONE_BODY = struct.Struct(">BQ")
_DONE_PACK = DONE_BODY.pack
_DONE_SIZE = DONE_BODY.size
_DONE_LENGTH = struct.pack(">I", DONE_BODY.size)
HOST_HEAD = struct.Struct(">BBddqQ")  # type, namelen, delay, blocked_until, budget, done
OFFSET = struct.Struct(">Q")
FAIL_HEAD = struct.Struct(">BQd")  # type, target, failed_at; the error text follows
PUSH, DONE, HOST, RETRY, REFETCH, FAIL = 1, 2, 3, 4, 5, 6
REQUEUES = (RETRY, REFETCH)  # records that finish one request and make it pending again
CARRIES_REQUEST = (PUSH, RETRY, REFETCH)
FLAG_DONT_FILTER = 1
MAX_BODY = 1 << 30
MAGIC_CRC = zlib.crc32(MAGIC)  # the crc32 of a journal that holds no record yet
CHUNK = 8 << 20


def identity(offset: int, salt: int) -> int:
    """The 32-bit value a record's checksums start from: its offset folded to 32 bits, xor the
    directory's salt (``salt_of`` its id in ``frontier.json``; 0 for a format-2 or -3 journal).

    crc32 continued from two different values gives two different results for the same
    bytes, so a record checks only at its own offset of its own job directory.
    """
    return (offset ^ (offset >> 32) ^ salt) & 0xFFFFFFFF


def record_crc(offset: int, body: bytes | memoryview, salt: int) -> int:
    """The crc32 of a record's body, continued from its identity."""
    return _crc32(body, identity(offset, salt))


def header_check(offset: int, length: int, salt: int) -> int:
    """The 16-bit check of a frame's length field at ``offset``."""
    return _crc32(_U32_PACK(length), identity(offset, salt)) & 0xFFFF


def body_ok_v3(body: bytes | memoryview) -> bool:
    """A record of a known type whose size fits its own length fields and whose values are in range (format 3)."""
    size = len(body)
    if not size:
        return False
    kind = body[0]
    if kind in (PUSH, RETRY, REFETCH):
        extra = 0 if kind == PUSH else 8
        if size < _PUSH_SIZE or size <= _PUSH_SIZE + body[6] + body[7] + extra:
            return False
        not_before = PUSH_HEAD.unpack_from(body)[6]
        return not not_before or 0.0 < not_before <= MAX_TIME
    if kind == DONE:
        return size == _DONE_SIZE
    if kind == FAIL:
        return _fail_ok(body, size)
    if kind != HOST or size <= HOST_HEAD.size or size != HOST_HEAD.size + body[1]:
        return False
    _, _, delay, blocked_until, budget, _ = HOST_HEAD.unpack_from(body)
    return ((delay != delay or 0.0 <= delay <= MAX_SECONDS) and budget >= -1
            and (0.0 <= blocked_until <= MAX_TIME or blocked_until == math.inf))


def _fail_ok(body: bytes | memoryview, size: int) -> bool:
    """A FAIL body: its head, a time in range and at most ``MAX_ERROR`` bytes of UTF-8 text."""
    if not FAIL_HEAD.size <= size <= FAIL_HEAD.size + MAX_ERROR:
        return False
    failed_at = FAIL_HEAD.unpack_from(body)[2]
    if not 0.0 <= failed_at <= MAX_TIME:
        return False
    try:
        bytes(body[FAIL_HEAD.size:]).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _body_ok_v2(body: bytes | memoryview) -> bool:
    """A PUSH long enough for its header, fingerprint and a record, or a DONE of 9 bytes (formats 1, 2)."""
    kind = body[0]
    if kind == PUSH:
        return len(body) >= PUSH_HEAD_V2.size and len(body) > PUSH_HEAD_V2.size + body[PUSH_HEAD_V2.size - 1]
    return kind == DONE and len(body) == _DONE_SIZE


@dataclass(frozen=True)
class _Rules:
    """How one format frames its records."""

    frame: struct.Struct
    seeded: bool  # the checksums start from the record's identity (format 1: from 0, and no length check)
    salted: bool  # the identity holds the directory's salt (format 4)
    body_ok: Callable[[bytes | memoryview], bool]

    def seed(self, offset: int, salt: int) -> int:
        """The value this format's checksums of the record at ``offset`` start from."""
        if not self.seeded:
            return 0
        return identity(offset, salt if self.salted else 0)


_RULES = {4: _Rules(FRAME, True, True, body_ok_v3), 3: _Rules(FRAME, True, False, body_ok_v3),
          2: _Rules(FRAME, True, False, _body_ok_v2), 1: _Rules(FRAME_V1, False, False, _body_ok_v2)}


def push_body(
    priority: int, dont_filter: bool, fingerprint: bytes, record: bytes, *, slot: bytes = b"", attempts: int = 0,
    not_before: float = 0.0, kind: int = PUSH, target: int | None = None,
) -> bytes:
    """The body of a PUSH (or RETRY/REFETCH, with ``target``) record, framed by ``frame`` once its offset is known."""
    flags = FLAG_DONT_FILTER if dont_filter else 0
    head = _PUSH_HEAD_PACK(kind, priority, flags, len(fingerprint), len(slot), attempts, not_before)
    tail = b"" if target is None else OFFSET.pack(target)
    return head + fingerprint + slot + record + tail


def host_body(name: bytes, delay: float, blocked_until: float, budget: int, done: int) -> bytes:
    """The body of a HOST record (see the module docstring for the field values)."""
    return HOST_HEAD.pack(HOST, len(name), delay, blocked_until, budget, done) + name


def done_body(offset: int) -> bytes:
    """The body of the DONE record for the PUSH at ``offset``."""
    return DONE_BODY.pack(DONE, offset)


def fail_body(target: int, failed_at: float, error: bytes) -> bytes:
    """The body of the FAIL record for the request at ``target`` (``error``: UTF-8, at most ``MAX_ERROR`` bytes)."""
    return FAIL_HEAD.pack(FAIL, target, failed_at) + error


def cap_error(error: str) -> bytes:
    """``error`` as the UTF-8 bytes a FAIL record holds: at most ``MAX_ERROR``, cut on a character
    boundary (a lone surrogate becomes ``?``)."""
    data = error.encode("utf-8", "replace")
    if len(data) <= MAX_ERROR:
        return data
    return data[:MAX_ERROR].decode("utf-8", "ignore").encode("utf-8")


def frame(offset: int, body: bytes, salt: int) -> bytes:
    """The record ``body`` framed to be written at ``offset`` of the journal whose salt is ``salt``."""
    seed = (offset ^ (offset >> 32) ^ salt) & 0xFFFFFFFF  # identity(offset, salt), inline
    length = len(body)
    return _FRAME_PACK(length, _crc32(body, seed), _crc32(_U32_PACK(length), seed) & 0xFFFF) + body


def done_frame(offset: int, target: int, salt: int) -> bytes:
    """``frame(offset, done_body(target), salt)`` in one step."""
    body = _DONE_PACK(DONE, target)
    seed = (offset ^ (offset >> 32) ^ salt) & 0xFFFFFFFF  # identity(offset, salt), inline
    return _FRAME_PACK(_DONE_SIZE, _crc32(body, seed), _crc32(_DONE_LENGTH, seed) & 0xFFFF) + body


def frame_all(offset: int, bodies: list[bytes], salt: int) -> tuple[bytes, list[int]]:
    """Frame ``bodies`` to be written one after the other from ``offset``; (bytes, each offset)."""
    out = []
    offsets = []
    header = FRAME.size
    for body in bodies:
        offsets.append(offset)
        out.append(frame(offset, body, salt))
        offset += header + len(body)
    return b"".join(out), offsets


@dataclass(frozen=True)
class Pushed:
    """The fields of a PUSH, RETRY or REFETCH body."""

    kind: int
    priority: int
    dont_filter: bool
    fingerprint: bytes
    slot: bytes  # empty in a format-2 record: the URL's host
    attempts: int
    not_before: float
    record: memoryview
    target: int | None  # the request a RETRY or REFETCH finishes


def parse_push(body: bytes | memoryview, version: int = 3) -> Pushed:
    """The fields of a request-carrying body (of a format-3 journal, or a format-1/2 PUSH)."""
    view = memoryview(body)
    if version < 3:
        _, priority, flags, fplen = PUSH_HEAD_V2.unpack_from(body)
        start = PUSH_HEAD_V2.size
        return Pushed(PUSH, priority, bool(flags & FLAG_DONT_FILTER), bytes(view[start:start + fplen]), b"", 0, 0.0,
                      view[start + fplen:], None)
    kind, priority, flags, fplen, slotlen, attempts, not_before = PUSH_HEAD.unpack_from(body)
    fp_end = _PUSH_SIZE + fplen
    slot_end = fp_end + slotlen
    if kind == PUSH:
        return Pushed(kind, priority, bool(flags & FLAG_DONT_FILTER), bytes(view[_PUSH_SIZE:fp_end]),
                      bytes(view[fp_end:slot_end]), attempts, not_before, view[slot_end:], None)
    return Pushed(kind, priority, bool(flags & FLAG_DONT_FILTER), bytes(view[_PUSH_SIZE:fp_end]),
                  bytes(view[fp_end:slot_end]), attempts, not_before, view[slot_end:-8],
                  OFFSET.unpack_from(body, len(body) - 8)[0])


@dataclass(frozen=True)
class HostRecord:
    """The fields of a HOST body."""

    name: bytes
    delay: float  # NaN: the frontier's default
    blocked_until: float
    budget: int  # -1: none
    done: int


def parse_host(body: bytes | memoryview) -> HostRecord:
    """The fields of a HOST body."""
    _, namelen, delay, blocked_until, budget, done = HOST_HEAD.unpack_from(body)
    return HostRecord(bytes(body[HOST_HEAD.size:HOST_HEAD.size + namelen]), delay, blocked_until, budget, done)


@dataclass(frozen=True)
class FailRecord:
    """The fields of a FAIL body."""

    target: int
    failed_at: float
    error: str


def parse_fail(body: bytes | memoryview) -> FailRecord:
    """The fields of a FAIL body (checked by the scan or ``read_fail``)."""
    _, target, failed_at = FAIL_HEAD.unpack_from(body)
    return FailRecord(target, failed_at, bytes(body[FAIL_HEAD.size:]).decode("utf-8"))


def push_priority(body: bytes | memoryview) -> int:
    """The priority of a PUSH body."""
    return int.from_bytes(body[1:5], "big", signed=True)


def done_target(body: bytes | memoryview) -> int:
    """The PUSH offset a DONE body names."""
    return int(DONE_BODY.unpack_from(body)[1])


def journal_version(path: str, head: bytes, size: int) -> int:
    """1 to 4, from the file's first bytes; raises unless they are a journal magic."""
    if size == 0:
        raise JobDirCorrupt(path, 0, "the journal is empty (its header is missing)")
    if head == MAGIC:
        return 4
    if head == MAGIC_V3:
        return 3
    if head == MAGIC_V2:
        return 2
    if head == MAGIC_V1:
        return 1
    if head[:6] == MAGIC[:6] and len(head) == len(MAGIC):
        raise FormatError(
            f"{path}: incompatible journal version (got v{head[-1]}, can handle v1 to v4); "
            f"use the diskfrontier release that wrote it")
    raise JobDirCorrupt(path, 0, "not a diskfrontier journal (bad magic)")


def check_magic(path: str, head: bytes, size: int) -> None:
    """Raise unless ``head`` is the magic of the format written now (4)."""
    version = journal_version(path, head, size)
    if version != 4:
        raise FormatError(f"{path} is a format-{version} journal; open the job directory with Frontier() to "
                          f"upgrade it")


@dataclass
class Damage:
    """A stretch of a file that holds no intact record."""

    offset: int
    length: int
    problem: str


@dataclass
class ScanResult:
    """What a journal scan found besides the records: where the good data ends."""

    size: int = 0
    end: int = 0
    torn: int = 0
    version: int = 4
    damage: list[Damage] = field(default_factory=list)


class JournalScan:
    """Iterate over ``(offset, body)`` of every intact record of a journal file.

    ``repair=False``: a torn tail (see the module docstring; ``floor`` is the end the
    journal had at its last checkpoint) is noted in ``result.torn`` and the scan stops;
    any other damage raises ``JobDirCorrupt``. ``repair=True``: damage is noted in
    ``result.damage``, skipped, and the scan resynchronises on the next intact record.
    The file is read in chunks, through a descriptor that never follows a symlink; the
    scan never writes. ``salt``: the directory's (``jobdir.salt_of``), used by a format-4
    journal; a record written by another job directory fails its checksums.
    """

    def __init__(self, path: str, *, salt: int, repair: bool = False, floor: int = 0, start: int = 0) -> None:
        self.path = path
        self.salt = salt
        self.repair = repair
        self.floor = floor
        self.start = start  # where a scan that another reader began goes on (0: from the first record)
        self.result = ScanResult()

    def __iter__(self) -> Iterator[tuple[int, memoryview]]:
        with open_file(self.path) as f:
            size = os.fstat(f.fileno()).st_size
            self.result.size = size
            head = f.read(len(MAGIC))
            self.result.version = journal_version(self.path, head, size)
            if size < self.floor and not self.repair:
                raise JobDirCorrupt(
                    self.path, size,
                    f"the journal is {size:,} bytes, but it held {self.floor:,} bytes at its last checkpoint: it was "
                    f"truncated or replaced", hint=_TRUNCATED_HINT.format(dir=os.path.dirname(self.path) or "."))
            yield from self._records(f, size, _RULES[self.result.version], max(len(MAGIC), self.start))

    def _records(self, f: IO[bytes], size: int, rules: _Rules, pos: int) -> Iterator[tuple[int, memoryview]]:
        fmt, checked, body_ok = rules.frame, rules.seeded, rules.body_ok
        salt = self.salt if rules.salted else 0
        unpack, header = fmt.unpack_from, fmt.size
        result = self.result
        buf, base = b"", pos  # buf holds the file's bytes from offset `base`
        view = memoryview(buf)
        while pos < size:
            rel = pos - base
            avail = len(buf) - rel
            if avail < header or avail < header + unpack(buf, rel)[0] <= header + MAX_BODY:
                f.seek(pos)
                want = CHUNK if avail < header else max(CHUNK, header + unpack(buf, rel)[0])
                buf, base, rel = f.read(min(want, size - pos)), pos, 0  # a damaged length asks for no more
                if len(buf) >= header and len(buf) < header + unpack(buf, 0)[0] <= min(header + MAX_BODY, size - pos):
                    f.seek(pos)  # a record longer than the chunk just read, starting it
                    buf = f.read(header + unpack(buf, 0)[0])
                view = memoryview(buf)
            cut_short = False  # what a kill in the middle of a write leaves
            if len(buf) - rel < header:
                problem, cut_short = "a record frame cut short", True
            else:
                fields = unpack(buf, rel)
                length = fields[0]
                end = pos + header + length
                seed = (pos ^ (pos >> 32) ^ salt) & 0xFFFFFFFF if checked else 0  # rules.seed(pos), inline
                if checked and _crc32(_U32_PACK(length), seed) & 0xFFFF != fields[2]:
                    problem = f"a damaged record frame (length field {length})"
                elif length == 0 or length > MAX_BODY:
                    problem = f"impossible record length {length}"
                elif end > size:
                    problem, cut_short = f"a record of {length} bytes runs past the end of the file", True
                else:
                    body = view[rel + header:rel + header + length]
                    if _crc32(body, seed) != fields[1]:
                        problem = _MISMATCH
                    elif not body_ok(body):
                        problem = f"a record of type {body[0]} that is malformed or of an unknown type"
                    else:
                        yield pos, body
                        pos = end
                        continue
            zeros = not cut_short and _zeros_from(f, pos)
            nxt = size if zeros else _next_intact(f, pos + 1, size, rules, self.salt)
            if (cut_short or zeros) and nxt == size and pos >= self.floor:
                result.torn = size - pos
                result.end = pos
                return
            if pos < self.floor and nxt == size:
                problem += f", below the {self.floor:,} bytes the journal held at its last checkpoint"
            if not self.repair:
                raise JobDirCorrupt(self.path, pos, problem)
            result.damage.append(Damage(pos, nxt - pos, problem))
            pos = nxt
            buf, base = b"", pos
        result.end = pos


_MISMATCH = ("checksum mismatch (damaged bytes, or a record written elsewhere: at another offset or in another job "
             "directory)")
_TRUNCATED_HINT = (
    "restore the job directory from a backup if you have one; 'diskfrontier verify --repair {dir}' keeps "
    "what is left, and the requests that were cut off are lost")


def _zeros_from(f: IO[bytes], pos: int) -> bool:
    """True if the file holds only zero bytes from ``pos`` on (what a power cut can leave)."""
    f.seek(pos)
    while chunk := f.read(CHUNK):
        if chunk.strip(b"\0"):
            return False
    return True


def _next_intact(f: IO[bytes], pos: int, size: int, rules: _Rules, salt: int) -> int:
    """The offset of the next intact record at or after ``pos``, or ``size`` if there is none.

    Only a record whose checksum (which covers its own offset) matches counts, so a
    stray byte pattern is not taken for a record.
    """
    fmt, checked = rules.frame, rules.seeded
    unpack, header = fmt.unpack_from, fmt.size
    while pos + header < size:
        f.seek(pos)
        chunk = f.read(CHUNK + header)
        for i in range(0, min(len(chunk) - header, CHUNK)):
            fields = unpack(chunk, i)
            length = fields[0]
            if not 0 < length <= MAX_BODY or pos + i + header + length > size:
                continue
            seed = rules.seed(pos + i, salt)
            if checked and _crc32(_U32_PACK(length), seed) & 0xFFFF != fields[2]:
                continue
            if i + header + length <= len(chunk):
                body = memoryview(chunk)[i + header:i + header + length]
            else:
                f.seek(pos + i + header)
                body = memoryview(f.read(length))
            if _crc32(body, seed) == fields[1] and rules.body_ok(body):
                return pos + i
        pos += max(1, min(len(chunk) - header, CHUNK))
    return size


def read_record(fd: int, offset: int, path: str, salt: int, version: int = 4) -> memoryview:
    """The body of the PUSH (or RETRY, REFETCH) record at ``offset`` of the journal open as ``fd``, checked.

    ``version``: the journal's format (1 to 3 only for read-only views of a directory not upgraded yet).
    """
    body = _intact_at(fd, offset, _RULES[version], salt)
    if body is None or body[0] not in (CARRIES_REQUEST if version >= 3 else (PUSH,)):
        raise JobDirCorrupt(path, offset, "a queue entry does not point at an intact PUSH record")
    return body


def read_fail(fd: int, offset: int, path: str, target: int, salt: int, version: int = 4) -> FailRecord:
    """The FAIL record at ``offset`` of the journal open as ``fd`` (format 3 or 4), checked, which must name
    ``target``."""
    body = _intact_at(fd, offset, _RULES[version], salt)
    if body is None or body[0] != FAIL:
        raise JobDirCorrupt(path, offset, "a failed request's entry does not point at an intact FAIL record")
    record = parse_fail(body)
    if record.target != target:
        raise JobDirCorrupt(path, offset, f"the FAIL record names byte {record.target}, not the failed request at "
                                          f"byte {target}")
    return record


def _intact_at(fd: int, offset: int, rules: _Rules, salt: int) -> memoryview | None:
    """The body of the intact record at ``offset``, or None."""
    fmt = rules.frame
    if offset < len(MAGIC):
        return None
    chunk = os.pread(fd, 512, offset)
    if len(chunk) < fmt.size:
        return None
    fields = fmt.unpack_from(chunk)
    length = fields[0]
    seed = rules.seed(offset, salt)
    if rules.seeded and _crc32(_U32_PACK(length), seed) & 0xFFFF != fields[2]:
        return None
    if not 0 < length <= MAX_BODY:
        return None
    if length + fmt.size > len(chunk):
        if length + fmt.size > os.fstat(fd).st_size - offset:
            return None  # runs past the end of the file: not a record, and not worth reading
        chunk = os.pread(fd, fmt.size + length, offset)
    body = memoryview(chunk)[fmt.size:fmt.size + length]
    if len(body) != length or _crc32(body, seed) != fields[1] or not rules.body_ok(body):
        return None
    return body


def first_record_holds(path: str, salt: int) -> bool | None:
    """Whether the first record of the format-4 journal at ``path`` is intact with ``salt``; None if the journal
    holds no record (or is not of format 4). Tells which of two ids a job directory's records were written with."""
    try:
        fd = open_fd(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        if os.pread(fd, len(MAGIC), 0) != MAGIC or os.fstat(fd).st_size <= len(MAGIC):
            return None
        return _intact_at(fd, len(MAGIC), _RULES[4], salt) is not None
    finally:
        os.close(fd)


def record_end(path: str, offset: int, salt: int) -> int | None:
    """Where the intact record at ``offset`` ends (the magic's end for -1, "no record"); None if none is there."""
    if offset == -1:
        return len(MAGIC)
    fd = open_fd(path, os.O_RDONLY)
    try:
        body = _intact_at(fd, offset, _RULES[4], salt)
    finally:
        os.close(fd)
    return None if body is None else offset + FRAME.size + len(body)


class JournalFailed(FrontierError):
    """A write to the journal failed and the file could not be cut back to its last good end."""


class JournalWriter:
    """Appends framed records to ``requests.urls``; each ``write`` is one system call.

    A write that fails part-way (a full disk, an interrupt) is cut back to the last
    good end before the error propagates, so the file never holds a partial record
    in the middle; if even that fails, every later write is refused.
    """

    def __init__(self, path: str, end: int, *, salt: int, fsync: bool, crc: int | None = None) -> None:
        self.path = path
        self.salt = salt  # folded into every record's checksums (jobdir.salt_of)
        self.fsync = fsync
        self.crc = crc  # the crc32 of the file's first ``size`` bytes, when known (a checkpoint keeps it)
        self.fd = open_fd(path, os.O_RDWR)
        self.failed: str | None = None
        try:
            check_magic(path, os.pread(self.fd, len(MAGIC), 0), os.fstat(self.fd).st_size)
            if os.fstat(self.fd).st_size != end:
                os.ftruncate(self.fd, end)
            os.lseek(self.fd, end, os.SEEK_SET)
        except BaseException:
            os.close(self.fd)
            raise
        self.size = end

    @staticmethod
    def create(path: str) -> None:
        """Write a new empty journal (just the magic)."""
        with naming(path):
            fd = open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            try:
                os.write(fd, MAGIC)
            finally:
                os.close(fd)

    def write(self, data: bytes) -> int:
        """Append ``data`` (whole frames, framed for this offset); return the offset it starts at."""
        if self.failed:
            raise JournalFailed(
                f"{self.path}: an earlier write failed ({self.failed}) and could not be undone; close the "
                f"frontier and open it again")
        offset = self.size
        try:
            write_all(self.fd, data)
            if self.fsync:
                os.fsync(self.fd)
        except BaseException as exc:
            self._cut_back(offset, exc)
            raise_named(self.path, exc)
            raise
        self.size = offset + len(data)
        if self.crc is not None:
            self.crc = _crc32(data, self.crc)
        return offset

    def _cut_back(self, offset: int, exc: BaseException) -> None:
        try:
            os.ftruncate(self.fd, offset)
            os.lseek(self.fd, offset, os.SEEK_SET)
        except BaseException:
            self.failed = f"{type(exc).__name__}: {exc}"
            raise

    def read_body(self, offset: int) -> bytes | memoryview:
        """The body of the PUSH record at ``offset``, checked against its crc."""
        chunk = os.pread(self.fd, 512, offset)
        if len(chunk) >= _HEADER:  # the usual case, a record of under 512 bytes, checked inline
            length, crc, check = _FRAME_UNPACK(chunk)
            if _HEADER < length + _HEADER <= len(chunk):
                seed = (offset ^ (offset >> 32) ^ self.salt) & 0xFFFFFFFF  # identity(offset, salt), inline
                body = chunk[_HEADER:_HEADER + length]
                kind = body[0]
                if (_crc32(_U32_PACK(length), seed) & 0xFFFF == check and _crc32(body, seed) == crc
                        and kind in (PUSH, RETRY, REFETCH)
                        and length > _PUSH_SIZE + body[6] + body[7] + (0 if kind == PUSH else 8)):
                    return body  # (its not_before was checked by the scan or the push that queued it)
        return read_record(self.fd, offset, self.path, self.salt)

    def read_fail(self, offset: int, target: int) -> FailRecord:
        """The FAIL record at ``offset``, checked, which must name ``target``."""
        return read_fail(self.fd, offset, self.path, target, self.salt)

    def sync(self) -> None:
        """fsync the journal."""
        with naming(self.path):
            os.fsync(self.fd)

    def close(self) -> None:
        """Close the file descriptor."""
        fd, self.fd = self.fd, -1  # forgotten first: a failed close must not lead to a second one
        if fd >= 0:
            os.close(fd)
