"""Compaction: rewrite the journal to hold only the pending and failed requests, atomically.

The new journal starts with each failed request, in the order they failed: its
request as a PUSH record and a FAIL record naming that PUSH's new offset, with the
error and time of the old one. Then a HOST record for each host that has settings,
done or failed requests (given by the caller, from its host table; after the FAIL
records, so that its done count stands as it is), then the pending requests in
journal order, each as a PUSH record (a pending RETRY or REFETCH becomes a PUSH: the
request it finished is gone).

The new journal is written beside the old one (``requests.urls.compact``, a new file),
each record framed for its new offset, and fsynced. Only then does the caller move it
over the old one (``install``): the seen file is fsynced first, because it then becomes
the only record of the fingerprints of finished requests. The checkpoint says "open"
the whole time, so a kill at any point leaves either the old journal or the new one,
and both rebuild the same queues. A failure while writing (a full disk) removes the
new file and leaves the old journal, and the frontier using it, as they were.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

from ...errors import JobDirCorrupt
from ...files.atomic import fsync_dir, write_all
from ...files.safefs import create_exclusive, open_fd
from ..journal import MAGIC, JournalScan, read_fail, read_record
from ..records import CARRIES_REQUEST, FRAME, as_push, fail_body, frame, kind_of, priority_and_time
from ..replay import Progress, read_state

_WRITE_CHUNK = 1 << 20
_PROGRESS_EVERY = 1 << 16


class Kept:
    """The pending requests of a compacted journal, in order: new offsets and priorities in flat arrays
    (12 bytes a request, where a list of tuples would take ~130), the few not_before times aside."""

    __slots__ = ("offsets", "priorities", "times")

    def __init__(self) -> None:
        self.offsets = array("Q")
        self.priorities = array("i")
        self.times: dict[int, float] = {}  # index -> not_before, for the requests that have one

    def append(self, offset: int, priority: int, not_before: float) -> None:
        if not_before:
            self.times[len(self.offsets)] = not_before
        self.offsets.append(offset)
        self.priorities.append(priority)

    def __len__(self) -> int:
        return len(self.offsets)

    def __iter__(self) -> Iterator[tuple[int, int, float]]:
        times = self.times
        for index, (offset, priority) in enumerate(zip(self.offsets, self.priorities, strict=True)):
            yield offset, priority, times.get(index, 0.0) if times else 0.0


@dataclass
class Compacted:
    """The outcome of a compaction."""

    bytes_before: int
    bytes_after: int
    kept: Kept  # the new offset, priority and not_before of each pending request, in order
    dropped_records: int
    crc: int = 0  # the crc32 of the new journal
    host_bytes: int = 0  # bytes of its HOST records
    last_record: int = -1  # the offset of its last record
    failed: dict[int, int] = field(default_factory=dict)  # new request offset -> new FAIL offset, in FAIL order
    live_bytes: int = 0  # bytes of the pending requests' records


def write_compacted(
    path: str, tmp_path: str, *, salt: int, floor: int = 0, progress: Progress | None = None,
    hosts: tuple[bytes, ...] = (),
) -> Compacted:
    """Write the failed requests of the journal at ``path``, then ``hosts`` (HOST bodies), then its pending
    requests, to ``tmp_path``."""
    state = read_state(path, salt=salt, floor=floor, progress=None if progress is None else _first_half(progress),
                       offsets=False)
    alive, end, size = state.alive_in_order(), state.scan.end, state.scan.size
    state.order = array("Q")  # every PUSH offset: needed by the scan only, and the largest array at 10^7
    kept = Kept()
    failed: dict[int, int] = {}
    if os.path.lexists(tmp_path):
        os.unlink(tmp_path)  # left by a compaction that was killed: the old journal stands
    fd = create_exclusive(tmp_path)
    try:
        out = bytearray(MAGIC)
        position = len(MAGIC)
        crc = 0
        last = -1
        old = open_fd(path, os.O_RDONLY)
        try:
            for target, record_at in state.failed.items():
                record = as_push(read_record(old, target, path, salt))
                info = read_fail(old, record_at, path, target, salt)
                out += frame(position, record, salt)
                moved = position
                position += FRAME.size + len(record)
                failure = fail_body(moved, info.failed_at, info.error.encode("utf-8"))
                out += frame(position, failure, salt)
                failed[moved] = last = position
                position += FRAME.size + len(failure)
                if len(out) >= _WRITE_CHUNK:
                    write_all(fd, out)
                    crc = zlib.crc32(out, crc)
                    out = bytearray()
        finally:
            os.close(old)
        host_start = position
        for host in hosts:
            out += frame(position, host, salt)
            last = position
            position += FRAME.size + len(host)
        host_bytes = position - host_start
        for count, (offset, body) in enumerate(JournalScan(path, salt=salt, floor=floor)):
            if offset >= end:
                break
            if progress is not None and count % _PROGRESS_EVERY == 0:
                progress(size + offset, 2 * size)
            if kind_of(body) not in CARRIES_REQUEST:
                continue
            pending = next(alive, None)  # the same records in the same order as the scan before
            if pending is None:
                raise JobDirCorrupt(path, offset, "the journal changed while it was being compacted")
            if not pending:
                continue
            priority, not_before = priority_and_time(body)
            kept.append(position, priority, not_before)
            record = as_push(body)
            out += frame(position, record, salt)
            last = position
            position += FRAME.size + len(record)
            if len(out) >= _WRITE_CHUNK:
                write_all(fd, out)
                crc = zlib.crc32(out, crc)
                out = bytearray()
        write_all(fd, out)
        crc = zlib.crc32(out, crc)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp_path)
        raise
    os.close(fd)
    if progress is not None:
        progress(2 * size, 2 * size)
    dropped = state.pushes + state.dones - len(kept) - 2 * len(failed)
    return Compacted(size, position, kept, dropped, crc, host_bytes, last, failed, position - host_start - host_bytes)


def install(path: str, tmp_path: str) -> None:
    """Move the compacted journal over the old one (atomic), and make the rename durable."""
    os.replace(tmp_path, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def _first_half(progress: Progress) -> Progress:
    return lambda done, total: progress(done, 2 * total)
