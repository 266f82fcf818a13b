"""``requests.urls``: the recovery journal, the truth of what is pending.

Format 1. The file starts with the 8-byte magic ``DFURLS\\x00\\x01``. Then records, each
a frame ``length:u32 crc32:u32`` (big-endian; crc32 of the body) and a body of
``length`` bytes whose first byte is its type:

* PUSH ``0x01 priority:i32 flags:u8 fplen:u8 fingerprint request-record``; flags bit 0 is
  ``dont_filter``. The request record is msgpack (``codec.py``).
* DONE ``0x02 offset:u64``: the PUSH record at that byte offset is finished.

A request's identity is the byte offset of its PUSH record. Pending = PUSH - DONE.
A last record cut short by a crash (a torn tail) is detected by its length or crc and
cut; damage anywhere else is an error naming the byte offset.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from typing import BinaryIO
from dataclasses import dataclass, field

from .atomic import write_all
from .errors import FormatError, JobDirCorrupt

MAGIC = b"DFURLS\x00\x01"
FRAME = struct.Struct(">II")
PUSH_HEAD = struct.Struct(">BiBB")
DONE_BODY = struct.Struct(">BQ")
PUSH, DONE = 1, 2
FLAG_DONT_FILTER = 1
MAX_BODY = 1 << 30
_CHUNK = 8 << 20


def push_frame(priority: int, dont_filter: bool, fingerprint: bytes, record: bytes) -> bytes:
    """The framed PUSH record for one request."""
    body = PUSH_HEAD.pack(PUSH, priority, FLAG_DONT_FILTER if dont_filter else 0, len(fingerprint)) + fingerprint + record
    return FRAME.pack(len(body), zlib.crc32(body)) + body


def done_frame(offset: int) -> bytes:
    """The framed DONE record for the PUSH at ``offset``."""
    body = DONE_BODY.pack(DONE, offset)
    return FRAME.pack(len(body), zlib.crc32(body)) + body


def parse_push(body: bytes | memoryview) -> tuple[int, bool, bytes, memoryview]:
    """(priority, dont_filter, fingerprint, request record) of a PUSH body."""
    _, priority, flags, fplen = PUSH_HEAD.unpack_from(body)
    start = PUSH_HEAD.size
    view = memoryview(body)
    return priority, bool(flags & FLAG_DONT_FILTER), bytes(view[start:start + fplen]), view[start + fplen:]


def check_magic(path: str, head: bytes, size: int) -> None:
    """Raise unless ``head`` (the file's first bytes) is this format's magic."""
    if size == 0:
        raise JobDirCorrupt(path, 0, "the journal is empty (its header is missing)")
    if head != MAGIC:
        if head[:6] == MAGIC[:6] and len(head) == len(MAGIC):
            raise FormatError(
                f"{path}: incompatible journal version (got v{head[-1]}, "
                f"can handle v{MAGIC[-1]}); use the diskfrontier release that wrote it"
            )
        raise JobDirCorrupt(path, 0, "not a diskfrontier journal (bad magic)")


def _body_ok(body: memoryview) -> bool:
    """A PUSH long enough for its header, fingerprint and a record, or a DONE of 9 bytes."""
    kind = body[0]
    if kind == PUSH:
        return len(body) > PUSH_HEAD.size + body[PUSH_HEAD.size - 1]
    return kind == DONE and len(body) == DONE_BODY.size


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
    damage: list[Damage] = field(default_factory=list)


class JournalScan:
    """Iterate over ``(offset, body)`` of every intact record of a journal file.

    ``repair=False``: a torn tail is noted in ``result.torn`` and the scan stops; any
    other damage raises ``JobDirCorrupt``. ``repair=True``: damage is noted in
    ``result.damage``, skipped, and the scan resynchronises on the next intact record.
    The file is read in chunks; the scan never writes.
    """

    def __init__(self, path: str, *, repair: bool = False) -> None:
        self.path = path
        self.repair = repair
        self.result = ScanResult()

    def __iter__(self) -> Iterator[tuple[int, memoryview]]:
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self.result.size = size
            check_magic(self.path, f.read(len(MAGIC)), size)
            yield from self._records(f, size)

    def _records(self, f: BinaryIO, size: int) -> Iterator[tuple[int, memoryview]]:
        unpack, crc32, header = FRAME.unpack_from, zlib.crc32, FRAME.size
        result = self.result
        pos = len(MAGIC)  # absolute offset of the next record
        buf, base = b"", pos  # buf holds the file's bytes from offset `base`
        while pos < size:
            rel = pos - base
            if len(buf) - rel < header or len(buf) - rel < header + unpack(buf, rel)[0]:
                if len(buf) - rel < header or unpack(buf, rel)[0] <= MAX_BODY:
                    f.seek(pos)
                    want = _CHUNK if len(buf) - rel < header else max(_CHUNK, header + unpack(buf, rel)[0])
                    buf, base, rel = f.read(want), pos, 0
            problem = None
            if len(buf) - rel < header:
                problem = "torn"
            else:
                length, crc = unpack(buf, rel)
                end = pos + header + length
                if length == 0 or length > MAX_BODY:
                    problem = "torn" if self._zeros_from(f, pos) else f"impossible record length {length}"
                elif end > size:
                    problem = "torn"
                else:
                    body = memoryview(buf)[rel + header:rel + header + length]
                    if crc32(body) != crc:
                        problem = "torn" if end == size else "checksum mismatch"
                    elif not _body_ok(body):
                        problem = f"record of unknown type {body[0]}"
                    else:
                        yield pos, body
                        pos = end
                        continue
            if problem == "torn":
                result.torn = size - pos
                result.end = pos
                return
            if not self.repair:
                raise JobDirCorrupt(self.path, pos, problem)
            nxt = self._resync(f, pos + 1, size)
            result.damage.append(Damage(pos, nxt - pos, problem))
            pos = nxt
            buf, base = b"", pos
        result.end = pos

    @staticmethod
    def _zeros_from(f: BinaryIO, pos: int) -> bool:
        f.seek(pos)
        while chunk := f.read(_CHUNK):
            if chunk.strip(b"\0"):
                return False
        return True

    @staticmethod
    def _resync(f: BinaryIO, pos: int, size: int) -> int:
        """The offset of the next intact record after damage (a byte-by-byte search)."""
        unpack, crc32, header = FRAME.unpack_from, zlib.crc32, FRAME.size
        f.seek(0)
        view = memoryview(f.read())  # repair only: the whole file is read once
        while pos + header < size:
            length, crc = unpack(view, pos)
            end = pos + header + length
            if 0 < length <= MAX_BODY and end <= size:
                body = view[pos + header:end]
                if crc32(body) == crc and _body_ok(body):
                    return pos
            pos += 1
        return size


class JournalWriter:
    """Appends framed records to ``requests.urls``; each ``write`` is one system call."""

    def __init__(self, path: str, end: int, *, fsync: bool) -> None:
        self.path = path
        self.fsync = fsync
        self.fd = os.open(path, os.O_RDWR)
        try:
            check_magic(path, os.pread(self.fd, len(MAGIC), 0), os.fstat(self.fd).st_size)
        except BaseException:
            os.close(self.fd)
            raise
        if os.fstat(self.fd).st_size != end:
            os.ftruncate(self.fd, end)
        os.lseek(self.fd, end, os.SEEK_SET)
        self.size = end

    @staticmethod
    def create(path: str) -> None:
        """Write a new empty journal (just the magic)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, MAGIC)
        finally:
            os.close(fd)

    def write(self, data: bytes) -> int:
        """Append ``data`` (whole frames); return the offset it starts at."""
        offset = self.size
        write_all(self.fd, data)
        self.size = offset + len(data)
        if self.fsync:
            os.fsync(self.fd)
        return offset

    def read_body(self, offset: int) -> memoryview:
        """The body of the record at ``offset``, checked against its crc."""
        chunk = os.pread(self.fd, 512, offset)
        if len(chunk) < FRAME.size:
            raise JobDirCorrupt(self.path, offset, "a queue entry points past the end of the journal")
        length, crc = FRAME.unpack_from(chunk)
        if length + FRAME.size > len(chunk):
            if length > MAX_BODY:
                raise JobDirCorrupt(self.path, offset, f"impossible record length {length}")
            chunk = os.pread(self.fd, FRAME.size + length, offset)
        body = memoryview(chunk)[FRAME.size:FRAME.size + length]
        if len(body) != length or zlib.crc32(body) != crc or body[0] != PUSH:
            raise JobDirCorrupt(self.path, offset, "a queue entry does not point at an intact PUSH record")
        return body

    def sync(self) -> None:
        """fsync the journal."""
        os.fsync(self.fd)

    def close(self) -> None:
        """Close the file descriptor."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
