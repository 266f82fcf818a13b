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

import contextlib
import os
import struct
import sys
import zlib
from array import array
from collections.abc import Iterable, Iterator
from typing import Any, Protocol, cast

from queuelib import FifoDiskQueue, LifoDiskQueue, PriorityQueue

from ..core.errors import JobDirCorrupt
from ..files import boundedjson
from ..files.atomic import write_all, write_json_atomic
from ..files.boundedjson import MAX_SIZE
from ..files.safefs import check_tree, create_exclusive, make_dir, open_file, remove_tree
from ..files.writeerrors import naming, raise_named
from ..request.model import PRIORITY_MAX, PRIORITY_MIN
from ..scrapyfiles.queuelib_files import fifo_info, read_fifo_info
from .checkpoint import Checkpoint
from .journal import record_end

OFFSET = struct.Struct(">Q")
_OFFSET_UNPACK = OFFSET.unpack
_OFFSET_PACK = OFFSET.pack
ORDERS = ("lifo", "fifo")


class ByteQueue(Protocol):
    """The contract of a queuelib disk queue."""

    def push(self, data: bytes) -> None: ...
    def push_many(self, entries: list[bytes]) -> None: ...
    def pop(self) -> bytes | None: ...
    def peek(self) -> bytes | None: ...
    def close(self) -> None: ...
    def abandon(self) -> None: ...
    def __len__(self) -> int: ...


def queue_path(directory: str, priority: int) -> str:
    """The file (LIFO) or folder (FIFO) of one priority's queue."""
    return os.path.join(directory, f"p{priority}")


def read_active(path: str) -> list[int]:
    """The priorities ``active.json`` lists; raises JobDirCorrupt if it is not a list of ints."""
    try:
        with open_file(path) as f:
            value = boundedjson.loads(f.read(boundedjson.MAX_JSON_BYTES + 1))
    except (OSError, ValueError) as exc:
        raise JobDirCorrupt(path, 0, f"unreadable active.json ({exc})") from None
    if not isinstance(value, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in value):
        raise JobDirCorrupt(path, 0, "active.json is not a list of integer priorities")
    if not all(PRIORITY_MIN <= p <= PRIORITY_MAX for p in value):
        raise JobDirCorrupt(path, 0, f"active.json lists a priority outside {PRIORITY_MIN}..{PRIORITY_MAX}")
    return value


ENTRY = OFFSET.size + 4  # a queue entry: the 8-byte offset and its 4-byte size (after it: LIFO; before: FIFO)
_ENTRY_SIZE = OFFSET.size.to_bytes(4, "big")
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

    def push_many(self, entries: list[bytes]) -> None:
        top = self.top
        top.extend(entries)
        if len(top) > 2 * BATCH:  # spill all but the newest BATCH, in one write, as queuelib would push them
            spill = len(top) - BATCH
            self.disk.f.write(b"".join(entry + _ENTRY_SIZE for entry in top[:spill]))
            self.disk.size += spill
            del top[:spill]

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
            where = max(0, f.tell() - len(data))
            raise JobDirCorrupt(disk.path, where, "a queue entry is not an 8-byte journal offset")
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

    def abandon(self) -> None:
        """Close the file without writing its header (the queue is to be rebuilt from the journal)."""
        with contextlib.suppress(OSError):  # a flush that fails (a full disk) still closes the file
            self.disk.f.close()

    def __len__(self) -> int:
        return len(self.top) + self.disk.size


class BatchedFifoQueue(FifoDiskQueue):
    """A ``queuelib.FifoDiskQueue`` of offsets that reads ``BATCH`` entries at a time.

    queuelib pops one entry with two reads (its length, then its bytes). Here one
    ``pread`` takes up to ``BATCH`` entries of the tail chunk, and each pop advances
    queuelib's tail bookkeeping in memory. The files stay queuelib's format: entries
    read ahead but not popped are still in their chunk, and ``info.json`` (written at
    close) names only what was popped.
    """

    def __init__(self, path: str, chunksize: int = 100_000) -> None:
        super().__init__(path, chunksize)
        self._ahead: list[bytes] = []  # read from the tail chunk, not popped yet; the oldest last

    def _loadinfo(self, chunksize: int) -> dict[str, Any]:
        """queuelib's ``info.json``, read bounded and range-checked (named as damaged if it is not)."""
        if not os.path.lexists(os.path.join(self.path, "info.json")):
            return super()._loadinfo(chunksize)
        try:
            return read_fifo_info(self.path)
        except (OSError, ValueError) as exc:
            raise JobDirCorrupt(os.path.join(self.path, "info.json"), 0, f"unreadable info.json ({exc})") from None

    def pop(self) -> bytes | None:
        if not self._ahead and not self._refill():
            return None
        data = self._ahead.pop()
        info = self.info
        tnum, tcnt, toffset = info["tail"]
        tcnt += 1
        toffset += ENTRY
        if tcnt == self.chunksize and tnum <= info["head"][0]:  # the tail chunk is used up, as queuelib does
            tcnt = toffset = 0
            tnum += 1
            self.tailf.close()
            os.unlink(self.tailf.name)
            self.tailf = self._openchunk(tnum)
        info["size"] -= 1
        info["tail"] = [tnum, tcnt, toffset]
        return data

    def peek(self) -> bytes | None:
        if not self._ahead and not self._refill():
            return None
        return self._ahead[-1]

    def push_many(self, entries: list[bytes]) -> None:
        """``push`` each of ``entries``, with one write per chunk file they go to."""
        done = 0
        while done < len(entries):
            hnum, hpos = self.info["head"]
            count = min(len(entries) - done, self.chunksize - hpos)
            write_all(self.headf.fileno(), b"".join(_ENTRY_SIZE + entry for entry in entries[done:done + count]))
            done += count
            hpos += count
            if hpos == self.chunksize:
                hpos, hnum = 0, hnum + 1
                self.headf.close()
                self.headf = self._openchunk(hnum, "ab+")
            self.info["size"] += count
            self.info["head"] = [hnum, hpos]

    def abandon(self) -> None:
        """Close the chunk files without writing the info file (the queue is to be rebuilt from the journal)."""
        for chunk in (self.headf, self.tailf):
            with contextlib.suppress(OSError):
                chunk.close()

    def _refill(self) -> bool:
        tnum, tcnt, toffset = self.info["tail"]
        hnum, hcnt = self.info["head"]
        if [tnum, tcnt] >= [hnum, hcnt]:
            return False
        count = min(BATCH, (hcnt if tnum == hnum else self.chunksize) - tcnt)
        data = os.pread(self.tailf.fileno(), ENTRY * count, toffset)
        if len(data) != ENTRY * count or data[0::ENTRY] + data[1::ENTRY] + data[2::ENTRY] != bytes(3 * count) \
                or data[3::ENTRY] != b"\x08" * count:
            raise JobDirCorrupt(self.tailf.name, toffset, "a queue entry is not an 8-byte journal offset")
        self._ahead = [data[i + 4:i + ENTRY] for i in range(len(data) - ENTRY, -1, -ENTRY)]
        return True


_SPARE = 4  # emptied queues kept open for their priority's next push (each holds a descriptor)


class OffsetQueues:
    """A priority queue of journal offsets over queuelib disk queues.

    queuelib closes a queue that a pop empties (removing its file) and makes a new one at
    the next push to that priority: a file created and unlinked per request when the
    frontier runs near empty, or when host buffers pull each request as it comes. The last
    few emptied queues are kept open instead, out of queuelib's map, and taken back by the
    next push of their priority; an empty queue's file is removed when it is closed.
    """

    def __init__(self, directory: str, order: str, startprios: Iterable[int] = ()) -> None:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
        self.directory = directory
        self.order = order
        make_dir(directory)
        check_tree(directory)  # queuelib opens its files by name: no link may be among them
        self._queue_class = BatchedLifoQueue if order == "lifo" else BatchedFifoQueue
        self.pq = PriorityQueue(cast(Any, self._factory), [-p for p in startprios])
        self._spare: dict[int, ByteQueue] = {}  # key -> an emptied queue, oldest first
        self.skip: set[int] = set()  # entries left in the files that are not to come out (see ``skip_entries``)
        self.skipped: dict[int, int] = {}  # priority -> how many of them its queue holds

    def skip_entries(self, entries: dict[int, int]) -> None:
        """Entries (offset -> priority) that these queues hold but must never hand out: requests a compaction
        wrote into them that were handed out or finished meanwhile (``swap.py``). Each is dropped when it
        comes to the top; the top of the queues is never one."""
        for offset, priority in entries.items():
            if offset not in self.skip:
                self.skip.add(offset)
                self.skipped[priority] = self.skipped.get(priority, 0) + 1
        self._settle()

    def _settle(self) -> None:
        """Drop skipped entries from the top of the queues, so that the top is one to hand out."""
        pq, skip = self.pq, self.skip
        while skip and pq.curprio is not None:
            key = pq.curprio
            data = pq.queues[key].peek()
            if data is None:
                return
            offset: int = _OFFSET_UNPACK(data)[0]
            if offset not in skip:
                return
            self._pop_raw()
            self._forget(offset, -key)

    def _forget(self, offset: int, priority: int) -> None:
        self.skip.discard(offset)
        left = self.skipped.get(priority, 0) - 1
        if left > 0:
            self.skipped[priority] = left
        else:
            self.skipped.pop(priority, None)

    def _factory(self, key: int) -> ByteQueue:
        path = queue_path(self.directory, -key)
        try:
            return self._queue_class(path)
        except (struct.error, ValueError, KeyError, TypeError) as exc:
            raise JobDirCorrupt(path, 0, f"unreadable queue header ({exc})") from None

    def _revive(self, key: int) -> ByteQueue | None:
        """The kept empty queue of ``key``, put back in queuelib's map; None if there is none."""
        queue = self._spare.pop(key, None)
        if queue is not None:
            self.pq.queues[key] = cast(Any, queue)
        return queue

    def _keep(self, key: int, queue: ByteQueue) -> None:
        """Keep an emptied queue open for the next push of its priority (closing the oldest kept)."""
        spare = self._spare
        spare[key] = queue
        if len(spare) > _SPARE:
            spare.pop(next(iter(spare))).close()

    def push(self, offset: int, priority: int) -> None:
        """Queue the request whose PUSH record is at ``offset``."""
        pq, key = self.pq, -priority
        try:
            queue: Any = pq.queues.get(key)
            if queue is None:
                queue = self._revive(key)
                if queue is None:
                    pq.push(_OFFSET_PACK(offset), key)  # queuelib makes the queue
                    return
            queue.push(_OFFSET_PACK(offset))  # what queuelib's push does for a queue it has, without its checks
        except OSError as exc:
            raise_named(queue_path(self.directory, priority), exc)
            raise
        if pq.curprio is None or key < pq.curprio:
            pq.curprio = key

    def push_many(self, offsets: list[int], priority: int) -> None:
        """``push`` each of ``offsets`` (all of one priority), in order."""
        pack = OFFSET.pack
        try:
            if -priority not in self.pq.queues:
                self._revive(-priority)
            self.pq.push(pack(offsets[0]), -priority)  # creates the queue if it is new
            if len(offsets) > 1:
                cast(ByteQueue, self.pq.queues[-priority]).push_many([pack(offset) for offset in offsets[1:]])
        except OSError as exc:
            raise_named(queue_path(self.directory, priority), exc)
            raise

    def load(self, priority: int, offsets: array) -> None:
        """Queue many offsets of one priority, in order, into a priority that has no queue yet.

        A LIFO queue file is written whole, in queuelib's format, with a few slice
        operations instead of a queuelib push per entry (the rebuild after a crash);
        FIFO queues take the pushes one by one.
        """
        if not offsets:
            return
        key = -priority
        self._revive(key)
        if self.order != "lifo" or key in self.pq.queues:
            for offset in offsets:
                self.push(offset, priority)
            return
        path = queue_path(self.directory, priority)
        with naming(path):
            fd = create_exclusive(path)
            try:
                write_all(fd, lifo_file(offsets))
            finally:
                os.close(fd)
        self.pq.queues[key] = cast(Any, self._factory(key))
        if self.pq.curprio is None or key < self.pq.curprio:
            self.pq.curprio = key

    def pop(self) -> int | None:
        """The offset of the next request, or None."""
        offset = self._pop_raw()
        if self.skip:
            self._settle()
        return offset

    def _pop_raw(self) -> int | None:
        pq = self.pq
        if pq.curprio is None:
            return None
        key = pq.curprio
        queue = pq.queues[key]
        data = queue.pop()
        if not len(queue):  # emptied: kept open for the next push (queuelib would close it)
            del pq.queues[key]
            self._keep(key, cast(ByteQueue, queue))
            pq.curprio = min(pq.queues) if pq.queues else None
        if data is None:
            return None
        offset: int = _OFFSET_UNPACK(data)[0]
        return offset if offset <= MAX_SIZE else self._offset(data, key)  # every pop: the check inline

    def _offset(self, data: bytes, key: int) -> int:
        """The journal offset a queue entry of queue ``key`` holds, range-checked."""
        offset: int = _OFFSET_UNPACK(data)[0]
        if offset > MAX_SIZE:  # os.pread would raise OverflowError
            raise JobDirCorrupt(queue_path(self.directory, -key), 0,
                                f"a queue entry names journal offset {offset}, past any file's end")
        return offset

    def peek(self) -> int | None:
        """The offset ``pop`` would return next, left in place; None if the queues are empty."""
        pq = self.pq
        if pq.curprio is None:
            return None
        data = pq.queues[pq.curprio].peek()
        return None if data is None else self._offset(data, pq.curprio)

    def take_all(self, priority: int) -> list[int]:
        """Remove the queue of ``priority`` and return its offsets, in the order they would be popped."""
        pq = self.pq
        queue = pq.queues.pop(-priority, None)
        if queue is None:
            return []
        out = []
        skip = self.skip
        while (data := queue.pop()) is not None:
            offset = self._offset(data, -priority)
            if skip and offset in skip:
                self._forget(offset, priority)
            else:
                out.append(offset)
        queue.close()
        pq.curprio = min(pq.queues) if pq.queues else None
        self._settle()
        return out

    def purge_skipped(self) -> None:
        """Rewrite the queues that hold skipped entries without them (before the queue files are saved)."""
        for priority in list(self.skipped):
            offsets = self.take_all(priority)  # in pop order: a LIFO queue's newest first
            if self.order == "lifo":
                offsets.reverse()
            if offsets:
                self.load(priority, array("Q", offsets))
        self.skip.clear()
        self.skipped.clear()

    def sizes(self) -> dict[int, int]:
        """Entries per priority (skipped ones left out)."""
        skipped = self.skipped
        sizes = {-k: len(q) - skipped.get(-k, 0) for k, q in self.pq.queues.items()}
        return {p: n for p, n in sizes.items() if n}

    def __len__(self) -> int:
        return len(self.pq) - len(self.skip)

    def disown(self) -> None:
        """In a forked child: point this process's copies of the queue files at /dev/null.

        queuelib's file objects are buffered, and the child shares the parent's open files:
        a child that exits normally would flush the parent's unwritten bytes into them.
        """
        files: list[Any] = []
        for queue in [*self.pq.queues.values(), *self._spare.values()]:
            if isinstance(queue, BatchedLifoQueue):
                files.append(queue.disk.f)
            else:
                files += [getattr(queue, "headf", None), getattr(queue, "tailf", None)]
        devnull = os.open(os.devnull, os.O_RDWR)
        try:
            for f in files:
                if f is not None and not f.closed:
                    os.dup2(devnull, f.fileno())
        finally:
            os.close(devnull)

    def close(self) -> list[int]:
        """Close every queue (queuelib writes the headers); return the active priorities."""
        with naming(self.directory):
            while self._spare:
                self._spare.popitem()[1].close()  # empty: its file is removed
            return sorted((-k for k in self.pq.close()), reverse=True)

    def abandon(self) -> None:
        """Close every queue's files without writing anything more (the job directory is to be
        rebuilt from its journal, or ``close`` has run already: then this does nothing)."""
        queues = [*cast(dict[int, ByteQueue], self.pq.queues).values(), *self._spare.values()]
        self._spare.clear()
        for queue in queues:
            queue.abandon()

    @staticmethod
    def write_active(path: str, priorities: list[int]) -> None:
        """Write ``active.json`` atomically."""
        write_json_atomic(path, priorities)

    @staticmethod
    def wipe(directory: str) -> None:
        """Remove every queue file (they will be rebuilt from the journal), never following a link."""
        remove_tree(directory)
        make_dir(directory)


def lifo_file(offsets: array) -> bytes:
    """The bytes of a queuelib ``LifoDiskQueue`` file holding ``offsets`` (oldest first).

    The header is the entry count (u32); each entry is the 8-byte offset followed by
    its length, 8, as a u32, all big-endian.
    """
    count = len(offsets)
    ordered = array("Q", offsets)
    if sys.byteorder == "little":
        ordered.byteswap()
    raw = ordered.tobytes()
    out = bytearray(4 + ENTRY * count)
    out[:4] = count.to_bytes(4, "big")
    for j in range(OFFSET.size):
        out[4 + j::ENTRY] = raw[j::OFFSET.size]
    out[4 + ENTRY - 1::ENTRY] = bytes([OFFSET.size]) * count
    return bytes(out)


def queue_crc(directory: str, priority: int) -> int:
    """The crc32 of one priority's queue as it is on disk: the LIFO file, or the FIFO folder's files."""
    path = queue_path(directory, priority)
    if os.path.isdir(path) and not os.path.islink(path):
        names = sorted(os.listdir(path))
        files = [os.path.join(path, name) for name in names]
    else:
        names, files = [""], [path]
    crc = 0
    for name, file in zip(names, files, strict=True):
        crc = zlib.crc32(name.encode(), crc)
        with open_file(file) as f:
            while chunk := f.read(1 << 20):
                crc = zlib.crc32(chunk, crc)
    return crc


def distrust_reason(layout: Any, saved: Checkpoint, seen_bytes: int, salt: int) -> tuple[str, str] | None:
    """Why the queue files of the job directory ``layout`` cannot be used as they are, as
    ``(the file concerned, the reason)``, or None if they can.

    They can only after a clean close whose checkpoint matches every file: the journal's
    and the seen file's sizes, the journal's last record, ``active.json`` and each queue
    file's checksum.
    """
    if not saved.clean:
        return layout.cursor, saved.problem or "the last run did not close cleanly"
    journal_size = os.path.getsize(layout.journal)
    if journal_size != saved.journal_bytes:
        return layout.journal, f"the journal is {journal_size} bytes, the checkpoint says {saved.journal_bytes}"
    if seen_bytes != saved.seen_bytes:
        return layout.seen, f"requests.seen is {seen_bytes} bytes, the checkpoint says {saved.seen_bytes}"
    if record_end(layout.journal, saved.last_record, salt) != journal_size:
        return layout.journal, "the journal's last record is not where the checkpoint says"
    try:
        active = read_active(layout.active) if saved.pending else []
    except JobDirCorrupt as exc:
        return layout.active, exc.problem
    if sorted(active) != sorted(saved.queues):
        return layout.active, "active.json does not match the checkpoint"
    for priority, crc in saved.queues.items():
        path = queue_path(layout.queue_dir, priority)
        try:
            if queue_crc(layout.queue_dir, priority) != crc:
                return path, "the queue file does not match its checksum in the checkpoint"
        except OSError as exc:
            return path, f"unreadable queue file ({exc.strerror or exc})"
    return None


_READ_ENTRIES = 8192  # entries read at a time by queue_offsets


def queue_offsets(directory: str, order: str, priority: int, count: int, *, oldest_first: bool) -> Iterator[int]:
    """The ``count`` journal offsets of one priority's queue, read lazily from its files.

    For a queue whose checksum matched a clean checkpoint: a LIFO file is read from its
    end (newest first, its pop order) or from its start (``oldest_first``); a FIFO folder
    from its tail, oldest first, either way. Taking K offsets reads O(K) bytes.
    """
    path = queue_path(directory, priority)
    if order == "lifo":
        entries = _lifo_oldest(path, count) if oldest_first else _lifo_newest(path, count)
    else:
        entries = _fifo_oldest(path, count)
    for at, entry in entries:
        if entry[OFFSET.size:] != _ENTRY_SIZE:
            raise JobDirCorrupt(at[0], at[1], "a queue entry that is not an 8-byte journal offset")
        offset: int = _OFFSET_UNPACK(entry[:OFFSET.size])[0]
        if offset > MAX_SIZE:
            raise JobDirCorrupt(at[0], at[1], f"a queue entry names journal offset {offset}, past any file's end")
        yield offset


def _lifo_newest(path: str, count: int) -> Iterator[tuple[tuple[str, int], bytes]]:
    with open_file(path) as f:
        end = 4 + ENTRY * count
        if os.fstat(f.fileno()).st_size != end:
            raise JobDirCorrupt(path, 0, f"a queue file of {count} entries is not {end:,} bytes")
        while end > 4:
            start = max(4, end - ENTRY * _READ_ENTRIES)
            f.seek(start)
            data = f.read(end - start)
            for pos in range(len(data) - ENTRY, -1, -ENTRY):
                yield (path, start + pos), data[pos:pos + ENTRY]
            end = start


def _lifo_oldest(path: str, count: int) -> Iterator[tuple[tuple[str, int], bytes]]:
    with open_file(path) as f:
        f.seek(4)
        pos = 4
        while count > 0:
            data = f.read(ENTRY * min(count, _READ_ENTRIES))
            if len(data) < ENTRY:
                raise JobDirCorrupt(path, pos, f"the queue file ends {count} entries short")
            for i in range(0, len(data) - ENTRY + 1, ENTRY):
                yield (path, pos + i), data[i:i + ENTRY]
            count -= len(data) // ENTRY
            pos += len(data)


def _fifo_oldest(path: str, count: int) -> Iterator[tuple[tuple[str, int], bytes]]:
    info = fifo_info(path)
    if info is None:
        raise JobDirCorrupt(os.path.join(path, "info.json"), 0, "missing or unreadable")
    number, _, pos = info["tail"]
    while count > 0:
        chunk = os.path.join(path, f"q{number:05d}")
        with open_file(chunk) as f:
            f.seek(pos)
            data = f.read()
        if len(data) < ENTRY:
            raise JobDirCorrupt(chunk, pos, f"the queue ends {count} entries short")
        for i in range(0, min(len(data) - ENTRY + 1, ENTRY * count), ENTRY):
            yield (chunk, pos + i), data[i + 4:i + ENTRY] + data[i:i + 4]  # (length, offset) as (offset, length)
        count -= min(count, len(data) // ENTRY)
        number, pos = number + 1, 0
