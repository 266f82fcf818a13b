"""The one scan of the journal: what is pending, checked.

``read_state`` reads ``requests.urls`` once and returns the pending PUSH offsets per
priority (in journal order, which is push order), the counts, and where the intact
records end. Recovery, compaction, verify, inspect, peek and export all use it, so
"pending = PUSH - DONE" is computed in one place and checked in one place:

* every record's checksum covers its own offset (``journal.py``);
* a DONE must name an earlier PUSH record that is not done yet; a DONE that names
  anything else is damage, not something to skip.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import JobDirCorrupt
from .journal import DONE, FLAG_DONT_FILTER, FRAME, PUSH_HEAD, JournalScan, ScanResult, done_target
from .seenindex import SeenIndex

Progress = Callable[[int, int], None]
_PROGRESS_EVERY = 1 << 16


@dataclass
class JournalState:
    """What the journal says: pending offsets per priority, counts, and where it ends."""

    pending: dict[int, array] = field(default_factory=dict)
    sizes: dict[int, array] = field(default_factory=dict)  # frame bytes of each pending record (when asked)
    done: SeenIndex = field(default_factory=SeenIndex)
    pushes: int = 0
    dones: int = 0
    last_record: int = -1
    bad_dones: list[tuple[int, str]] = field(default_factory=list)  # (offset, problem), repair scans only
    scan: ScanResult = field(default_factory=ScanResult)

    @property
    def pending_count(self) -> int:
        return sum(len(offsets) for offsets in self.pending.values())

    @property
    def live_bytes(self) -> int:
        """Bytes of the pending records (0 unless the scan kept sizes)."""
        return sum(sum(sizes) for sizes in self.sizes.values())


def read_state(
    path: str, *, floor: int = 0, repair: bool = False, fingerprint: Callable[[bytes], object] | None = None,
    progress: Progress | None = None, sizes: bool = False,
) -> JournalState:
    """Scan the journal at ``path`` once; see the module docstring.

    ``floor``: the length the journal had at its last checkpoint (a shorter file, or
    damage below it, is an error, not a torn tail). ``repair``: damage is collected in
    ``state.scan.damage`` and ``state.bad_dones`` instead of raised. ``fingerprint`` is
    called with each filtered PUSH's fingerprint. ``sizes``: keep each pending record's
    size (for ``live_bytes``).
    """
    state = JournalState()
    offsets: dict[int, array] = {}
    lengths: dict[int, array] = {}
    done = state.done
    fp_start = PUSH_HEAD.size
    scan = JournalScan(path, repair=repair, floor=floor)
    pushes = dones = 0
    last = -1
    for offset, body in scan:
        last = offset
        if body[0] == DONE:
            target = done_target(body)
            problem = None
            if target >= offset:
                problem = f"a DONE record names byte {target}, which is not before it"
            elif not done.add(target):
                problem = f"a second DONE record for the PUSH record at byte {target}"
            if problem is not None:
                if not repair:
                    raise JobDirCorrupt(path, offset, problem)
                state.bad_dones.append((offset, problem))
                continue
            dones += 1
            continue
        priority = int.from_bytes(body[1:5], "big", signed=True)
        bucket = offsets.get(priority)
        if bucket is None:
            bucket = offsets[priority] = array("Q")
            lengths[priority] = array("I")
        bucket.append(offset)
        if sizes:
            lengths[priority].append(FRAME.size + len(body))
        if fingerprint is not None and not body[fp_start - 2] & FLAG_DONT_FILTER:
            fingerprint(bytes(body[fp_start:fp_start + body[fp_start - 1]]))
        pushes += 1
        if progress is not None and pushes % _PROGRESS_EVERY == 0:
            progress(offset, scan.result.size)
    state.pushes, state.last_record, state.scan = pushes, last, scan.result
    alive = 0
    for priority, bucket in offsets.items():
        if sizes:
            kept, kept_sizes = array("Q"), array("I")
            for offset, size in zip(bucket, lengths[priority], strict=True):
                if offset not in done:
                    kept.append(offset)
                    kept_sizes.append(size)
            if kept:
                state.sizes[priority] = kept_sizes
        else:
            kept = array("Q", (offset for offset in bucket if offset not in done)) if len(done) else bucket
        if kept:
            state.pending[priority] = kept
        alive += len(kept)
    matched = pushes - alive
    if dones != matched:
        _name_stray_dones(path, state, offsets, repair)
        dones = matched
    state.dones = dones
    if progress is not None:
        progress(scan.result.size, scan.result.size)
    return state


def _name_stray_dones(path: str, state: JournalState, offsets: dict[int, array], repair: bool) -> None:
    """Some DONE records name no PUSH record: find them (a second scan, on this error path only)."""
    pushes = {offset for bucket in offsets.values() for offset in bucket}
    flagged = {offset for offset, _ in state.bad_dones}
    for offset, body in JournalScan(path, repair=True):
        if body[0] == DONE and offset not in flagged and done_target(body) not in pushes:
            problem = f"a DONE record names byte {done_target(body)}, where no PUSH record starts"
            if not repair:
                raise JobDirCorrupt(path, offset, problem)
            state.bad_dones.append((offset, problem))
