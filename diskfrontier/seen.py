"""``requests.seen``: every fingerprint ever accepted, append-only, in Scrapy's format.

Scrapy 2.19+ format: each fingerprint as a 2-byte big-endian length and the bytes.
Older Scrapy wrote one 40-character hex digest a line; such a file is read too and,
when the directory is opened for writing, converted in place (atomically) so that
Scrapy 2.19 can read it as well.

The file may lag the journal by a few thousand fingerprints: appends are buffered and
written in batches, because every fingerprint accepted since the last compaction is
also in its journal PUSH record, from which recovery fills the gap. Compaction writes
and fsyncs this file before it drops any journal record.
"""

from __future__ import annotations

import os
import re
from array import array
from dataclasses import dataclass

from .atomic import write_all, write_atomic
from .errors import JobDirCorrupt
from .seenindex import SeenIndex, key_of

_HEX_LINE = re.compile(rb"[0-9a-fA-F]{40}\r?\n")
FLUSH_BYTES = 64 * 1024


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


def parse_seen(path: str, data: bytes, *, strict: bool = True) -> tuple[array, SeenLoad]:
    """Decode the seen file's bytes (binary or legacy hex lines) into 64-bit index keys."""
    info = SeenLoad()
    if not data:
        return array("Q"), info
    if _HEX_LINE.match(data):
        return _parse_hex(path, data, info, strict)
    width = int.from_bytes(data[:2], "big")
    step = 2 + width
    if width and len(data) >= step:
        count = len(data) // step
        # Fast path: every record has the same width (the normal case: 20-byte sha1s).
        lengths = data[0:count * step:step] + data[1:count * step:step]
        if lengths == data[0:1] * count + data[1:2] * count and width >= 8:
            info.count, info.end = count, count * step
            info.torn = len(data) - info.end
            return _keys_of_uniform(data, count, width), info
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


class SeenFile:
    """The seen file opened for appending, with its in-memory index."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.index = SeenIndex()
        self._pending = bytearray()
        self.load = SeenLoad()
        self.fd = -1

    def open(self) -> SeenLoad:
        """Load the file into the index, cut a torn tail, convert a hex file; open for append."""
        data = b""
        if os.path.exists(self.path):
            with open(self.path, "rb") as f:
                data = f.read()
        keys, info = parse_seen(self.path, data)
        if info.legacy_hex:
            write_atomic(self.path, hex_to_binary(data))
            info.end, info.torn = info.count * 22, 0
        self.index = SeenIndex(expected=len(keys) + 1024)
        self.index.update(keys)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self.fd).st_size != info.end:
            os.ftruncate(self.fd, info.end)
        os.lseek(self.fd, info.end, os.SEEK_SET)
        self.load = info
        return info

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
        """Write the buffered fingerprints to the file."""
        if self._pending:
            write_all(self.fd, self._pending)
            self._pending.clear()

    def sync(self) -> None:
        """Flush and fsync."""
        self.flush()
        os.fsync(self.fd)

    def close(self) -> None:
        """Flush and close."""
        if self.fd >= 0:
            self.flush()
            os.close(self.fd)
            self.fd = -1
