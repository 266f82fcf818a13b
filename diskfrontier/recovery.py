"""Rebuilding the queues from the journal: the path every unclean stop takes.

One linear pass over ``requests.urls`` collects the PUSH offsets per priority and the
set of offsets that have a DONE record, and adds to the seen index any fingerprint the
seen file had not received yet; then every PUSH offset that is not done is routed, in
journal order, to its priority's queue. Journal order is push order, so
LIFO/FIFO order within a priority comes back exactly as it was for everything that
was not in flight.
"""

from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

from .journal import DONE, DONE_BODY, FLAG_DONT_FILTER, PUSH_HEAD, JournalScan, ScanResult
from .queues import OffsetQueues
from .seen import SeenFile
from .seenindex import SeenIndex

Progress = Callable[[int, int], None]
_PUSH_FIELDS = struct.Struct(">iBB")
_PROGRESS_EVERY = 1 << 16


@dataclass
class Rebuilt:
    """What a rebuild found."""

    pending: dict[int, int] = field(default_factory=dict)
    pushes: int = 0
    dones: int = 0
    seen_added: int = 0
    stray_dones: int = 0
    scan: ScanResult = field(default_factory=ScanResult)


def done_offsets(path: str, result: Rebuilt, progress: Progress | None, *, repair: bool = False) -> SeenIndex:
    """Pass 1: the set of PUSH offsets that are done; fills the scan result and counts."""
    done = SeenIndex()
    scan = JournalScan(path, repair=repair)
    unpack_done = DONE_BODY.unpack_from
    pushes = dones = 0
    for offset, body in scan:
        if body[0] == DONE:
            done.add(unpack_done(body)[1])
            dones += 1
        else:
            pushes += 1
        if progress is not None and (pushes + dones) % _PROGRESS_EVERY == 0:
            progress(offset, scan.result.size * 2)
    result.pushes, result.dones, result.scan = pushes, dones, scan.result
    return done


def rebuild(path: str, queues: OffsetQueues, seen: SeenFile, progress: Progress | None = None, *, repair: bool = False) -> Rebuilt:
    """Fill ``queues`` (empty) with every pending request of the journal at ``path``.

    One pass over the journal collects the PUSH offsets per priority (8 bytes each) and
    the DONE set, and adds to ``seen`` any fingerprint it lacks; then the offsets that
    are not done are queued in journal order.
    """
    result = Rebuilt()
    done = SeenIndex()
    offsets: dict[int, array] = {}
    unpack = _PUSH_FIELDS.unpack_from
    unpack_done = DONE_BODY.unpack_from
    fp_start = PUSH_HEAD.size
    seen_add = seen.add
    scan = JournalScan(path, repair=repair)
    pushes = dones = 0
    for offset, body in scan:
        if body[0] == DONE:
            done.add(unpack_done(body)[1])
            dones += 1
            continue
        priority, flags, fplen = unpack(body, 1)
        bucket = offsets.get(priority)
        if bucket is None:
            bucket = offsets[priority] = array("Q")
        bucket.append(offset)
        if not flags & FLAG_DONT_FILTER and seen_add(bytes(body[fp_start:fp_start + fplen])):
            result.seen_added += 1
        pushes += 1
        if progress is not None and pushes % _PROGRESS_EVERY == 0:
            progress(offset, scan.result.size)
    result.pushes, result.dones, result.scan = pushes, dones, scan.result
    # Queue in journal order across priorities is not needed: each priority's queue only
    # needs its own offsets in order.
    push = queues.push
    alive = 0
    for priority, bucket in offsets.items():
        count = 0
        for offset in bucket:
            if offset not in done:
                push(offset, priority)
                count += 1
        if count:
            result.pending[priority] = count
        alive += count
    result.stray_dones = dones - (pushes - alive)
    if progress is not None:
        progress(scan.result.size, scan.result.size)
    return result


def save_torn_tail(path: str, end: int) -> str | None:
    """Copy the bytes past ``end`` aside (``<file>.torn-<offset>``) before they are cut."""
    size = os.path.getsize(path)
    if size <= end:
        return None
    aside = f"{path}.torn-{end}"
    with open(path, "rb") as src, open(aside, "wb") as dst:
        src.seek(end)
        dst.write(src.read())
    return aside
