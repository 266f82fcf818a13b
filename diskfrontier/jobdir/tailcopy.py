"""The journal's tail copied into a compacted journal, and where each old record went.

A compaction of a running frontier (``maintenance/compaction.py``) writes what was live at an
offset ``at`` of the old journal; every record written after ``at`` must follow it into the
new journal before the swap (``swap.py``). ``TailCopy`` does that in steps, first in the
compaction's job, then in the frontier (outside its lock while there is much, under it for
the last few records): each record is checked where it was, the offsets it names are
translated (a request pending at ``at`` by ``Moved``, a record of the tail by the copy's own
map), it is framed for its new offset, and appended. What the tail did is kept as it goes
(the ``Digest``): the requests it pushed, those it finished, failed or made pending again,
and the bytes and counts that changed, so that the frontier can set its own state after the
swap without reading anything again.

``Moved`` and ``Digest`` travel from the job to the frontier in one file
(``requests.urls.map.<random>``): msgpack of flat arrays (``save_map``, ``load_map``).
"""

from __future__ import annotations

import os
import sys
import zlib
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

import msgpack

from ..core.errors import JobDirCorrupt
from ..files.atomic import write_all
from ..files.safefs import create_exclusive, open_file
from .journal import CHUNK, Stop, walk
from .records import (
    DONE,
    DONE_BODY,
    DROP,
    FAIL,
    FAIL_HEAD,
    FRAME,
    OFFSET,
    PUSH,
    REFETCH,
    RETRY,
    frame,
)

_HEADER = FRAME.size
_TARGET = OFFSET.unpack_from
_CARRIES = (PUSH, RETRY, REFETCH)
_MAX_MAP = 1 << 34
FINISHED, REQUEUED = 0, 1  # what a ``Digest`` event did to the request it names


@dataclass
class Moved:
    """Where the requests pending and failed at ``at`` are in the new journal (arrays in old offset order)."""

    at: int
    old: array = field(default_factory=lambda: array("Q"))  # pending at ``at``: old offsets, increasing
    new: array = field(default_factory=lambda: array("Q"))  # ... and new ones
    sizes: array = field(default_factory=lambda: array("I"))  # ... and their new records' sizes
    failed_old: array = field(default_factory=lambda: array("Q"))  # failed at ``at``, in FAIL order
    failed_new: array = field(default_factory=lambda: array("Q"))
    fails_new: array = field(default_factory=lambda: array("Q"))  # their FAIL records' new offsets
    fail_sizes: array = field(default_factory=lambda: array("I"))  # bytes of the two records, new
    _failed_sorted: tuple[array, array] | None = None

    def pending_index(self, old: int) -> int:
        """The index of the request pending at ``at`` whose record was at ``old``; -1 if none was."""
        i = bisect_left(self.old, old)
        return i if i < len(self.old) and self.old[i] == old else -1

    def failed_index(self, old: int) -> int:
        """The index (in FAIL order) of the request failed at ``at`` whose record was at ``old``; -1 if none was."""
        if self._failed_sorted is None:
            order = sorted(range(len(self.failed_old)), key=self.failed_old.__getitem__)
            self._failed_sorted = (array("Q", (self.failed_old[i] for i in order)), array("Q", order))
        keys, where = self._failed_sorted
        i = bisect_left(keys, old)
        return where[i] if i < len(keys) and keys[i] == old else -1


@dataclass
class Digest:
    """What the records of the tail did, in old offsets, and how the counts changed."""

    pushes: list[tuple[int, int, int, float, int]] = field(default_factory=list)  # (old, new, priority, due, size)
    finished: set[int] = field(default_factory=set)  # requests it finished (done, retried, re-fetched, failed, dropped)
    requeued: set[int] = field(default_factory=set)  # failed requests it made pending again
    fails: list[tuple[int, int, int]] = field(default_factory=list)  # (request, new FAIL offset, bytes of both)
    moved: dict[int, int] = field(default_factory=dict)  # every record of the tail: old offset -> new
    events: list[tuple[int, int]] = field(default_factory=list)  # (FINISHED or REQUEUED, old offset), in order
    push_count: int = 0
    done_count: int = 0
    dropped: int = 0
    live_delta: int = 0  # bytes of pending requests' records
    failed_delta: int = 0  # bytes of failed requests' records and FAIL records


class TailCopy:
    """Copies the old journal from ``pos`` on into the new one, which ends at ``end`` (its crc32 ``crc``)."""

    def __init__(self, moved: Moved, salt: int, pos: int, end: int, crc: int, last: int,
                 digest: Digest | None = None) -> None:
        self.moved = moved
        self.salt = salt
        self.pos = pos  # the next old record to copy
        self.end = end  # where the new journal ends
        self.crc = crc
        self.last = last  # the new offset of the new journal's last record
        self.digest = digest or Digest()
        self._sizes: dict[int, int] = {}  # the tail's request records: old offset -> size

    def copy(self, old_path: str, new_fd: int, *, limit: int | None = None) -> int:
        """Copy the intact records from ``pos`` to the old journal's current end (or ``limit``); how many.

        A record being written at the end (not whole yet) is left for the next call.
        """
        copied = 0
        with open_file(old_path) as f:
            size = os.fstat(f.fileno()).st_size
            if limit is not None:
                size = min(size, limit)
            stop = Stop()
            want = CHUNK
            while self.pos < size:
                f.seek(self.pos)
                buf = f.read(min(want, size - self.pos))
                out: list[bytes] = []
                for rel, fields in walk(buf, self.pos, self.salt, 4, stop, at_end=False):
                    out.append(self._one(buf, rel, fields))
                    copied += 1
                if stop.problem is not None:
                    raise JobDirCorrupt(old_path, self.pos + stop.rel, stop.problem)
                if out:
                    data = b"".join(out)
                    os.lseek(new_fd, self.end - len(data), os.SEEK_SET)
                    write_all(new_fd, data)
                    self.crc = zlib.crc32(data, self.crc)
                self.pos += stop.rel
                if stop.rel == 0:  # the record here is longer than what was read, or not whole yet
                    if self.pos + stop.want > size:
                        break
                    want = stop.want
                else:
                    want = CHUNK
        return copied

    def _one(self, buf: bytes, rel: int, fields: tuple[Any, ...]) -> bytes:
        """The record at ``buf[rel]`` (old offset ``pos + rel``), translated and framed for the new journal."""
        old = self.pos + rel
        length, kind = fields[0], fields[3]
        body = buf[rel + _HEADER:rel + _HEADER + length]
        digest = self.digest
        new = self.end
        if kind in _CARRIES:
            size = _HEADER + length
            priority, not_before = fields[4], fields[9]
            digest.pushes.append((old, new, priority, not_before, size))
            digest.push_count += 1
            digest.live_delta += size
            self._sizes[old] = size
            if kind != PUSH:
                target = _TARGET(body, length - OFFSET.size)[0]
                body = body[:-OFFSET.size] + OFFSET.pack(self._new_of(target, old))
                self._finish(target, kind)
        elif kind in (DONE, DROP):
            target = _TARGET(body, 1)[0]
            body = DONE_BODY.pack(kind, self._new_of(target, old))
            self._finish(target, kind)
        elif kind == FAIL:
            target = _TARGET(body, 1)[0]
            failed_at = FAIL_HEAD.unpack_from(body)[2]
            body = FAIL_HEAD.pack(FAIL, self._new_of(target, old), failed_at) + body[FAIL_HEAD.size:]
            self._finish(target, kind, _HEADER + length)
        framed = frame(new, body, self.salt)
        digest.moved[old] = new
        self.end = new + len(framed)
        self.last = new
        return framed

    def _new_of(self, target: int, at: int) -> int:
        """The new offset of the record the old one at ``at`` names."""
        moved = self.moved
        if target >= moved.at:
            new = self.digest.moved.get(target)
            if new is not None:
                return new
        else:
            i = moved.pending_index(target)
            if i >= 0:
                return moved.new[i]
            i = moved.failed_index(target)
            if i >= 0:
                return moved.failed_new[i]
        raise JobDirCorrupt("requests.urls", at, f"a record names byte {target}, which holds no request pending or "
                                                 f"failed at the compaction")

    def _finish(self, target: int, kind: int, fail_size: int = 0) -> None:
        """The tail's record of ``kind`` finished the request at ``target`` (or made a failed one pending)."""
        digest = self.digest
        failed_pair = self._failed_pair(target)
        if kind == RETRY and failed_pair is not None:
            digest.requeued.add(target)
            digest.events.append((REQUEUED, target))
            digest.failed_delta -= failed_pair
            return
        size = self._size_of(target)
        digest.finished.add(target)
        digest.events.append((FINISHED, target))
        digest.done_count += 1
        digest.live_delta -= size
        if kind == FAIL:
            digest.fails.append((target, self.end, size + fail_size))
            digest.failed_delta += size + fail_size
        elif kind == DROP:
            digest.dropped += 1

    def _failed_pair(self, target: int) -> int | None:
        """The bytes of the failed request at ``target`` and its FAIL record, None if it is not failed now."""
        digest = self.digest
        if target in digest.requeued:
            return None
        for request, _at, size in reversed(digest.fails):
            if request == target:
                return size
        if target < self.moved.at:
            i = self.moved.failed_index(target)
            if i >= 0:
                return int(self.moved.fail_sizes[i])
        return None

    def _size_of(self, target: int) -> int:
        if target >= self.moved.at:
            return self._sizes.get(target, 0)
        i = self.moved.pending_index(target)
        return int(self.moved.sizes[i]) if i >= 0 else 0


# ------------------------------------------------------------------ the map file

def _raw(values: array) -> bytes:
    if sys.byteorder != "little":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _array(typecode: str, data: Any) -> array:
    if not isinstance(data, bytes):
        raise ValueError("an array is not bytes")
    values = array(typecode)
    if len(data) % values.itemsize:
        raise ValueError("an array's bytes are not whole items")
    values.frombytes(data)
    if sys.byteorder != "little":
        values.byteswap()
    return values


def save_map(path: str, copy: TailCopy, extra: dict[str, Any]) -> None:
    """Write what the frontier needs of a compaction's job to the new file ``path``: ``copy`` (where it stopped,
    ``Moved``, ``Digest``) and ``extra`` (JSON-ready values and named arrays)."""
    moved, digest = copy.moved, copy.digest
    pushes = digest.pushes
    value = {
        "at": moved.at, "pos": copy.pos, "end": copy.end, "crc": copy.crc, "last": copy.last,
        "old": _raw(moved.old), "new": _raw(moved.new), "sizes": _raw(moved.sizes),
        "failed_old": _raw(moved.failed_old), "failed_new": _raw(moved.failed_new),
        "fails_new": _raw(moved.fails_new), "fail_sizes": _raw(moved.fail_sizes),
        "t_old": _raw(array("Q", (p[0] for p in pushes))), "t_new": _raw(array("Q", (p[1] for p in pushes))),
        "t_priority": _raw(array("i", (p[2] for p in pushes))), "t_due": _raw(array("d", (p[3] for p in pushes))),
        "t_size": _raw(array("I", (p[4] for p in pushes))),
        "finished": _raw(array("Q", sorted(digest.finished))), "requeued": _raw(array("Q", sorted(digest.requeued))),
        "f_old": _raw(array("Q", (f[0] for f in digest.fails))),
        "f_new": _raw(array("Q", (f[1] for f in digest.fails))),
        "f_size": _raw(array("I", (f[2] for f in digest.fails))),
        "m_old": _raw(array("Q", digest.moved)), "m_new": _raw(array("Q", digest.moved.values())),
        "e_kind": _raw(array("B", (e[0] for e in digest.events))),
        "e_old": _raw(array("Q", (e[1] for e in digest.events))),
        "counts": [digest.push_count, digest.done_count, digest.dropped, digest.live_delta, digest.failed_delta],
        "extra": extra,
    }
    data = msgpack.packb(value, use_bin_type=True)
    fd = create_exclusive(path)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def load_map(path: str, salt: int) -> tuple[TailCopy, dict[str, Any]]:
    """The ``TailCopy`` and the extra values a compaction's job saved (``ValueError`` if the file is not one)."""
    with open_file(path) as f:
        data = f.read(_MAX_MAP)
    value = msgpack.unpackb(data, raw=False, strict_map_key=False, max_bin_len=_MAX_MAP, max_str_len=1 << 24)
    if not isinstance(value, dict):
        raise ValueError("not a map")
    moved = Moved(at=int(value["at"]), old=_array("Q", value["old"]), new=_array("Q", value["new"]),
                  sizes=_array("I", value["sizes"]), failed_old=_array("Q", value["failed_old"]),
                  failed_new=_array("Q", value["failed_new"]), fails_new=_array("Q", value["fails_new"]),
                  fail_sizes=_array("I", value["fail_sizes"]))
    if not len(moved.old) == len(moved.new) == len(moved.sizes):
        raise ValueError("the pending requests' arrays differ in length")
    if not len(moved.failed_old) == len(moved.failed_new) == len(moved.fails_new) == len(moved.fail_sizes):
        raise ValueError("the failed requests' arrays differ in length")
    digest = Digest()
    t_old, t_new = _array("Q", value["t_old"]), _array("Q", value["t_new"])
    t_priority, t_due = _array("i", value["t_priority"]), _array("d", value["t_due"])
    t_size = _array("I", value["t_size"])
    digest.pushes = list(zip(t_old, t_new, t_priority, t_due, t_size, strict=True))
    digest.finished = set(_array("Q", value["finished"]))
    digest.requeued = set(_array("Q", value["requeued"]))
    digest.fails = list(zip(_array("Q", value["f_old"]), _array("Q", value["f_new"]), _array("I", value["f_size"]),
                            strict=True))
    digest.moved = dict(zip(_array("Q", value["m_old"]), _array("Q", value["m_new"]), strict=True))
    digest.events = list(zip(_array("B", value["e_kind"]), _array("Q", value["e_old"]), strict=True))
    digest.push_count, digest.done_count, digest.dropped, digest.live_delta, digest.failed_delta = value["counts"]
    copy = TailCopy(moved, salt, int(value["pos"]), int(value["end"]), int(value["crc"]), int(value["last"]), digest)
    copy._sizes = {old: size for old, _new, _p, _due, size in digest.pushes}
    return copy, value["extra"]
