"""``requests.seen``: every fingerprint ever accepted, append-only, in Scrapy's format.

Scrapy 2.19+ format: each fingerprint as a 2-byte big-endian length and the bytes.
Older Scrapy wrote one 40-character hex digest a line; such a file is read too and,
when the directory is opened for writing, converted in place (atomically) so that
Scrapy 2.19 can read it as well.

Scrapy's format has no checksum, so one lives beside it: ``requests.seen.sums`` holds
the magic ``DFSEEN\\x00\\x03`` and then a crc32 for every complete 64 KiB block of the
seen file, seeded with the block's index and the job directory's salt (``jobdir.salt_of``),
so a block is only valid in its place, in its own directory. (``DFSEEN\\x00\\x02``: the
same without the salt, in a format-3 job directory; converted by the upgrade.) The
last, partial block is covered by a crc kept in the checkpoint. A damaged fingerprint
would silently drop one URL's dedupe; with the sums it is named instead.

The file may lag the journal by a few thousand fingerprints: appends are buffered and
written in batches, because every fingerprint accepted since the last compaction is
also in its journal PUSH record, from which recovery fills the gap. Compaction writes
and fsyncs this file before it drops any journal record.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import struct
import zlib
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..core.errors import JobDirCorrupt
from ..files.atomic import write_all, write_atomic
from ..files.safefs import open_fd, open_file
from ..files.writeerrors import naming, raise_named
from .seenindex import SHA1_BYTES, IndexRecord, IndexUnusable, SeenIndex, key_of

log = logging.getLogger("diskfrontier")

_HEX_LINE = re.compile(rb"[0-9a-fA-F]{40}\r?\n")
FLUSH_BYTES = 64 * 1024
BLOCK = 1 << 16
SUMS_MAGIC = b"DFSEEN\x00\x03"
SUMS_MAGIC_UNSALTED = b"DFSEEN\x00\x02"
_SUM = struct.Struct(">I")
_INDEX = struct.Struct(">Q")


def sums_magic(salt: int) -> bytes:
    """The magic of a sums file whose crcs hold ``salt`` (0: a format-3 job directory's, without one)."""
    return SUMS_MAGIC if salt else SUMS_MAGIC_UNSALTED


def block_crc(index: int, data: bytes | memoryview, salt: int, start: int = -1) -> int:
    """The crc32 of block ``index`` of the seen file of the directory with ``salt`` (``start``: a running crc
    to continue)."""
    return zlib.crc32(data, zlib.crc32(_INDEX.pack(index), salt) if start < 0 else start)


@dataclass
class SeenLoad:
    """What loading the seen file found."""

    count: int = 0
    end: int = 0
    torn: int = 0
    legacy_hex: bool = False


def _keys_of_uniform(data: bytes, count: int, width: int) -> array:
    """Bulk-extract 8-byte keys from ``count`` records of ``2 + width`` bytes (C speed)."""
    step = 2 + width
    packed = bytearray(8 * count)
    for j in range(8):
        packed[j::8] = data[2 + j:count * step:step]
    keys = array("Q")
    keys.frombytes(bytes(packed))
    return keys


def parse_seen(path: str, data: bytes, *, strict: bool = True, keys: bool = True) -> tuple[array, SeenLoad]:
    """Decode the seen file's bytes (binary or legacy hex lines) into 64-bit index keys.

    ``keys=False``: only check and count (the array returned is empty on the fast path).
    """
    info = SeenLoad()
    if not data:
        return array("Q"), info
    if _HEX_LINE.match(data):
        return _parse_hex(path, data, info, strict)
    width = int.from_bytes(data[:2], "big")
    step = 2 + width
    if width and len(data) >= step:
        count = len(data) // step
        # Fast path: every record is a 20-byte sha1 (the normal case), whose key is its first 8 bytes.
        lengths = data[0:count * step:step] + data[1:count * step:step]
        if lengths == data[0:1] * count + data[1:2] * count and width == SHA1_BYTES:
            info.count, info.end = count, count * step
            info.torn = len(data) - info.end
            return _keys_of_uniform(data, count, width) if keys else array("Q"), info
    return _parse_variable(path, data, info, strict)


def _parse_variable(path: str, data: bytes, info: SeenLoad, strict: bool) -> tuple[array, SeenLoad]:
    keys = array("Q")
    pos, size = 0, len(data)
    first = int.from_bytes(data[:2], "big")
    while pos + 2 <= size:
        width = int.from_bytes(data[pos:pos + 2], "big")
        if width != first and strict and data[pos:].strip(b"\0"):
            raise JobDirCorrupt(path, pos, f"a fingerprint length of {width} where the file uses {first}")
        if width == 0:
            if not data[pos:].strip(b"\0"):
                break  # zero-filled tail after a power cut
            if strict:
                raise JobDirCorrupt(path, pos, "a fingerprint of length 0")
            pos += 1
            continue
        if pos + 2 + width > size:
            break
        keys.append(key_of(data[pos + 2:pos + 2 + width]))
        pos += 2 + width
    info.count, info.end, info.torn = len(keys), pos, size - pos
    return keys, info


def _parse_hex(path: str, data: bytes, info: SeenLoad, strict: bool) -> tuple[array, SeenLoad]:
    info.legacy_hex = True
    keys = array("Q")
    pos = 0
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break  # torn last line
        text = line.strip()
        if text:
            try:
                fp = bytes.fromhex(text.decode("ascii"))
            except ValueError:
                if strict:
                    raise JobDirCorrupt(path, pos, f"not a hex fingerprint: {text[:60]!r}") from None
                fp = b""
            if fp:
                keys.append(key_of(fp))
        pos += len(line)
    info.count, info.end, info.torn = len(keys), pos, len(data) - pos
    return keys, info


def hex_to_binary(data: bytes) -> bytes:
    """Convert a legacy hex-line seen file to the binary format (torn last line dropped)."""
    out = bytearray()
    for line in data.splitlines(keepends=True):
        text = line.strip()
        if line.endswith(b"\n") and text:
            fp = bytes.fromhex(text.decode("ascii"))
            out += len(fp).to_bytes(2, "big") + fp
    return bytes(out)


def fingerprints_in(data: bytes) -> Iterator[bytes]:
    """Every fingerprint of a seen file's bytes (binary or hex lines), torn tail left out."""
    if _HEX_LINE.match(data):
        data = hex_to_binary(data)
    pos, size = 0, len(data)
    while pos + 2 <= size:
        width = int.from_bytes(data[pos:pos + 2], "big")
        if not width or pos + 2 + width > size:
            return
        yield data[pos + 2:pos + 2 + width]
        pos += 2 + width


def sums_path(seen_path: str) -> str:
    """The checksum file beside a seen file."""
    return seen_path + ".sums"


def read_sums(path: str, salt: int) -> list[int] | None:
    """The block crcs of a sums file, None if it is missing; raises JobDirCorrupt if it is not one of the directory
    with ``salt``."""
    try:
        with open_file(path) as f:
            data = f.read()
    except FileNotFoundError:
        return None
    if data[:len(SUMS_MAGIC)] != sums_magic(salt):
        known = data[:len(SUMS_MAGIC)] in (SUMS_MAGIC, SUMS_MAGIC_UNSALTED)
        raise JobDirCorrupt(path, 0, "a checksum file of another format than its job directory's" if known
                            else "not a diskfrontier checksum file (bad magic)", hint=_SUMS_HINT.format(path=path))
    body = data[len(SUMS_MAGIC):]
    whole = len(body) // _SUM.size * _SUM.size  # a sum cut short by a crash is dropped
    return list(struct.unpack(f">{whole // _SUM.size}I", body[:whole]))


_SUMS_HINT = ("run 'diskfrontier verify --repair' on its job directory: it checks every fingerprint's length "
              "and writes the checksums anew ({path})")


def check_blocks(
    path: str, data: bytes | memoryview, sums: list[int], salt: int, first: int = 0,
) -> JobDirCorrupt | None:
    """The first block of ``data`` whose crc is not its sum, as an error; None if all match.

    ``data`` holds the file from block ``first`` on; the blocks before it are not checked.
    """
    view = memoryview(data)
    base = first * BLOCK
    for index in range(first, len(sums)):
        expected = sums[index]
        block = view[index * BLOCK - base:(index + 1) * BLOCK - base]
        if len(block) < BLOCK:
            size = base + len(view)
            return JobDirCorrupt(path, size, f"the file is {size:,} bytes, shorter than its checksums "
                                             f"cover ({len(sums) * BLOCK:,}): it was truncated")
        if block_crc(index, block, salt) != expected:
            return JobDirCorrupt(path, index * BLOCK, f"checksum mismatch in the fingerprints of bytes "
                                                      f"{index * BLOCK:,}..{(index + 1) * BLOCK:,}")
    return None


def check_tail(
    path: str, view: memoryview, tail: tuple[int, int], summed: int, salt: int, first: int = 0,
) -> JobDirCorrupt | None:
    """Check the partial last block as a checkpoint recorded it (``tail`` = (end, crc)), as an error or None.

    ``summed``: how many blocks have their own sum (a block completed since is checked by it).
    ``view`` holds the file from block ``first`` on.
    """
    end, crc = tail
    block = end // BLOCK
    if block < summed:
        return None
    base = first * BLOCK
    if base + len(view) < end:
        size = base + len(view)
        return JobDirCorrupt(path, size, f"the file is {size:,} bytes, but it held {end:,} at the last "
                                         f"checkpoint: it was truncated")
    if block < first:
        return None  # within what the loaded index covers
    if block_crc(block, view[block * BLOCK - base:end - base], salt) != crc:
        return JobDirCorrupt(path, block * BLOCK, f"checksum mismatch in the fingerprints of bytes "
                                                  f"{block * BLOCK:,}..{end:,}")
    return None


@dataclass
class SeenCheck:
    """What ``check_seen_file`` found."""

    end: int = 0  # where the intact fingerprints end
    torn: int = 0  # bytes after them that a kill could have left
    size: int = 0
    problem: JobDirCorrupt | None = None  # the first damage found


_CHECK_CHUNK = 64 * BLOCK


def check_seen_file(path: str, sums: list[int], tail: tuple[int, int] | None, salt: int) -> SeenCheck:
    """Check a binary seen file against its block sums and a checkpoint's tail, reading it in chunks.

    Memory stays at one chunk (4 MiB) whatever the file's size; for ``verify``.
    """
    result = SeenCheck()
    carry, base = b"", 0  # carry: bytes of a fingerprint cut by the chunk boundary, from file offset base
    block = 0
    with contextlib.ExitStack() as stack:
        try:
            f = stack.enter_context(open_file(path))
        except FileNotFoundError:
            f = stack.enter_context(io.BytesIO())  # a missing file is checked as an empty one
        result.size = os.fstat(f.fileno()).st_size if isinstance(f, io.BufferedReader) else 0
        while chunk := f.read(_CHECK_CHUNK):
            data = carry + chunk
            try:
                _, info = parse_seen(path, data, strict=True, keys=False)
            except JobDirCorrupt as exc:
                result.problem = JobDirCorrupt(path, base + exc.offset, exc.problem)
                return result
            if info.legacy_hex:
                result.problem = JobDirCorrupt(path, base, "hex lines in a binary seen file")
                return result
            carry, base = data[info.end:], base + info.end
            complete = len(chunk) // BLOCK
            damage = check_blocks(path, chunk, sums[:block + complete], salt, block)
            if damage is None and tail is not None and block <= tail[0] // BLOCK < block + -(-len(chunk) // BLOCK):
                damage = check_tail(path, memoryview(chunk), tail, len(sums), salt, block)
            if damage is not None:
                result.problem = damage
                return result
            block += complete
    result.end, result.torn = base, len(carry)
    if len(sums) > block:
        result.problem = JobDirCorrupt(path, result.size, f"the file is {result.size:,} bytes, shorter than its "
                                                          f"checksums cover ({len(sums) * BLOCK:,}): it was truncated")
    elif tail is not None and tail[0] > result.end:
        result.problem = JobDirCorrupt(path, result.end, f"the file is {result.end:,} bytes, but it held {tail[0]:,} "
                                                         f"at the last checkpoint: it was truncated")
    return result


def count_fingerprints(path: str) -> int:
    """How many fingerprints the seen file at ``path`` holds (damage skipped), read in 4 MiB chunks."""
    count, carry = 0, b""
    with open_file(path) as f:
        while chunk := f.read(_CHECK_CHUNK):
            data = carry + chunk
            _, info = parse_seen(path, data, strict=False, keys=False)
            count += info.count
            carry = data[info.end:]
            if len(carry) > _CHECK_CHUNK:  # no fingerprint in a whole chunk: not a seen file
                break
    return count


def sums_of(data: bytes | memoryview, salt: int) -> list[int]:
    """The crc of every complete block of ``data``."""
    view = memoryview(data)
    return [block_crc(i, view[i * BLOCK:(i + 1) * BLOCK], salt) for i in range(len(view) // BLOCK)]


def write_sums(path: str, sums: Iterable[int], salt: int) -> None:
    """Replace the sums file atomically."""
    write_atomic(path, sums_magic(salt) + b"".join(_SUM.pack(s) for s in sums))


class SeenFile:
    """The seen file opened for appending, with its in-memory index and its block checksums.

    ``salt``: the job directory's (``jobdir.salt_of``), held by every block's checksum.
    """

    def __init__(self, path: str, salt: int) -> None:
        self.path = path
        self.salt = salt
        self.sums_path = sums_path(path)
        self.index_path = path + ".index"
        self.index = SeenIndex()
        self.index_record: IndexRecord | None = None  # the saved index that matches self.index
        self._pending = bytearray()
        self.load = SeenLoad()
        self.fd = -1
        self.sums_fd = -1
        self.end = 0
        self._blocks = 0  # complete blocks of the seen file
        self._sums_on_disk = 0  # sums in the sums file (fewer than blocks only after a failed write)
        self._tail_crc = block_crc(0, b"", salt)

    def open(
        self, *, require_sums: bool, tail: tuple[int, int] | None = None, index: IndexRecord | None = None,
    ) -> SeenLoad:
        """Load the file into the index, check its checksums, cut a torn tail, convert a hex file.

        ``require_sums``: a non-empty seen file must have its sums file (a job directory
        of format 2); otherwise sums are computed from the file as it is (a file that
        Scrapy or format 1 wrote). ``tail``: ``(end, crc)`` of the partial last block as
        a checkpoint recorded it. ``index``: a saved index (``requests.seen.index``) as a
        checkpoint recorded it: if it loads, only the fingerprints past what it covers
        are read from the seen file (and only their blocks checked); if not, the whole
        file is read and the reason logged.
        """
        loaded = self._load_index(index)
        covered = index.seen_bytes if loaded is not None and index is not None else 0
        start = covered - covered % BLOCK  # read from the block that holds the first byte not covered
        data = self._read_from(start)
        if start + len(data) < covered:  # shorter than the index covers: the whole file decides
            loaded, covered, start = None, 0, 0
            data = self._read_from(0)
        keys, info = parse_seen(self.path, data[covered - start:])
        if info.legacy_hex and covered:
            return self._reopen_whole(require_sums, tail, "hex lines follow what it covers")
        if info.legacy_hex:
            data = hex_to_binary(data)
            write_atomic(self.path, data)
            info.end, info.torn = len(data), 0
        info.end += covered
        view = memoryview(data)[:info.end - start]
        stored = read_sums(self.sums_path, self.salt)
        if stored is None and require_sums and info.end:
            raise JobDirCorrupt(self.sums_path, 0, "missing: the checksums of requests.seen are gone",
                                hint=_SUMS_HINT.format(path=self.sums_path))
        sums = stored or []
        if stored is not None and tail is not None and len(stored) < tail[0] // BLOCK:
            raise JobDirCorrupt(
                self.sums_path, len(SUMS_MAGIC) + _SUM.size * len(stored),
                f"it holds {len(stored)} checksums, but requests.seen had {tail[0] // BLOCK} complete blocks at the "
                f"last checkpoint: it was truncated", hint=_SUMS_HINT.format(path=self.sums_path))
        first = start // BLOCK
        if len(sums) < first:
            return self._reopen_whole(require_sums, tail, "requests.seen.sums does not cover it")
        damage = check_blocks(self.path, view, sums, self.salt, first)
        if damage is not None:
            raise damage
        self._blocks = info.end // BLOCK
        complete = sums + [block_crc(i, view[(i - first) * BLOCK:(i - first + 1) * BLOCK], self.salt)
                           for i in range(len(sums), self._blocks)]
        self._tail_crc = block_crc(self._blocks, view[(self._blocks - first) * BLOCK:], self.salt)
        if tail is not None and (damage := check_tail(self.path, view, tail, self._blocks, self.salt,
                                                      first)) is not None:
            raise damage
        self._open_files(info.end, complete, rewrite_sums=stored is None or len(complete) != len(sums))
        if loaded is None:
            self.index = SeenIndex(expected=len(keys) + 1024)
        else:
            self.index, self.index_record = loaded, index
        self.index.update(keys)
        info.count = len(self.index)
        self.load = info
        return info

    def _read_from(self, start: int) -> bytes:
        """The seen file's bytes from ``start`` on (none if it is missing)."""
        try:
            with open_file(self.path) as f:
                f.seek(start)
                return f.read()
        except FileNotFoundError:
            return b""

    def _load_index(self, record: IndexRecord | None) -> SeenIndex | None:
        if record is None:
            return None
        try:
            return SeenIndex.load(self.index_path, record)
        except IndexUnusable as exc:
            log.warning("%s not used (%s): reading %s instead", self.index_path, exc, self.path)
            return None

    def _reopen_whole(self, require_sums: bool, tail: tuple[int, int] | None, why: str) -> SeenLoad:
        log.warning("%s not used (%s): reading %s instead", self.index_path, why, self.path)
        return self.open(require_sums=require_sums, tail=tail)

    def save_index(self, *, min_new_keys: int) -> IndexRecord | None:
        """Save the index for the next open if at least ``min_new_keys`` keys are not in the saved one.

        Returns the record of the index file now valid (None if there is none). Call after
        a flush: the saved index covers exactly the fingerprints written to the file.
        """
        covered = self.index_record.count if self.index_record is not None else 0
        if len(self.index) - covered < max(1, min_new_keys) or self._pending:
            return self.index_record
        try:
            self.index_record = self.index.save(self.index_path, self.end)
        except OSError as exc:  # a full disk: the index is a cache, and the old one still describes its file
            log.warning("could not save %s (%s); the next open reads %s instead", self.index_path,
                        exc.strerror or exc, self.path)
        return self.index_record

    def _open_files(self, end: int, sums: list[int], *, rewrite_sums: bool) -> None:
        if rewrite_sums:
            write_sums(self.sums_path, sums, self.salt)
        self.fd = open_fd(self.path, os.O_RDWR | os.O_CREAT)
        if os.fstat(self.fd).st_size != end:
            os.ftruncate(self.fd, end)
        self.sums_fd = open_fd(self.sums_path, os.O_RDWR)
        sums_end = len(SUMS_MAGIC) + _SUM.size * len(sums)
        if os.fstat(self.sums_fd).st_size != sums_end:
            os.ftruncate(self.sums_fd, sums_end)
        self.end = end
        self._sums_on_disk = len(sums)

    def add(self, fingerprint: bytes, key: int | None = None) -> bool:
        """Record ``fingerprint`` (whose index key may be given); False if it was already seen."""
        if not self.index.add(key_of(fingerprint) if key is None else key):
            return False
        self._pending += len(fingerprint).to_bytes(2, "big") + fingerprint
        if len(self._pending) >= FLUSH_BYTES:
            self.flush()
        return True

    def __contains__(self, fingerprint: bytes) -> bool:
        return key_of(fingerprint) in self.index

    def __len__(self) -> int:
        return len(self.index)

    def flush(self) -> None:
        """Write the buffered fingerprints to the file, then the sums of the blocks they complete.

        A write that fails part-way is cut back to the last good end, and the
        fingerprints stay buffered for the next flush.
        """
        if not self._pending:
            return
        data = bytes(self._pending)
        start = self.end
        try:
            os.lseek(self.fd, start, os.SEEK_SET)
            write_all(self.fd, data)
        except BaseException as exc:
            os.ftruncate(self.fd, start)
            raise_named(self.path, exc)
            raise
        self._pending.clear()
        self.end = start + len(data)
        new_sums = self._advance_sums(start, data)
        if new_sums:
            self._append_sums(new_sums)

    def _advance_sums(self, start: int, data: bytes) -> list[int]:
        """Carry the running crc of the partial block over ``data``; the sums of blocks it completes."""
        done = []
        pos = 0
        offset = start
        while pos < len(data):
            room = BLOCK - offset % BLOCK
            piece = data[pos:pos + room]
            self._tail_crc = block_crc(self._blocks, piece, self.salt, self._tail_crc)
            pos += len(piece)
            offset += len(piece)
            if offset % BLOCK == 0:
                done.append(self._tail_crc)
                self._blocks += 1
                self._tail_crc = block_crc(self._blocks, b"", self.salt)
        return done

    def _append_sums(self, sums: list[int]) -> None:
        if self._sums_on_disk + len(sums) != self._blocks:
            return  # an earlier sums write failed: the next open computes the missing ones
        at = len(SUMS_MAGIC) + _SUM.size * self._sums_on_disk
        try:
            os.lseek(self.sums_fd, at, os.SEEK_SET)
            write_all(self.sums_fd, b"".join(_SUM.pack(s) for s in sums))
        except BaseException as exc:
            os.ftruncate(self.sums_fd, at)
            raise_named(self.sums_path, exc)
            raise
        self._sums_on_disk += len(sums)

    def tail(self) -> tuple[int, int]:
        """``(end, crc)`` of the partial last block, for the checkpoint (after a flush)."""
        return self.end, self._tail_crc

    def sync(self) -> None:
        """Flush and fsync."""
        self.flush()
        with naming(self.path):
            os.fsync(self.fd)
            os.fsync(self.sums_fd)

    def close(self) -> None:
        """Flush and close."""
        try:
            if self.fd >= 0:
                self.flush()
        finally:
            for name in ("fd", "sums_fd"):
                fd = getattr(self, name)
                setattr(self, name, -1)  # forgotten first: a failed close must not lead to a second one
                if fd >= 0:
                    os.close(fd)
