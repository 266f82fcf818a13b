"""Requests held back until a time: ``push(not_before=)``, ``retry(delay=)``, ``done(refetch_after=)``.

They are kept in compact arrays, not a Python object each: one bucket per second of
due time, holding three arrays (due time, journal offset, priority; 20 bytes a
request), and a heap of the bucket keys. A request leaves when its own due time has
passed and goes into its priority's queue like any other pending request.

The journal holds every request's ``not_before`` (its PUSH, RETRY or REFETCH record),
so after a crash these arrays are rebuilt by the journal scan; a clean close saves
them with the host table (``politeness/schedule.py``).
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Iterator

_BUCKET_SECONDS = 1.0


class _Bucket:
    __slots__ = ("due", "offsets", "priorities", "earliest")

    def __init__(self) -> None:
        self.due = array("d")
        self.offsets = array("Q")
        self.priorities = array("i")
        self.earliest = math.inf


class DelayedRequests:
    """Offsets of requests not to be handed out before their due time."""

    def __init__(self) -> None:
        self._buckets: dict[int, _Bucket] = {}
        self._keys: list[int] = []  # a heap of the bucket keys
        self._count = 0
        self.by_priority: dict[int, int] = {}

    def __len__(self) -> int:
        return self._count

    def add(self, due: float, offset: int, priority: int) -> None:
        """Hold the request at ``offset`` until ``due`` (a ``time.time()`` value)."""
        key = math.floor(due / _BUCKET_SECONDS)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket()
            heapq.heappush(self._keys, key)
        bucket.due.append(due)
        bucket.offsets.append(offset)
        bucket.priorities.append(priority)
        bucket.earliest = min(bucket.earliest, due)
        self._count += 1
        self.by_priority[priority] = self.by_priority.get(priority, 0) + 1

    def next_due(self) -> float | None:
        """The earliest due time held, or None."""
        if not self._keys:
            return None
        return self._buckets[self._keys[0]].earliest

    def release(self, now: float) -> list[tuple[int, int, float]]:
        """Take out every request due at or before ``now``: (offset, priority, due), earliest first."""
        out: list[tuple[int, int, float]] = []
        keys, buckets = self._keys, self._buckets
        while keys and buckets[keys[0]].earliest <= now:
            key = keys[0]
            bucket = buckets[key]
            keep = _Bucket()
            for due, offset, priority in zip(bucket.due, bucket.offsets, bucket.priorities, strict=True):
                if due <= now:
                    out.append((offset, priority, due))
                else:
                    keep.due.append(due)
                    keep.offsets.append(offset)
                    keep.priorities.append(priority)
                    keep.earliest = min(keep.earliest, due)
            if len(keep.due):
                buckets[key] = keep
                break  # the rest of this bucket, and every later bucket, is not due yet
            del buckets[key]
            heapq.heappop(keys)
        out.sort(key=lambda item: (item[2], item[0]))
        for _offset, priority, _due in out:
            left = self.by_priority[priority] - 1
            if left:
                self.by_priority[priority] = left
            else:
                del self.by_priority[priority]
        self._count -= len(out)
        return out

    def discard(self, offset: int, due: float) -> bool:
        """Take out the request at ``offset``, held until ``due``; False if it is not held."""
        key = math.floor(due / _BUCKET_SECONDS)
        bucket = self._buckets.get(key)
        if bucket is None:
            return False
        try:
            i = bucket.offsets.index(offset)
        except ValueError:
            return False
        priority = bucket.priorities[i]
        for values in (bucket.due, bucket.offsets, bucket.priorities):
            del values[i]
        if not len(bucket.offsets):
            del self._buckets[key]
            self._keys.remove(key)
            heapq.heapify(self._keys)
        else:
            bucket.earliest = min(bucket.due)
        self._count -= 1
        left = self.by_priority[priority] - 1
        if left:
            self.by_priority[priority] = left
        else:
            del self.by_priority[priority]
        return True

    def first(self, count: int) -> Iterator[tuple[int, int, float]]:
        """Up to ``count`` requests held, earliest first: (offset, priority, due), without taking
        them out or sorting every bucket (the heap of bucket keys is walked in order)."""
        keys, buckets = self._keys, self._buckets
        walk = [(keys[0], 0)] if keys else []
        while walk and count > 0:
            key, at = heapq.heappop(walk)
            for child in (2 * at + 1, 2 * at + 2):
                if child < len(keys):
                    heapq.heappush(walk, (keys[child], child))
            bucket = buckets[key]
            entries = zip(bucket.offsets, bucket.priorities, bucket.due, strict=True)
            for entry in heapq.nsmallest(count, entries, key=lambda e: (e[2], e[0])):
                yield entry
                count -= 1

    def items(self) -> list[tuple[int, int, float]]:
        """Every request held: (offset, priority, due), earliest first."""
        out: list[tuple[int, int, float]] = []
        for key in sorted(self._buckets):
            bucket = self._buckets[key]
            out.extend(zip(bucket.offsets, bucket.priorities, bucket.due, strict=True))
        out.sort(key=lambda item: (item[2], item[0]))
        return out

    def clear(self) -> None:
        """Forget everything held."""
        self.__init__()  # type: ignore[misc]

    def to_arrays(self) -> tuple[bytes, bytes, bytes]:
        """(due times, offsets, priorities) as the bytes of native arrays, for the host table file."""
        due, offsets, priorities = array("d"), array("Q"), array("i")
        for bucket in self._buckets.values():
            due.extend(bucket.due)
            offsets.extend(bucket.offsets)
            priorities.extend(bucket.priorities)
        return due.tobytes(), offsets.tobytes(), priorities.tobytes()

    @classmethod
    def from_arrays(cls, due: bytes, offsets: bytes, priorities: bytes) -> DelayedRequests:
        """The inverse of ``to_arrays``; raises ValueError if the arrays do not fit together."""
        a, b, c = array("d"), array("Q"), array("i")
        a.frombytes(due)
        b.frombytes(offsets)
        c.frombytes(priorities)
        if not len(a) == len(b) == len(c) or any(math.isnan(x) for x in a):
            raise ValueError("the delayed requests' arrays do not fit together")
        held = cls()
        for x, y, z in zip(a, b, c, strict=True):
            held.add(x, y, z)
        return held
