"""``requests.urls``: the recovery journal, the truth of what is pending.

Its format (the magic, the records, what they mean together, the older formats read to
upgrade them) is described once, in ``docs/format.md`` ("requests.urls — the journal");
each record is built and read by ``records.py`` and the rules of what they mean together
are ``replay.py``'s. A request's identity is the byte offset of its PUSH (or RETRY,
REFETCH) record.

Which records are intact is decided in one place, ``walk``: a frame whose check matches
its length, a length from 1 to 2^30, a body whose crc matches and that is well-formed
(``records.body_ok_v3``). Every reader of the file goes through it: the scan
(``JournalScan``), the replay's fast pass (``replay.py``), the search for the next
intact record after damage and the read of one record at an offset.

A bad record is a torn tail (cut at the next open) only when it looks like what a
kill leaves (a frame cut short, or an intact frame whose record runs past the end of
the file, or zeros to the end), nothing intact follows it, and it lies at or above
the journal's last checkpointed end (the ``floor``). Anything else is damage, named
by its byte offset.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from ..contract.checks import MAX_ATTEMPTS as MAX_ATTEMPTS  # the limits are the contract's; kept here for old imports
from ..contract.checks import MAX_ERROR as MAX_ERROR
from ..contract.checks import MAX_SECONDS as MAX_SECONDS
from ..contract.checks import MAX_TIME as MAX_TIME
from ..core.errors import FormatError, FrontierError, JobDirCorrupt
from ..files.atomic import write_all
from ..files.safefs import open_fd, open_file
from ..files.writeerrors import naming, raise_named
from .records import BODY_SIZE, body_ok_v2, kind_of, request_fits

# The record codec's names, kept here for old imports.
from .records import CARRIES_REQUEST as CARRIES_REQUEST
from .records import DONE as DONE
from .records import DONE_BODY as DONE_BODY
from .records import FAIL as FAIL
from .records import FAIL_HEAD as FAIL_HEAD
from .records import FLAG_DONT_FILTER as FLAG_DONT_FILTER
from .records import FRAME as FRAME
from .records import FRAME_V1 as FRAME_V1
from .records import FRAMED_HEAD as FRAMED_HEAD
from .records import HOST as HOST
from .records import HOST_HEAD as HOST_HEAD
from .records import MAX_BODY as MAX_BODY
from .records import OFFSET as OFFSET
from .records import PUSH as PUSH
from .records import PUSH_HEAD as PUSH_HEAD
from .records import PUSH_HEAD_V2 as PUSH_HEAD_V2
from .records import REFETCH as REFETCH
from .records import REQUEUES as REQUEUES
from .records import RETRY as RETRY
from .records import FailRecord as FailRecord
from .records import HostRecord as HostRecord
from .records import Pushed as Pushed
from .records import body_ok_v3 as body_ok_v3
from .records import cap_error as cap_error
from .records import done_body as done_body
from .records import done_frame as done_frame
from .records import done_target as done_target
from .records import fail_body as fail_body
from .records import frame as frame
from .records import frame_all as frame_all
from .records import header_check as header_check
from .records import host_body as host_body
from .records import identity as identity
from .records import parse_fail as parse_fail
from .records import parse_host as parse_host
from .records import parse_push as parse_push
from .records import push_body as push_body
from .records import push_priority as push_priority
from .records import record_crc as record_crc

MAGIC = b"DFURLS\x00\x04"
MAGIC_V3 = b"DFURLS\x00\x03"
MAGIC_V2 = b"DFURLS\x00\x02"
MAGIC_V1 = b"DFURLS\x00\x01"
MAGIC_CRC = zlib.crc32(MAGIC)  # the crc32 of a journal that holds no record yet
CHUNK = 8 << 20
READ_BLOCK = 64 << 10  # bytes a pop reads around the record it wants (``JournalWriter.read_body``)
_crc32 = zlib.crc32
_HEADER = FRAME.size


@dataclass(frozen=True)
class _Rules:
    """How one format frames its records and which bodies it holds."""

    frame: struct.Struct
    short: struct.Struct  # the frame and the body's type byte
    head: struct.Struct  # the frame and the longest head ``walk`` reads at once (formats 3, 4: a request's)
    seeded: bool  # the checksums start from the record's identity (format 1: from 0, and no length check)
    salted: bool  # the identity holds the directory's salt (format 4)
    requests: tuple[int, ...]  # types whose head ``head`` holds: checked by ``request_fits`` from it
    sizes: dict[int, int]  # types whose bodies have one size (``records.BODY_SIZE``)
    body_ok: Callable[[bytes | memoryview], bool]  # every other body
    kind_at: int  # where the type is in what ``short`` and ``head`` unpack to


_SHORT = struct.Struct(">IIHB")
_SHORT_V1 = struct.Struct(">IIB")
_RULES = {
    4: _Rules(FRAME, _SHORT, FRAMED_HEAD, True, True, CARRIES_REQUEST, BODY_SIZE, body_ok_v3, 3),
    3: _Rules(FRAME, _SHORT, FRAMED_HEAD, True, False, CARRIES_REQUEST, BODY_SIZE, body_ok_v3, 3),
    2: _Rules(FRAME, _SHORT, _SHORT, True, False, (), {}, body_ok_v2, 3),
    1: _Rules(FRAME_V1, _SHORT_V1, _SHORT_V1, False, False, (), {}, body_ok_v2, 2),
}
_PUSH_SIZE = PUSH_HEAD.size
_FRAMED_SIZE, _FRAMED_UNPACK = FRAMED_HEAD.size, FRAMED_HEAD.unpack_from
_MISMATCH = ("checksum mismatch (damaged bytes, or a record written elsewhere: at another offset or in another job "
             "directory)")


class Stop:
    """Where ``walk`` stopped, and why.

    ``rel``: the first record it did not yield (relative to the buffer). ``problem``: what
    is wrong with it, or None when the buffer ended before it (at its end, or in its middle
    with more of the file to come: the record then needs ``want`` bytes from ``rel``).
    ``cut_short``: it is what a write cut short leaves at the end of the file.
    """

    __slots__ = ("cut_short", "problem", "rel", "want")

    def __init__(self) -> None:
        self.rel = 0
        self.problem: str | None = None
        self.cut_short = False
        self.want = 0

    def at(self, rel: int, problem: str | None, cut_short: bool = False, want: int = 0) -> None:
        self.rel, self.problem, self.cut_short, self.want = rel, problem, cut_short, want


def walk(
    buf: bytes, base: int, salt: int, version: int, stop: Stop, *, start: int = 0, at_end: bool = True,
    trusted_to: int = 0,
) -> Iterator[tuple[int, tuple[Any, ...]]]:
    """Yield ``(rel, fields)`` for each intact record of ``buf`` from ``buf[start]`` on, until the first that is not.

    ``buf`` holds the bytes of a format-``version`` journal from byte ``base``; ``salt`` is
    the directory's. ``fields`` is what the record's frame and head unpack to: for a
    format-3 or -4 record that is long enough, ``records.FRAMED_HEAD`` (length, crc, check,
    type, then a request's head), else the frame and the type. ``at_end``: ``buf`` reaches
    the end of the file (a record running past it is then cut short, not just unread).
    Records that end at or before ``buf[trusted_to]`` are taken without their checksums
    (bytes another check has covered). Where and why the walk stopped is left in ``stop``.

    These are the record checks of the journal, in this order: the frame's check of its
    length, the length, the body within the file, the body's crc, then a well-formed body.
    """
    rules = _RULES[version]
    header, frame_unpack = rules.frame.size, rules.frame.unpack_from
    short_size, short_unpack = rules.short.size, rules.short.unpack_from
    head_size, head_unpack = rules.head.size, rules.head.unpack_from
    seeded, requests, body_ok, kind_at = rules.seeded, rules.requests, rules.body_ok, rules.kind_at
    sized = rules.sizes.get
    salt = salt if rules.salted else 0
    crc32 = _crc32
    view = memoryview(buf)
    n = len(buf)
    rel = start
    while True:
        if rel + head_size <= n:
            fields = head_unpack(buf, rel)
        elif rel + short_size <= n:
            fields = short_unpack(buf, rel)
        elif rel + header <= n:
            fields = frame_unpack(buf, rel)
        else:
            if rel == n or not at_end:
                stop.at(rel, None, want=header)
            else:
                stop.at(rel, "a record frame cut short", True)
            return
        length = fields[0]
        end = rel + header + length
        checked = end > trusted_to
        if checked:
            at = base + rel
            seed = (at ^ (at >> 32) ^ salt) & 0xFFFFFFFF if seeded else 0  # records.identity(at, salt), inline
            body = view[rel + header:end]
            # The usual record: whole in the buffer and its body's crc right, which its length then is too
            # (a wrong length would give another body). Anything else goes through the checks in their order,
            # which name what is wrong, and tell a torn tail from damage.
            if not (seeded and end <= n and 0 < length <= MAX_BODY and crc32(body, seed) == fields[1]):
                if seeded and crc32(view[rel:rel + 4], seed) & 0xFFFF != fields[2]:
                    stop.at(rel, f"a damaged record frame (length field {length})")
                    return
                if not 0 < length <= MAX_BODY:
                    stop.at(rel, f"impossible record length {length}")
                    return
                if end > n:
                    if at_end:
                        stop.at(rel, f"a record of {length} bytes runs past the end of the file", True)
                    else:
                        stop.at(rel, None, want=header + length)
                    return
                if crc32(body, seed) != fields[1]:
                    stop.at(rel, _MISMATCH)
                    return
        else:
            if not 0 < length <= MAX_BODY:
                stop.at(rel, f"impossible record length {length}")
                return
            if end > n:
                if at_end:
                    stop.at(rel, f"a record of {length} bytes runs past the end of the file", True)
                else:
                    stop.at(rel, None, want=header + length)
                return
        kind = fields[kind_at]
        if kind in requests and length > _PUSH_SIZE:  # its head was read with the frame (the record holds it)
            # records.request_fits, inline: every request record passes here
            not_before = fields[9]
            ok = (length > _PUSH_SIZE + fields[6] + fields[7] + (0 if kind == PUSH else 8)
                  and (not not_before or 0.0 < not_before <= MAX_TIME))
        elif (size := sized(kind)) is not None:
            ok = length == size
        else:
            ok = body_ok(body if checked else view[rel + header:end])
        if not ok:
            stop.at(rel, f"a record of type {kind} that is malformed or of an unknown type")
            return
        yield rel, fields
        rel = end


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
            yield from self._records(f, size, self.result.version, max(len(MAGIC), self.start))

    def _records(self, f: IO[bytes], size: int, version: int, pos: int) -> Iterator[tuple[int, memoryview]]:
        result, salt, header = self.result, self.salt, _RULES[version].frame.size
        stop = Stop()
        want = CHUNK
        while pos < size:
            f.seek(pos)
            buf = f.read(min(want, size - pos))  # a damaged length asks for no more than the file holds
            view = memoryview(buf)
            for rel, fields in walk(buf, pos, salt, version, stop, at_end=pos + len(buf) == size):
                yield pos + rel, view[rel + header:rel + header + fields[0]]
            if stop.problem is None:  # the buffer ended before this record: read on from it
                want = max(CHUNK, stop.want) if stop.rel == 0 else CHUNK  # (a record longer than a chunk: whole)
                pos += stop.rel
                continue
            pos += stop.rel
            problem = stop.problem
            zeros = not stop.cut_short and _zeros_from(f, pos)
            nxt = size if zeros else _next_intact(f, pos + 1, size, version, salt)
            if (stop.cut_short or zeros) and nxt == size and pos >= self.floor:
                result.torn = size - pos
                result.end = pos
                return
            if pos < self.floor and nxt == size:
                problem += f", below the {self.floor:,} bytes the journal held at its last checkpoint"
            if not self.repair:
                raise JobDirCorrupt(self.path, pos, problem)
            result.damage.append(Damage(pos, nxt - pos, problem))
            pos = nxt
            want = CHUNK
        result.end = pos


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


def _next_intact(f: IO[bytes], pos: int, size: int, version: int, salt: int) -> int:
    """The offset of the next intact record at or after ``pos``, or ``size`` if there is none.

    Only a record that ``walk`` takes counts (its checksums cover its own offset), so a
    stray byte pattern is not taken for a record. Offsets whose length field cannot be
    right (or, when frames check their length, whose check does not match) are passed over
    without a walk.
    """
    rules = _RULES[version]
    fmt, checked = rules.frame, rules.seeded
    unpack, header = fmt.unpack_from, fmt.size
    seeded_salt = salt if rules.salted else 0
    stop = Stop()
    while pos + header < size:
        f.seek(pos)
        chunk = f.read(CHUNK + header)
        for i in range(0, min(len(chunk) - header, CHUNK)):
            fields = unpack(chunk, i)
            length = fields[0]
            if not 0 < length <= MAX_BODY or pos + i + header + length > size:
                continue
            if checked and header_check(pos + i, length, seeded_salt) != fields[2]:
                continue
            if i + header + length <= len(chunk):
                buf, base, start = chunk, pos, i
            else:
                f.seek(pos + i)
                buf, base, start = f.read(header + length), pos + i, 0
            for _ in walk(buf, base, salt, version, stop, start=start):
                return pos + i
        pos += max(1, min(len(chunk) - header, CHUNK))
    return size


def read_record(fd: int, offset: int, path: str, salt: int, version: int = 4) -> bytes | memoryview:
    """The body of the PUSH (or RETRY, REFETCH) record at ``offset`` of the journal open as ``fd``, checked.

    ``version``: the journal's format (1 to 3 only for read-only views of a directory not upgraded yet).
    """
    body = _intact_at(fd, offset, version, salt)
    if body is None or kind_of(body) not in (CARRIES_REQUEST if version >= 3 else (PUSH,)):
        raise JobDirCorrupt(path, offset, "a queue entry does not point at an intact PUSH record")
    return body


def read_fail(fd: int, offset: int, path: str, target: int, salt: int, version: int = 4) -> FailRecord:
    """The FAIL record at ``offset`` of the journal open as ``fd`` (format 3 or 4), checked, which must name
    ``target``."""
    body = _intact_at(fd, offset, version, salt)
    if body is None or kind_of(body) != FAIL:
        raise JobDirCorrupt(path, offset, "a failed request's entry does not point at an intact FAIL record")
    record = parse_fail(body)
    if record.target != target:
        raise JobDirCorrupt(path, offset, f"the FAIL record names byte {record.target}, not the failed request at "
                                          f"byte {target}")
    return record


def _intact_at(fd: int, offset: int, version: int, salt: int) -> memoryview | bytes | None:
    """The body of the intact record at ``offset``, or None."""
    if offset < len(MAGIC):
        return None
    chunk = os.pread(fd, 512, offset)
    if version == 4:
        body = _request_in(chunk, offset, salt)
        if body is not None:
            return body
    header = _RULES[version].frame.size
    stop = Stop()
    for _rel, fields in walk(chunk, offset, salt, version, stop, at_end=False):
        return memoryview(chunk)[header:header + fields[0]]
    if stop.problem is not None or stop.want <= len(chunk) or stop.want > os.fstat(fd).st_size - offset:
        return None  # not a record, or one running past the end of the file: not worth reading
    chunk = os.pread(fd, stop.want, offset)
    for _rel, fields in walk(chunk, offset, salt, version, stop):
        return memoryview(chunk)[header:header + fields[0]]
    return None


def _request_in(chunk: bytes | memoryview, offset: int, salt: int, at: int = 0) -> bytes | memoryview | None:
    """The body of the request-carrying record that ``chunk`` holds from position ``at``, read at ``offset`` of a
    format-4 journal, if it lies whole in ``chunk`` and holds; else None, and ``walk`` decides.

    What a pop reads: ``walk``'s checks of the usual record (its frame's check and crc seeded
    with its identity, ``records.request_fits``), without setting up a walk.
    """
    if len(chunk) - at < _FRAMED_SIZE:
        return None
    length, crc, check, kind, _priority, _flags, fplen, slotlen, _attempts, not_before = _FRAMED_UNPACK(chunk, at)
    start = at + _HEADER
    if not _PUSH_SIZE < length <= len(chunk) - start or kind not in CARRIES_REQUEST:
        return None
    body = chunk[start:start + length]
    seed = (offset ^ (offset >> 32) ^ salt) & 0xFFFFFFFF  # records.identity(offset, salt), inline
    if (_crc32(chunk[at:at + 4], seed) & 0xFFFF != check or _crc32(body, seed) != crc
            or not request_fits(kind, length, fplen, slotlen, not_before)):
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
        return _intact_at(fd, len(MAGIC), 4, salt) is not None
    finally:
        os.close(fd)


def record_end(path: str, offset: int, salt: int) -> int | None:
    """Where the intact record at ``offset`` ends (the magic's end for -1, "no record"); None if none is there."""
    if offset == -1:
        return len(MAGIC)
    fd = open_fd(path, os.O_RDONLY)
    try:
        body = _intact_at(fd, offset, 4, salt)
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

    def __init__(self, path: str, end: int, *, salt: int, fsync: bool, crc: int | None = None,
                 fd: int | None = None) -> None:
        self.path = path
        self.salt = salt  # folded into every record's checksums (jobdir.salt_of)
        self.fsync = fsync
        self.crc = crc  # the crc32 of the file's first ``size`` bytes, when known (a checkpoint keeps it)
        self.fd = open_fd(path, os.O_RDWR) if fd is None else fd  # ``fd``: the file, open already
        self.failed: str | None = None
        self._read: tuple[int, bytes] = (0, b"")  # where the block read last starts, and it (``read_body``)
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
        """The body of the PUSH (or RETRY, REFETCH) record at ``offset``, checked (``read_record``).

        The usual record is found in the block of the journal read last, and checked there: the next
        requests of a queue were mostly written close to each other, so most pops read nothing. The
        block holds only bytes below ``size`` when it was read, which a writer never changes again
        (a failed write is cut back to where it began, past them).
        """
        start, block = self._read  # one attribute: a reader in another thread sees a block with its start
        at = offset - start
        if at < 0 or at + _FRAMED_SIZE > len(block):
            start, block = self._read_block(offset)
            at = offset - start
        body = _request_in(block, offset, self.salt, at)
        if body is None and at:  # perhaps a record running past the block's end: read from its start
            body = _request_in(self._read_block(offset, aligned=False)[1], offset, self.salt)
        return body if body is not None else read_record(self.fd, offset, self.path, self.salt)

    def _read_block(self, offset: int, aligned: bool = True) -> tuple[int, bytes]:
        """Read the block of the journal around ``offset`` (from ``offset`` itself, unless ``aligned``) and keep
        it as the block read last; where it starts, and it."""
        start = offset - offset % READ_BLOCK if aligned else offset
        end = max(start + READ_BLOCK, offset + 512)
        block = os.pread(self.fd, max(0, min(end, self.size) - start), start)
        self._read = (start, block)
        return start, block

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
