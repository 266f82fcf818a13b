"""Read-only views of a job directory: its state, what is pending, in pop order.

Nothing here writes, takes the lock, or opens a file for writing, so it is safe on a
directory that a live crawl holds (guarantee 5).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from . import checkpoint
from .codec import decode_request
from .errors import FrontierError
from .jobdir import Layout, probe_lock, read_meta
from .journal import FRAME, PUSH, JournalScan, parse_push
from .recovery import Rebuilt, done_offsets
from .request import Request
from .seen import parse_seen


@dataclass
class JobInfo:
    """What ``diskfrontier inspect`` shows."""

    path: str
    state: str
    holder_pid: int | None
    format_version: int
    order: str
    created: str
    pending: int
    pending_by_priority: dict[int, int] = field(default_factory=dict)
    done: int = 0
    seen: int = 0
    journal_bytes: int = 0
    queue_bytes: int = 0
    seen_bytes: int = 0
    reclaimable_bytes: int = 0
    torn_bytes: int = 0

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def inspect_jobdir(path: str) -> JobInfo:
    """Describe the job directory at ``path`` without changing it."""
    layout = Layout(path)
    if not os.path.exists(layout.meta):
        raise FrontierError(f"{path} is not a diskfrontier job directory (no frontier.json)")
    meta = read_meta(layout)
    holder = probe_lock(layout.lock)
    saved = checkpoint.read_checkpoint(layout.cursor)
    scanned = Rebuilt()
    done = done_offsets(layout.journal, scanned, None)
    by_priority: dict[int, int] = {}
    live_bytes = 0
    for offset, body in JournalScan(layout.journal):
        if offset >= scanned.scan.end:
            break
        if body[0] == PUSH and offset not in done:
            priority = int.from_bytes(body[1:5], "big", signed=True)
            by_priority[priority] = by_priority.get(priority, 0) + 1
            live_bytes += FRAME.size + len(body)
    journal_bytes = os.path.getsize(layout.journal)
    seen_count = 0
    if os.path.exists(layout.seen):
        with open(layout.seen, "rb") as f:
            _, loaded = parse_seen(layout.seen, f.read(), strict=False)
        seen_count = loaded.count
    if holder is not None:
        state = f"in use by pid {holder}" if holder else "in use by another process"
    elif saved.clean and saved.journal_bytes == journal_bytes:
        state = "clean"
    else:
        state = "needs recovery (it will be rebuilt from the journal at the next open)"
    return JobInfo(
        path=path, state=state, holder_pid=holder or None, format_version=meta["version"], order=meta["order"],
        created=meta.get("created", ""), pending=sum(by_priority.values()),
        pending_by_priority=dict(sorted(by_priority.items(), reverse=True)),
        done=scanned.pushes - sum(by_priority.values()), seen=seen_count, journal_bytes=journal_bytes,
        queue_bytes=_dir_bytes(layout.queue_dir), seen_bytes=os.path.getsize(layout.seen) if os.path.exists(layout.seen) else 0,
        reclaimable_bytes=journal_bytes - 8 - live_bytes, torn_bytes=scanned.scan.torn,
    )


def pending_requests(path: str, *, priority: int | None = None) -> Iterator[Request]:
    """Pending requests in the order a rebuilt frontier would pop them (read-only)."""
    layout = Layout(path)
    meta = read_meta(layout)
    scanned = Rebuilt()
    done = done_offsets(layout.journal, scanned, None)
    by_priority: dict[int, list[int]] = {}
    for offset, body in JournalScan(layout.journal):
        if offset >= scanned.scan.end:
            break
        if body[0] == PUSH and offset not in done:
            p = int.from_bytes(body[1:5], "big", signed=True)
            if priority is None or p == priority:
                by_priority.setdefault(p, []).append(offset)
    with open(layout.journal, "rb") as f:
        for p in sorted(by_priority, reverse=True):
            offsets = by_priority[p]
            for offset in (reversed(offsets) if meta["order"] == "lifo" else offsets):
                f.seek(offset)
                length = int.from_bytes(f.read(FRAME.size)[:4], "big")
                body = f.read(length)
                prio, dont_filter, fingerprint, record = parse_push(body)
                yield decode_request(record, prio, dont_filter, fingerprint, None)


__all__ = ["JobInfo", "inspect_jobdir", "pending_requests"]
