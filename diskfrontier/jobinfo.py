"""Read-only views of a job directory: its state, what is pending, in pop order.

Nothing here writes, takes the lock, or opens a file for writing, so it is safe on a
directory that a live crawl holds (guarantee 5).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from . import checkpoint
from .codec import decode_request
from .errors import FrontierError, JobDirCorrupt
from .jobdir import Layout, probe_lock, read_meta
from .journal import DONE, DONE_BODY, FRAME, MAGIC, PUSH, JournalScan, parse_push
from .request import Request
from .queuelib_files import lifo_entries
from .queues import OFFSET
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


@dataclass
class _Pending:
    """One read of the journal: pending PUSH offsets per priority, and totals."""

    offsets: dict[int, list[int]]
    live_bytes: int
    pushes: int
    torn: int


def _pending_offsets(journal: str, priority: int | None = None) -> _Pending:
    """Pending PUSH offsets per priority, in journal order, from a single read of the journal."""
    pushed: list[tuple[int, int, int]] = []  # (offset, priority, frame bytes)
    done: set[int] = set()
    scan = JournalScan(journal)
    for offset, body in scan:
        if body[0] == DONE:
            done.add(DONE_BODY.unpack_from(body)[1])
        else:
            pushed.append((offset, int.from_bytes(body[1:5], "big", signed=True), FRAME.size + len(body)))
    offsets: dict[int, list[int]] = {}
    live = 0
    for offset, p, size in pushed:
        if offset not in done and (priority is None or p == priority):
            offsets.setdefault(p, []).append(offset)
            live += size
    return _Pending(offsets, live, len(pushed), scan.result.torn)


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
    pending = _pending_offsets(layout.journal)
    by_priority = {p: len(offsets) for p, offsets in pending.offsets.items()}
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
        done=pending.pushes - sum(by_priority.values()), seen=seen_count, journal_bytes=journal_bytes,
        queue_bytes=_dir_bytes(layout.queue_dir), seen_bytes=os.path.getsize(layout.seen) if os.path.exists(layout.seen) else 0,
        reclaimable_bytes=journal_bytes - len(MAGIC) - pending.live_bytes, torn_bytes=pending.torn,
    )


def _queue_order(layout: Layout, meta: dict) -> dict[int, list[int]] | None:
    """Offsets per priority in pop order, from the queue files of a cleanly closed LIFO directory."""
    saved = checkpoint.read_checkpoint(layout.cursor)
    if meta["order"] != "lifo" or not saved.clean or saved.journal_bytes != os.path.getsize(layout.journal):
        return None
    order: dict[int, list[int]] = {}
    for priority, count in saved.pending.items():
        entries = lifo_entries(os.path.join(layout.queue_dir, f"p{priority}")).items
        if len(entries) != count:
            return None
        order[priority] = [OFFSET.unpack(e)[0] for e in entries]
    return order


class PendingRequests:
    """The pending requests of a job directory in pop order, read without changing it.

    ``len()`` is their number; iterating reads each from the journal. For a cleanly
    closed LIFO directory the order is read from its queue files; otherwise it is the
    order a frontier rebuilt from the journal would pop them in.
    """

    def __init__(self, path: str, *, priority: int | None = None) -> None:
        self.layout = Layout(path)
        meta = read_meta(self.layout)
        exact = _queue_order(self.layout, meta) if probe_lock(self.layout.lock) is None else None
        if exact is None:
            exact = _pending_offsets(self.layout.journal, priority).offsets
            if meta["order"] == "lifo":
                exact = {p: offsets[::-1] for p, offsets in exact.items()}
        self.offsets = array("Q")
        for p in sorted(exact, reverse=True):
            if priority is None or p == priority:
                self.offsets.extend(exact[p])

    def __len__(self) -> int:
        return len(self.offsets)

    def __iter__(self) -> Iterator[Request]:
        with open(self.layout.journal, "rb") as f:
            for offset in self.offsets:
                yield _read_request(f, offset)


def pending_requests(path: str, *, priority: int | None = None) -> PendingRequests:
    """Pending requests in pop order (read-only); see ``PendingRequests``."""
    return PendingRequests(path, priority=priority)


def _read_request(f: BinaryIO, offset: int) -> Request:
    f.seek(offset)
    length = int.from_bytes(f.read(FRAME.size)[:4], "big")
    body = f.read(length)
    if len(body) != length or not body or body[0] != PUSH:
        raise JobDirCorrupt(f.name, offset, "a queue entry does not point at a PUSH record")
    prio, dont_filter, fingerprint, record = parse_push(body)
    try:
        return decode_request(record, prio, dont_filter, fingerprint, None)
    except ValueError as exc:
        raise JobDirCorrupt(f.name, offset, str(exc)) from None


__all__ = ["JobInfo", "PendingRequests", "inspect_jobdir", "pending_requests"]
