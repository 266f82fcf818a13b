"""Compaction: a new journal holding only what is live, written beside the running frontier (a maintenance job).

The job reads the journal's state at the offset ``at`` the frontier chose (``jobs.state_at``:
the newest saved state and the records after it) and writes, beside the old journal, the new
file ``requests.urls.compact.<random>``:

1. each failed request, in the order they failed: its request as a PUSH record and a FAIL
   record naming that PUSH's new offset, with the error and time of the old one;
2. a HOST record for each host that has settings or done requests (after the FAIL records,
   so that its done count stands as it is);
3. a PAUSE record when the crawl is paused;
4. the MARK records of the latest inbox commands applied (``statefile.MAX_COMMANDS``), so that
   a command whose answer was not yet collected is still known as applied;
5. the pending requests in journal order, each as a PUSH record (a pending RETRY or REFETCH
   becomes a PUSH: the request it finished is gone).

Every record read from the old journal is checked where it was (its checksums hold its old
offset) before it is framed for its new one: damage is never copied as data. Then the records
written after ``at`` follow (``tailcopy.py``), as far as the old journal has them; the new
file is fsynced. Beside it the job writes the state of the new journal where its copy of the
live records ends (``requests.state.*``, the checkpoint that follows the swap), the queue
files of the requests pending then (``requests.queue.compact.<random>/``), and the map that
tells the frontier where each old record went (``requests.urls.map.<random>``). Nothing of it
is the job directory's until the frontier swaps it in (``swap.py``); a kill at any point
before that leaves the old journal, which stays the truth, and files a later open removes.
"""

from __future__ import annotations

import os
import time
import zlib
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import JobDirCorrupt
from ...files.atomic import write_all
from ...files.safefs import create_exclusive, open_fd
from ..journal import MAGIC, _request_in, read_fail, read_record
from ..layout import Layout
from ..queues import OffsetQueues
from ..records import (
    FRAME,
    MARK_BEGIN,
    MARK_END,
    HostRecord,
    as_push,
    fail_body,
    frame,
    host_body,
    mark_body,
    pause_body,
)
from ..replay import read_state
from ..statefile import MAX_COMMANDS, SavedState, write_state
from ..tailcopy import Moved, TailCopy, save_map
from .jobs import Cancelled, save_seen_index, state_at

_WRITE_CHUNK = 1 << 20
_READ_CHUNK = 8 << 20
_TAIL_ENOUGH = 64 << 10  # the job copies the tail until less than this is left for the frontier
_TAIL_ROUNDS = 8
_NAN = float("nan")
_HEADER = FRAME.size


@dataclass
class Compacted:
    """What a compaction did (``Frontier.compact``)."""

    bytes_before: int  # the journal's size when it began
    bytes_after: int  # the new journal's size when it was swapped in
    pending: int  # requests pending in it (those in flight included)
    failed: int  # failed requests it keeps
    dropped_records: int  # records of the old journal it left out
    kept: list[tuple[int, int, float]] = field(default_factory=list)  # (offset, priority, not_before), pending


class _Out:
    """The new journal, written in chunks, with the crc32 of what it holds as it goes."""

    def __init__(self, fd: int, salt: int) -> None:
        self.fd = fd
        self.salt = salt
        self.pos = len(MAGIC)
        self.crc = 0
        self.buffer = bytearray(MAGIC)
        self.last = -1

    def add(self, body: bytes) -> int:
        """Frame ``body`` at the end; its offset."""
        at = self.pos
        framed = frame(at, body, self.salt)
        self.buffer += framed
        self.pos += len(framed)
        self.last = at
        if len(self.buffer) >= _WRITE_CHUNK:
            self.flush()
        return at

    def flush(self) -> None:
        if self.buffer:
            write_all(self.fd, self.buffer)
            self.crc = zlib.crc32(self.buffer, self.crc)
            self.buffer = bytearray()


def _records_in_order(fd: int, path: str, offsets: array, sizes: array, salt: int) -> Iterator[bytes | memoryview]:
    """The body of each record at ``offsets`` (increasing; each ``sizes`` bytes long), checked, read in chunks."""
    start = end = 0
    chunk = b""
    for offset, size in zip(offsets, sizes, strict=True):
        if offset + size > end:
            start = offset
            chunk = os.pread(fd, max(_READ_CHUNK, size), offset)
            end = start + len(chunk)
        rel = offset - start
        body = _request_in(chunk[rel:rel + size], offset, salt)
        if body is None or len(body) + _HEADER != size:
            raise JobDirCorrupt(path, offset, "a pending request's record is not intact where the checkpoint says")
        yield body


def compact_beside(params: dict[str, Any], cancelled: Callable[[], bool],
                   progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """The job (see the module docstring); its result for ``swap.py``. ``progress(done, total)``: its reading of
    the journal, then its copying of what is live (as one count of twice the journal's bytes)."""
    started = time.monotonic()
    layout = Layout(params["root"])
    salt, at = params["salt"], params["at"]
    state, _began = state_at(layout, params, cancelled,
                             None if progress is None else lambda done, total: progress(done, 2 * total))
    saved = state.saved
    if saved is None:
        return {"ok": False, "error": "an inbox command is applied only in part: no compaction until it is whole"}
    root = layout.root
    out_path = os.path.join(root, params["journal_out"])
    fd = create_exclusive(out_path)
    old = open_fd(layout.journal, os.O_RDONLY)
    try:
        out = _Out(fd, salt)
        moved = Moved(at=at)
        for target, fail_at in zip(saved.failed, saved.fails, strict=True):
            stored = as_push(read_record(old, target, layout.journal, salt))
            info = read_fail(old, fail_at, layout.journal, target, salt)
            new_target = out.add(stored)
            failure = fail_body(new_target, info.failed_at, info.error.encode("utf-8"))
            moved.failed_old.append(target)
            moved.failed_new.append(new_target)
            moved.fails_new.append(out.add(failure))
            moved.fail_sizes.append(2 * _HEADER + len(stored) + len(failure))
        settings: dict[int, HostRecord] = {}
        for hid, name in enumerate(saved.names):
            done, setting = saved.host_done[hid], saved.settings.get(hid)
            if done or setting is not None:
                delay, blocked, budget = (_NAN, 0.0, -1) if setting is None else (
                    setting.delay, setting.blocked_until, setting.budget)
                out.add(host_body(name, delay, blocked, budget, done))
                settings[hid] = HostRecord(b"", delay, blocked, budget, done)
        if saved.paused_since is not None:
            out.add(pause_body(True, saved.paused_since))
        applied = saved.applied[-MAX_COMMANDS:]
        for ident, result in applied:
            out.add(mark_body(MARK_BEGIN, ident))
            out.add(mark_body(MARK_END, ident, result.encode("utf-8")))
        for count, body in enumerate(_records_in_order(old, layout.journal, saved.order, saved.sizes, salt)):
            if count % 65536 == 0:
                if cancelled():
                    raise Cancelled
                if progress is not None:
                    progress(at + saved.order[count], 2 * at)
            stored = as_push(body)
            moved.old.append(saved.order[count])
            moved.new.append(out.add(stored))
            moved.sizes.append(_HEADER + len(stored))
        out.flush()
        new_state = _new_state(saved, moved, settings, applied, out)
        copy = TailCopy(moved, salt, at, out.pos, out.crc, out.last)
        for _ in range(_TAIL_ROUNDS):
            copy.copy(layout.journal, fd)
            if os.path.getsize(layout.journal) - copy.pos < _TAIL_ENOUGH or cancelled():
                break
        os.fsync(fd)
        # The state where the copy ends, so that a recovery after the swap reads only what follows it (the
        # checkpoint's floor stays where the live records end: the seen file was flushed there).
        compacted = (new_state.at, new_state.journal_crc)
        named = new_state  # the state the checkpoint names: where the copy ends, when it can be had
        if copy.end > new_state.at:
            caught_up = read_state(out_path, salt=salt, start=new_state, until=copy.end, save=params["ident"],
                                   sizes=True, hosts=True, offsets=False).saved
            if caught_up is not None:
                named = caught_up
        if progress is not None:
            progress(2 * at, 2 * at)
    except BaseException:
        os.close(fd)
        raise
    finally:
        os.close(old)
    os.close(fd)
    record = write_state(root, params["new_name"], named, salt)
    waiting = _queues(root, params, saved, moved, new_state)
    codes, priorities = new_state.codes, new_state.priorities
    save_map(os.path.join(root, params["map_out"]), copy, {
        "codes": array("I", codes).tobytes(), "priorities_by_code": list(priorities),
        "counts": {"pushes": new_state.pushes, "dones": new_state.dones, "live_bytes": new_state.live_bytes(),
                   "failed_bytes": new_state.failed_bytes()},
        "d_offset": array("Q", (moved.new[i] for i in waiting)).tobytes(),
        "d_priority": array("i", (priorities[codes[i]] for i in waiting)).tobytes(),
        "d_due": array("d", (due for i, due in zip(new_state.timed_index, new_state.timed_at, strict=True)
                             if i in waiting)).tobytes(),
        "priorities": sorted({priorities[code] for code in set(codes)})})
    index = save_seen_index(layout, params)
    return {"ok": True, "journal_out": params["journal_out"], "state": record.to_json(), "bytes_before": at,
            "seen_index": None if index is None else index.to_json(), "compacted_end": compacted[0],
            "compacted_crc": compacted[1], "pending": saved.pending, "failed": len(saved.failed),
            "dropped_records": saved.pushes + saved.dones - saved.pending - 2 * len(saved.failed),
            "seconds": round(time.monotonic() - started, 4)}


def _new_state(saved: SavedState, moved: Moved, settings: dict[int, HostRecord], applied: list[tuple[str, str]],
               out: _Out) -> SavedState:
    """The state of the new journal where its copy of the live records ends (a scan of it would find the same)."""
    names, host_done, hosts = saved.names, saved.host_done, saved.hosts
    used = set(hosts)
    keep = [hid for hid in range(len(names)) if hid in used or host_done[hid] or hid in settings]
    remap = {hid: i for i, hid in enumerate(keep)}
    new = SavedState(ident=saved.ident, at=out.pos, journal_crc=out.crc, last_record=out.last,
                     pushes=len(moved.new) + len(moved.failed_new), dones=len(moved.failed_new), dropped=0,
                     paused_since=saved.paused_since, priorities=list(saved.priorities))
    new.order = array("Q", moved.new)
    new.codes = array(saved.codes.typecode, saved.codes)
    new.hosts = hosts if len(keep) == len(names) else array("I", (remap[h] for h in hosts))
    new.sizes = array("I", moved.sizes)
    new.timed_index, new.timed_at = array("Q", saved.timed_index), array("d", saved.timed_at)
    new.failed, new.fails = array("Q", moved.failed_new), array("Q", moved.fails_new)
    new.fail_sizes = array("I", moved.fail_sizes)
    new.names = [names[hid] for hid in keep]
    new.host_done = array("Q", (host_done[hid] for hid in keep))
    new.settings = {remap[hid]: record for hid, record in settings.items()}
    new.applied = list(applied)
    return new


def _queues(root: str, params: dict[str, Any], saved: SavedState, moved: Moved, new_state: SavedState) -> set[int]:
    """Write the queue files of the new journal's pending requests (those not waiting for a time past
    ``params["now"]``); return the indexes of those that wait."""
    now = params["now"]
    held = {index for index, due in zip(new_state.timed_index, new_state.timed_at, strict=True) if due > now}
    by_code: dict[int, array] = {}
    codes = new_state.codes
    for i, offset in enumerate(moved.new):
        if held and i in held:
            continue
        bucket = by_code.get(codes[i])
        if bucket is None:
            bucket = by_code[codes[i]] = array("Q")
        bucket.append(offset)
    queues = OffsetQueues(os.path.join(root, params["queues_out"]), params["order"])
    try:
        for code, offsets in by_code.items():
            queues.load(saved.priorities[code], offsets)
    finally:
        queues.close()
    return held
