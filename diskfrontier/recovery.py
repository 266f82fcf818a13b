"""Rebuilding the queues from the journal: the path every unclean stop takes.

Two linear passes over ``requests.urls``: the first collects the offsets that have a
DONE record (and finds where the intact records end); the second routes every other
PUSH offset, in journal order, to its priority's queue, and adds to the seen index
any fingerprint the seen file had not received yet. Journal order is push order, so
LIFO/FIFO order within a priority comes back exactly as it was for everything that
was not in flight.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from .journal import DONE, DONE_BODY, FLAG_DONT_FILTER, PUSH, PUSH_HEAD, JournalScan, ScanResult
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
    """Fill ``queues`` (empty) with every pending request of the journal at ``path``."""
    result = Rebuilt()
    done = done_offsets(path, result, progress, repair=repair)
    pending = result.pending
    unpack = _PUSH_FIELDS.unpack_from
    fp_start = PUSH_HEAD.size
    push = queues.push
    seen_add = seen.add
    total = result.scan.size * 2
    alive = 0
    for offset, body in JournalScan(path, repair=repair):
        if offset >= result.scan.end and not result.scan.damage:
            break
        if body[0] != PUSH:
            continue
        priority, flags, fplen = unpack(body, 1)
        if not flags & FLAG_DONT_FILTER and seen_add(bytes(body[fp_start:fp_start + fplen])):
            result.seen_added += 1
        if offset in done:
            continue
        push(offset, priority)
        pending[priority] = pending.get(priority, 0) + 1
        alive += 1
        if progress is not None and alive % _PROGRESS_EVERY == 0:
            progress(result.scan.size + offset, total)
    result.stray_dones = result.dones - (result.pushes - alive)
    if progress is not None:
        progress(total, total)
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
