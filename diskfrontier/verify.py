"""``verify``: check every record of every file of a job directory; ``repair`` keeps the intact ones.

Verification only reads. Repair rewrites the damaged journal and seen file with every
intact record (each file replaced atomically) and marks the checkpoint dirty, so the
next open rebuilds the queues from the repaired journal.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field

from . import checkpoint
from .atomic import write_atomic
from .errors import FormatError, FrontierError, JobDirCorrupt
from .jobdir import Layout, Lock, read_meta
from .journal import DONE, DONE_BODY, FRAME, MAGIC, PUSH, JournalScan
from .queues import OFFSET, read_active
from .queuelib_files import fifo_entries, lifo_entries
from .recovery import Progress
from .seen import parse_seen

PROGRESS_EVERY = 1 << 16


@dataclass
class Finding:
    """One piece of damage: where it is and what is wrong."""

    file: str
    offset: int
    problem: str

    def __str__(self) -> str:
        return f"{self.file} at byte {self.offset}: {self.problem}"


@dataclass
class Report:
    """What verify found (and, with repair, what it did)."""

    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    records: int = 0
    dropped_bytes: int = 0
    repaired: bool = False

    @property
    def sound(self) -> bool:
        return not self.findings


def verify(path: str | os.PathLike[str], *, repair: bool = False, progress: Progress | None = None) -> Report:
    """Check the job directory at ``path``; with ``repair``, rewrite what is damaged.

    ``progress(done, total)`` is called now and then during the journal scan (bytes).
    """
    layout = Layout(os.fspath(path))
    report = Report()
    lock = None
    if repair:
        lock = Lock(layout.lock)
        lock.acquire()
    try:
        _check_meta(layout, report)
        journal_offsets = _check_journal(layout, report, repair, progress)
        _check_seen(layout, report, repair)
        _check_queues(layout, report, journal_offsets)
        if repair and report.findings:
            checkpoint.write_json_repaired(layout.cursor)
            report.repaired = True
    finally:
        if lock is not None:
            lock.release()
    return report


def _check_meta(layout: Layout, report: Report) -> None:
    try:
        read_meta(layout)
    except FileNotFoundError:
        report.findings.append(Finding(layout.meta, 0, "missing: not a diskfrontier job directory"))
    except FormatError:
        raise
    except FrontierError as exc:
        report.findings.append(Finding(layout.meta, 0, str(exc)))


def _check_journal(
    layout: Layout, report: Report, repair: bool, progress: Progress | None
) -> tuple[set[int], set[int]]:
    pushes: set[int] = set()
    dones: set[int] = set()
    if not os.path.exists(layout.journal):
        report.findings.append(Finding(layout.journal, 0, "missing: the pending requests are gone"))
        if repair:
            write_atomic(layout.journal, MAGIC)
        return pushes, dones
    scan = JournalScan(layout.journal, repair=True)
    intact = bytearray(MAGIC)
    moved: dict[int, int] = {}  # old PUSH offset -> its offset in the repaired journal
    try:
        for offset, body in scan:
            report.records += 1
            if progress is not None and report.records % PROGRESS_EVERY == 0:
                progress(offset, scan.result.size)
            if body[0] == PUSH:
                pushes.add(offset)
                moved[offset] = len(intact)
            elif body[0] == DONE:
                target = DONE_BODY.unpack_from(body)[1]
                dones.add(target)
                if target not in moved:
                    continue  # its PUSH was lost: nothing left to mark done
                body = memoryview(DONE_BODY.pack(DONE, moved[target]))
            if repair:
                intact += FRAME.pack(len(body), zlib.crc32(body)) + body
    except JobDirCorrupt as exc:  # bad magic or empty file: nothing in it can be trusted
        report.findings.append(Finding(layout.journal, exc.offset, exc.problem))
        if repair:
            os.replace(layout.journal, layout.journal + ".damaged")
            write_atomic(layout.journal, MAGIC)
        return pushes, dones
    result = scan.result
    if progress is not None:
        progress(result.size, result.size)
    for damage in result.damage:
        report.findings.append(Finding(layout.journal, damage.offset, f"{damage.problem} ({damage.length} bytes skipped)"))
        report.dropped_bytes += damage.length
    if result.torn:
        report.notes.append(f"{layout.journal}: a torn last record of {result.torn} bytes at byte {result.end} "
                            f"(normal after a crash; cut at the next open)")
    stray = dones - pushes
    for offset in sorted(stray)[:20]:
        report.findings.append(Finding(layout.journal, offset, "a DONE record names no PUSH record"))
    if repair and (result.damage or stray):
        write_atomic(layout.journal, bytes(intact))
    return pushes, dones


def _check_seen(layout: Layout, report: Report, repair: bool) -> None:
    if not os.path.exists(layout.seen):
        return
    with open(layout.seen, "rb") as f:
        data = f.read()
    try:
        _, info = parse_seen(layout.seen, data, strict=True)
    except JobDirCorrupt as exc:
        report.findings.append(Finding(layout.seen, exc.offset, exc.problem))
        if repair:
            keys_data = _intact_seen(data)
            report.dropped_bytes += len(data) - len(keys_data)
            write_atomic(layout.seen, keys_data)
        return
    if info.torn:
        report.notes.append(f"{layout.seen}: a torn last fingerprint of {info.torn} bytes (cut at the next open)")


def _intact_seen(data: bytes) -> bytes:
    """The records of a damaged seen file that have the file's usual width."""
    width = int.from_bytes(data[:2], "big") or 20
    out = bytearray()
    pos = 0
    while pos + 2 + width <= len(data):
        if int.from_bytes(data[pos:pos + 2], "big") == width:
            out += data[pos:pos + 2 + width]
            pos += 2 + width
        else:
            pos += 1
    return bytes(out)


def _check_queues(layout: Layout, report: Report, offsets: tuple[set[int], set[int]]) -> None:
    saved = checkpoint.read_checkpoint(layout.cursor)
    if not saved.clean:
        report.notes.append(f"{layout.cursor}: {saved.problem or saved.state}; the queues will be rebuilt from the journal at the next open")
        return
    pushes, dones = offsets
    try:
        active = read_active(layout.active) if saved.pending else []
    except JobDirCorrupt as exc:
        report.findings.append(Finding(layout.active, 0, exc.problem))
        return
    for priority in active:
        qpath = os.path.join(layout.queue_dir, f"p{priority}")
        if os.path.isfile(qpath):
            entries = lifo_entries(qpath).items
        elif os.path.isdir(qpath):
            entries = fifo_entries(qpath).items
        else:
            report.findings.append(Finding(qpath, 0, "missing queue file listed in active.json"))
            continue
        if len(entries) != saved.pending.get(priority, 0):
            report.findings.append(Finding(qpath, 0, f"{len(entries)} entries, the checkpoint says {saved.pending.get(priority, 0)}"))
        for entry in entries:
            offset = OFFSET.unpack(entry)[0] if len(entry) == OFFSET.size else -1
            if offset not in pushes or offset in dones:
                report.findings.append(Finding(qpath, 0, f"an entry names journal offset {offset}, which is not a pending PUSH"))
                break
