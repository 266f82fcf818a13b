"""``requests.queue/``: per-priority disk queues of journal offsets, and ``active.json``.

Scrapy's composition: one ``queuelib`` disk queue per priority (``LifoDiskQueue`` or
``FifoDiskQueue``) under a ``queuelib.PriorityQueue``. What is queued is the 8-byte
offset of the request's PUSH record in the journal, not the request itself: the queues
are an index into the journal, so a request is stored once, and a queue file that a
crash left stale is simply rebuilt from the journal (``recovery.py``).

``queuelib.PriorityQueue`` pops the lowest key first; the key is ``-priority`` so that
larger priorities come first, as in Scrapy. The file of priority P is ``p<P>``.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Iterable
from typing import Protocol

from queuelib import FifoDiskQueue, LifoDiskQueue, PriorityQueue

from .atomic import write_json_atomic
from .errors import JobDirCorrupt

OFFSET = struct.Struct(">Q")
ORDERS = ("lifo", "fifo")


class ByteQueue(Protocol):
    """The contract of a queuelib disk queue."""

    def push(self, data: bytes) -> None: ...
    def pop(self) -> bytes | None: ...
    def peek(self) -> bytes | None: ...
    def close(self) -> None: ...
    def __len__(self) -> int: ...


def queue_path(directory: str, priority: int) -> str:
    """The file (LIFO) or folder (FIFO) of one priority's queue."""
    return os.path.join(directory, f"p{priority}")


def read_active(path: str) -> list[int]:
    """The priorities ``active.json`` lists; raises JobDirCorrupt if it is not a list of ints."""
    try:
        with open(path, "rb") as f:
            value = json.loads(f.read())
    except (OSError, ValueError) as exc:
        raise JobDirCorrupt(path, 0, f"unreadable active.json ({exc})") from None
    if not isinstance(value, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in value):
        raise JobDirCorrupt(path, 0, "active.json is not a list of integer priorities")
    return value


ENTRY = OFFSET.size + 4  # a LifoDiskQueue entry: the 8-byte offset and its 4-byte size
BATCH = 1024


class BatchedLifoQueue:
    """A ``queuelib.LifoDiskQueue`` of offsets with its top kept in memory.

    queuelib pops one entry per seek + read + truncate (~14 us). Here the newest entries
    stay in a list (at most ``2 * BATCH``), older ones are spilled to the disk queue in
    order, and an empty top is refilled with one read and one truncate for ``BATCH``
    entries. The file stays queuelib's format: the top is pushed back before close, and
    what a crash leaves behind is rebuilt from the journal anyway.
    """

    def __init__(self, path: str) -> None:
        self.disk = LifoDiskQueue(path)
        self.top: list[bytes] = []
        expected = 4 + ENTRY * self.disk.size
        actual = os.fstat(self.disk.f.fileno()).st_size
        if actual != expected and self.disk.size:
            self.disk.f.close()
            raise JobDirCorrupt(path, 0, f"the header counts {self.disk.size} entries, the file is {actual} bytes")

    def push(self, data: bytes) -> None:
        top = self.top
        top.append(data)
        if len(top) > 2 * BATCH:
            push = self.disk.push
            for entry in top[:BATCH]:
                push(entry)
            del top[:BATCH]

    def pop(self) -> bytes | None:
        if not self.top and not self._refill():
            return None
        return self.top.pop()

    def peek(self) -> bytes | None:
        if not self.top and not self._refill():
            return None
        return self.top[-1]

    def _refill(self) -> bool:
        disk = self.disk
        count = min(BATCH, disk.size)
        if not count:
            return False
        f = disk.f
        try:
            f.seek(-ENTRY * count, os.SEEK_END)
        except OSError:
            raise JobDirCorrupt(disk.path, 0, "the queue file is shorter than its header says") from None
        data = f.read(ENTRY * count)
        zeros = b"\0" * count
        if (
            len(data) != ENTRY * count
            or not data[8::ENTRY] == data[9::ENTRY] == data[10::ENTRY] == zeros
            or data[11::ENTRY] != b"\x08" * count
        ):
            raise JobDirCorrupt(disk.path, max(0, f.tell() - len(data)), "a queue entry is not an 8-byte journal offset")
        f.seek(-ENTRY * count, os.SEEK_END)
        f.truncate()
        disk.size -= count
        self.top = [data[i:i + OFFSET.size] for i in range(0, len(data), ENTRY)]
        return True

    def close(self) -> None:
        push = self.disk.push
        for entry in self.top:
            push(entry)
        self.top = []
        self.disk.close()

    def __len__(self) -> int:
        return len(self.top) + self.disk.size


class OffsetQueues:
    """A priority queue of journal offsets over queuelib disk queues."""

    def __init__(self, directory: str, order: str, startprios: Iterable[int] = ()) -> None:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
        self.directory = directory
        self.order = order
        os.makedirs(directory, exist_ok=True)
        self._queue_class = BatchedLifoQueue if order == "lifo" else FifoDiskQueue
        self.pq = PriorityQueue(self._factory, [-p for p in startprios])

    def _factory(self, key: int) -> ByteQueue:
        path = queue_path(self.directory, -key)
        try:
            return self._queue_class(path)
        except (struct.error, ValueError, KeyError, TypeError) as exc:
            raise JobDirCorrupt(path, 0, f"unreadable queue header ({exc})") from None

    def push(self, offset: int, priority: int) -> None:
        """Queue the request whose PUSH record is at ``offset``."""
        self.pq.push(OFFSET.pack(offset), -priority)

    def pop(self) -> int | None:
        """The offset of the next request, or None."""
        data = self.pq.pop()
        if data is None:
            return None
        return OFFSET.unpack(data)[0]

    def top_priority(self) -> int | None:
        """The priority the next pop will come from."""
        return None if self.pq.curprio is None else -self.pq.curprio

    def sizes(self) -> dict[int, int]:
        """Entries per priority."""
        return {-k: len(q) for k, q in self.pq.queues.items() if len(q)}

    def __len__(self) -> int:
        return len(self.pq)

    def close(self) -> list[int]:
        """Close every queue (queuelib writes the headers); return the active priorities."""
        return sorted((-k for k in self.pq.close()), reverse=True)

    @staticmethod
    def write_active(path: str, priorities: list[int]) -> None:
        """Write ``active.json`` atomically."""
        write_json_atomic(path, priorities)

    @staticmethod
    def wipe(directory: str) -> None:
        """Remove every queue file (they will be rebuilt from the journal)."""
        if os.path.isdir(directory):
            shutil.rmtree(directory)
        os.makedirs(directory)
