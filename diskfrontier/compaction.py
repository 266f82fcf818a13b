"""Compaction: rewrite the journal to hold only the pending PUSH records, atomically.

The new journal is written beside the old one (``requests.urls.compact``), fsynced, and
renamed over it; the seen file is fsynced first by the caller, because it then becomes
the only record of the fingerprints of finished requests. The checkpoint says "open"
the whole time, so a kill at any point leaves either the old journal or the new one,
and both rebuild the same queues: the job directory is the old one or the new one.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass

from .atomic import fsync_dir, write_all
from .journal import FRAME, MAGIC, PUSH, JournalScan
from .recovery import Progress, Rebuilt, done_offsets

_WRITE_CHUNK = 1 << 20
_PROGRESS_EVERY = 1 << 16


@dataclass
class Compacted:
    """The outcome of a compaction."""

    bytes_before: int
    bytes_after: int
    kept: list[tuple[int, int]]  # (new offset, priority) of each pending request, in journal order
    dropped_records: int


def compact_journal(path: str, tmp_path: str, progress: Progress | None = None) -> Compacted:
    """Rewrite the journal at ``path`` keeping pending PUSH records; return their new offsets."""
    scanned = Rebuilt()
    done = done_offsets(path, scanned, progress)
    end = scanned.scan.end
    kept: list[tuple[int, int]] = []
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        out = bytearray(MAGIC)
        position = len(MAGIC)
        total = 2 * scanned.scan.size
        for count, (offset, body) in enumerate(JournalScan(path)):
            if offset >= end:
                break
            if progress is not None and count % _PROGRESS_EVERY == 0:
                progress(scanned.scan.size + offset, total)
            if body[0] != PUSH or offset in done:
                continue
            kept.append((position, int.from_bytes(body[1:5], "big", signed=True)))
            out += FRAME.pack(len(body), zlib.crc32(body))
            out += body
            position += FRAME.size + len(body)
            if len(out) >= _WRITE_CHUNK:
                write_all(fd, out)
                out = bytearray()
        write_all(fd, out)
        os.fsync(fd)
        if progress is not None:
            progress(total, total)
    finally:
        os.close(fd)
    os.replace(tmp_path, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))
    return Compacted(scanned.scan.size, position, kept, scanned.pushes + scanned.dones - len(kept))
