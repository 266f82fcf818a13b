"""A compact in-memory set of 64-bit keys: the seen index.

Each fingerprint is reduced to its first 8 bytes (sha1 output is uniform, so these are
as good as random 64-bit keys, as in Heritrix's ``BdbUriUniqFilter``) and stored in an
open-addressing hash table held in an ``array('Q')``: 8 bytes a slot, kept between
3/8 and 3/4 full, so 11 to 21 bytes a key instead of ~100 for a Python ``set`` of
digests. Key 0 marks an empty slot; a key that is 0 is stored as 1.

The table is split in 256 shards by the key's top byte, each growing on its own: a
growth rehashes 1/256 of the keys, so no single ``add`` stalls for long and the memory
held twice during a growth is 1/256 of the index, not all of it.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable

_BYTEORDER = sys.byteorder
SHARD_BITS = 8
_SHIFT = 64 - SHARD_BITS
_MIN_SLOTS = 64


def key_of(fingerprint: bytes) -> int:
    """The 64-bit index key of a fingerprint."""
    return int.from_bytes(fingerprint[:8], _BYTEORDER) or 1


def _slots_for(count: int) -> int:
    slots = _MIN_SLOTS
    while slots * 3 // 4 < count:
        slots *= 2
    return slots


class SeenIndex:
    """A set of 64-bit integer keys in 256 flat hash tables."""

    __slots__ = ("_tables", "_masks", "_limits", "_counts", "_count")

    def __init__(self, expected: int = 0) -> None:
        slots = _slots_for(expected >> SHARD_BITS)
        self._tables = [array("Q", bytes(8 * slots)) for _ in range(1 << SHARD_BITS)]
        self._masks = [slots - 1] * (1 << SHARD_BITS)
        self._limits = [slots * 3 // 4] * (1 << SHARD_BITS)
        self._counts = [0] * (1 << SHARD_BITS)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, key: int) -> bool:
        shard = key >> _SHIFT
        table, mask = self._tables[shard], self._masks[shard]
        i = key & mask
        while True:
            value = table[i]
            if value == key:
                return True
            if value == 0:
                return False
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
        old = self._tables[shard]
        slots = 2 * len(old)
        table = array("Q", bytes(8 * slots))
        mask = slots - 1
        for key in old:
            if key:
                i = key & mask
                while table[i]:
                    i = (i + 1) & mask
                table[i] = key
        self._tables[shard], self._masks[shard], self._limits[shard] = table, mask, slots * 3 // 4

    @property
    def nbytes(self) -> int:
        """Bytes the tables occupy."""
        return sum(table.itemsize * len(table) for table in self._tables)
