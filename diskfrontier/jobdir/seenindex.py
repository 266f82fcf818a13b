"""A compact in-memory set of 64-bit keys: the seen index.

Each fingerprint is reduced to a 64-bit key: a 20-byte fingerprint (a sha1, Scrapy's and
ours) to its first 8 bytes (sha1 output is uniform, so these are as good as random keys,
as in Heritrix's ``BdbUriUniqFilter``), any other to an 8-byte blake2b of the whole of it
(fingerprints from another fingerprinter may share a prefix, or count up: their first
bytes are not a hash). Keys are stored in an
open-addressing hash table held in an ``array('Q')``: 8 bytes a slot, kept between
3/8 and 3/4 full, so 11 to 21 bytes a key instead of ~100 for a Python ``set`` of
digests. Key 0 marks an empty slot; a key that is 0 is stored as 1.

The table is split in 256 shards by the key's top byte, each growing on its own, so the
memory held twice during a growth is 1/256 of the index, not all of it. A shard grows
step by step: its keys move from the old table to the one twice its size ``MOVE_STEP`` slots
at a time, a step with each later ``add`` to that shard (lookups look in both meanwhile),
so no single ``add`` pays for a whole shard (at 10^8 keys, ~390,000 of them).

``requests.seen.index`` keeps the tables as they are in memory, so a clean open loads
them in bulk instead of inserting every fingerprint of ``requests.seen`` one at a time
(10^7 keys: a read of ~150 MB against ~10 s of inserts). It is a cache: it covers the
seen file up to a byte offset, a checkpoint names it by that offset and its crc32, and
anything that does not match means "load requests.seen", never "empty"::

    magic      DFSIDX\x00\x02
    header     seen_bytes:u64 count:u64 little_endian:u8 shard_bits:u8 (6 bytes zero)
    shards     2^shard_bits times  slots:u32 count:u32
    head_crc   u32, the crc32 of everything above
    tables     each shard's slots, 8 bytes each, in the byte order the header names
    crc        u32, the crc32 of the tables
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import sys
import zlib
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

from ..files.boundedjson import MAX_CRC, MAX_SIZE, check_int
from ..files.safefs import create_exclusive, open_file, unique_temp

_BYTEORDER = sys.byteorder
SHA1_BYTES = 20  # fingerprints of this size are taken to be hashes already
_blake2b = hashlib.blake2b
SHARD_BITS = 8
_SHIFT = 64 - SHARD_BITS
_MIN_SLOTS = 64
MOVE_STEP = 2048  # old slots moved to the new table with each add to a growing shard
INDEX_MAGIC = b"DFSIDX\x00\x02"  # 2: keys of fingerprints other than 20 bytes are hashed
_HEAD = struct.Struct(">QQBB6x")
_SHARD = struct.Struct(">II")
_U32 = struct.Struct(">I")
_LITTLE = sys.byteorder == "little"


def key_of(fingerprint: bytes) -> int:
    """The 64-bit index key of a fingerprint (see the module docstring)."""
    if len(fingerprint) == SHA1_BYTES:
        return int.from_bytes(fingerprint[:8], _BYTEORDER) or 1
    return int.from_bytes(_blake2b(fingerprint, digest_size=8).digest(), _BYTEORDER) or 1


def _slots_for(count: int) -> int:
    slots = _MIN_SLOTS
    while slots * 3 // 4 < count:
        slots *= 2
    return slots


class SeenIndex:
    """A set of 64-bit integer keys in 256 flat hash tables."""

    __slots__ = ("_tables", "_masks", "_limits", "_counts", "_count", "_old", "_moved")

    def __init__(self, expected: int = 0) -> None:
        slots = _slots_for(expected >> SHARD_BITS)
        self._tables = [array("Q", bytes(8 * slots)) for _ in range(1 << SHARD_BITS)]
        self._masks = [slots - 1] * (1 << SHARD_BITS)
        self._limits = [slots * 3 // 4] * (1 << SHARD_BITS)
        self._counts = [0] * (1 << SHARD_BITS)
        self._count = 0
        self._no_growth()

    def _no_growth(self) -> None:
        # a growing shard's old table (None: not growing), and how many of its slots were moved
        self._old: list[array[int] | None] = [None] * (1 << SHARD_BITS)
        self._moved = [0] * (1 << SHARD_BITS)

    def __len__(self) -> int:
        return self._count

    def __contains__(self, key: int) -> bool:
        # _holds written out for the shard's table: this runs on every push
        shard = key >> _SHIFT
        table, mask = self._tables[shard], self._masks[shard]
        i = key & mask
        while True:
            value = table[i]
            if value == key:
                return True
            if value == 0:
                old = self._old[shard]
                return old is not None and _holds(old, key)
            i = (i + 1) & mask

    def add(self, key: int) -> bool:
        """Insert ``key``; True if it was new."""
        shard = key >> _SHIFT
        table, mask = self._tables[shard], self._masks[shard]
        i = key & mask
        while True:
            value = table[i]
            if value == key:
                return False
            if value == 0:
                old = self._old[shard]
                if old is not None:
                    if _holds(old, key):
                        return False
                    self._move(shard, MOVE_STEP)
                    i = key & mask  # the step may have filled the slot found
                    while table[i]:
                        i = (i + 1) & mask
                table[i] = key
                self._count += 1
                count = self._counts[shard] = self._counts[shard] + 1
                if count > self._limits[shard]:
                    self._grow(shard)
                return True
            i = (i + 1) & mask

    def update(self, keys: Iterable[int]) -> int:
        """Insert many keys; return how many were new."""
        added = 0
        add = self.add
        for key in keys:
            added += add(key)
        return added

    def _grow(self, shard: int) -> None:
        """Start moving ``shard`` to a table twice the size (a growth still under way is finished first)."""
        if self._old[shard] is not None:
            self._move(shard, len(self._old[shard]))  # type: ignore[arg-type]
        old = self._tables[shard]
        slots = 2 * len(old)
        self._old[shard], self._moved[shard] = old, 0
        self._tables[shard], self._masks[shard] = array("Q", bytes(8 * slots)), slots - 1
        self._limits[shard] = slots * 3 // 4
        self._move(shard, MOVE_STEP)

    def _move(self, shard: int, step: int) -> None:
        """Move up to ``step`` more slots of a growing shard's old table into its new one."""
        old = self._old[shard]
        assert old is not None
        table, mask = self._tables[shard], self._masks[shard]
        start = self._moved[shard]
        stop = min(len(old), start + step)
        for key in old[start:stop]:
            if key:
                i = key & mask
                while table[i]:
                    i = (i + 1) & mask
                table[i] = key
        if stop == len(old):
            self._old[shard] = None
        else:
            self._moved[shard] = stop

    def settle(self) -> None:
        """Finish every growth under way (before the tables are saved)."""
        for shard, old in enumerate(self._old):
            if old is not None:
                self._move(shard, len(old))

    @property
    def nbytes(self) -> int:
        """Bytes the tables occupy (the old tables of growths under way included)."""
        return sum(8 * len(table) for table in (*self._tables, *self._old) if table is not None)

    def save(self, path: str, seen_bytes: int) -> IndexRecord:
        """Write the tables to ``path`` (a new file renamed over it) as covering ``seen_bytes``.

        Not fsynced: after a power cut a torn file fails its crc and the seen file is read instead.
        """
        self.settle()
        head = bytearray(INDEX_MAGIC + _HEAD.pack(seen_bytes, self._count, _LITTLE, SHARD_BITS))
        for table, count in zip(self._tables, self._counts, strict=True):
            head += _SHARD.pack(len(table), count)
        head += _U32.pack(zlib.crc32(head))
        tmp = unique_temp(path)
        fd = create_exclusive(tmp)
        try:
            with os.fdopen(fd, "wb", buffering=1 << 20) as f:
                f.write(head)
                crc = 0
                for table in self._tables:
                    f.write(table)
                    crc = zlib.crc32(table, crc)
                f.write(_U32.pack(crc))
                size = f.tell()
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return IndexRecord(seen_bytes, self._count, crc, size)

    @classmethod
    def load(cls, path: str, record: IndexRecord) -> SeenIndex:
        """The index saved at ``path`` as ``record`` describes it; ``IndexUnusable`` says why not."""
        try:
            with open_file(path) as f:
                return cls._read(f, record)
        except OSError as exc:
            raise IndexUnusable(f"cannot read it ({exc})") from None

    @classmethod
    def _read(cls, f: object, record: IndexRecord) -> SeenIndex:
        read = f.read  # type: ignore[attr-defined]
        size = os.fstat(f.fileno()).st_size  # type: ignore[attr-defined]
        if size != record.size:
            raise IndexUnusable(f"it is {size:,} bytes, the checkpoint names one of {record.size:,}")
        fixed = len(INDEX_MAGIC) + _HEAD.size
        head = read(fixed)
        if len(head) < fixed or head[:len(INDEX_MAGIC)] != INDEX_MAGIC:
            raise IndexUnusable("not a seen index (bad magic)")
        seen_bytes, count, little, bits = _HEAD.unpack_from(head, len(INDEX_MAGIC))
        if bits != SHARD_BITS or bool(little) != _LITTLE:
            raise IndexUnusable("written with another shard count or byte order")
        shards = read(_SHARD.size << bits)
        stored = read(_U32.size)
        if len(stored) < _U32.size or _U32.unpack(stored)[0] != zlib.crc32(shards, zlib.crc32(head)):
            raise IndexUnusable("its header fails its checksum")
        if (seen_bytes, count) != (record.seen_bytes, record.count):
            raise IndexUnusable(f"it covers {seen_bytes:,} bytes of requests.seen, the checkpoint names "
                                f"{record.seen_bytes:,}")
        index = cls.__new__(cls)
        index._tables, index._masks, index._limits, index._counts = [], [], [], []
        index._no_growth()
        crc = 0
        for slots, in_shard in struct.iter_unpack(">II", shards):
            if slots < _MIN_SLOTS or slots & (slots - 1) or in_shard > slots * 3 // 4:
                raise IndexUnusable(f"a shard of {slots} slots holding {in_shard} keys")
            table = array("Q")
            try:
                table.fromfile(f, slots)  # type: ignore[arg-type]
            except EOFError:
                raise IndexUnusable("it is cut short") from None
            crc = zlib.crc32(table, crc)
            index._tables.append(table)
            index._masks.append(slots - 1)
            index._limits.append(slots * 3 // 4)
            index._counts.append(in_shard)
        index._count = sum(index._counts)
        if index._count != count:
            raise IndexUnusable("its shard counts do not add up")
        if crc != record.crc or read(_U32.size) != _U32.pack(crc):
            raise IndexUnusable("its tables fail their checksum")
        return index


def _holds(table: array[int], key: int) -> bool:
    """True if the open-addressing ``table`` holds ``key``."""
    mask = len(table) - 1
    i = key & mask
    while True:
        value = table[i]
        if value == key:
            return True
        if value == 0:
            return False
        i = (i + 1) & mask


@dataclass(frozen=True)
class IndexRecord:
    """What a checkpoint keeps of a saved index: the seen bytes it covers, its key count, crc and size."""

    seen_bytes: int
    count: int
    crc: int
    size: int

    def to_json(self) -> list[int]:
        return [self.seen_bytes, self.count, self.crc, self.size]

    @classmethod
    def from_json(cls, value: object) -> IndexRecord:
        if not (isinstance(value, list) and len(value) == 4
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value)):
            raise ValueError("seen_index is not [seen_bytes, count, crc, size]")
        parts = ("seen_bytes", "count", "crc", "size")
        for part, number, high in zip(parts, value, (MAX_SIZE, MAX_SIZE, MAX_CRC, MAX_SIZE), strict=True):
            check_int(f"seen_index's {part}", number, 0, high)
        return cls(*value)


class IndexUnusable(Exception):
    """A saved index that cannot be used (the seen file is read instead); the message says why."""
