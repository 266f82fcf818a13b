"""A compact in-memory set of 64-bit keys: the seen index.

Each fingerprint is reduced to its first 8 bytes (sha1 output is uniform, so these are
as good as random 64-bit keys, as in Heritrix's ``BdbUriUniqFilter``) and stored in an
open-addressing hash table held in one ``array('Q')``: 8 bytes a slot, kept between
3/8 and 3/4 full, so 11 to 21 bytes a key instead of ~100 for a Python ``set`` of
digests. Key 0 marks an empty slot; a key that is 0 is stored as 1.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable

_BYTEORDER = sys.byteorder


def key_of(fingerprint: bytes) -> int:
    """The 64-bit index key of a fingerprint."""
    return int.from_bytes(fingerprint[:8], _BYTEORDER) or 1


class SeenIndex:
    """A set of 64-bit integer keys in a flat hash table."""

    __slots__ = ("_table", "_mask", "_count", "_limit")

    def __init__(self, expected: int = 0) -> None:
        slots = 1024
        while slots * 3 // 4 < expected:
            slots *= 2
        self._alloc(slots)
        self._count = 0

    def _alloc(self, slots: int) -> None:
        self._table = array("Q", bytes(8 * slots))
        self._mask = slots - 1
        self._limit = slots * 3 // 4

    def __len__(self) -> int:
        return self._count

    def __contains__(self, key: int) -> bool:
        table, mask = self._table, self._mask
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
        table, mask = self._table, self._mask
        i = key & mask
        while True:
            value = table[i]
            if value == key:
                return False
            if value == 0:
                table[i] = key
                self._count += 1
                if self._count > self._limit:
                    self._grow()
                return True
            i = (i + 1) & mask

    def update(self, keys: Iterable[int]) -> int:
        """Insert many keys; return how many were new."""
        added = 0
        add = self.add
        for key in keys:
            added += add(key)
        return added

    def _grow(self) -> None:
        old = self._table
        self._alloc(2 * len(old))
        table, mask = self._table, self._mask
        for key in old:
            if key:
                i = key & mask
                while table[i]:
                    i = (i + 1) & mask
                table[i] = key

    @property
    def nbytes(self) -> int:
        """Bytes the table occupies."""
        return self._table.itemsize * len(self._table)
