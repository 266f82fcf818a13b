"""``requests.hosts``: the host table, the delayed and the failed requests at the last clean close.

Written at every clean close (temp file, fsync, rename) and named in the clean
checkpoint by its size and crc32, so that a clean open does not read the journal to
know each host's counts and settings, which requests wait for a time and which
failed. It is an index like the queue files: after anything but a clean close, or
when it does not match its checkpoint, it is rebuilt from the journal (HOST records,
each request's slot and not_before, and the FAIL records).

The file is the magic ``DFHOST\\x00\\x01``, a u32 (little-endian) length and that many
bytes of a msgpack map ``{"hosts": H, "names": bytes of the names, "delayed": D,
"settings": [[host index, delay or nil, blocked_until, budget or nil], ...],
"failed": F, "last": true}``, then raw little-endian arrays: every host name (UTF-8) one
after the other, where each name ends (H u64), each host's pending (H u32) and done (H
u64) counts, then the delayed requests' due times (D f64), journal offsets (D u64) and
priorities (D i32), then the failed requests' journal offsets (F u64) and the offsets
of their FAIL records (F u64), in FAIL order, then (with ``"last"``) each host's last
hand-out time (H f64, 0 for never), so that a delay still counts from it after a clean
restart. The arrays are read straight into the table's arrays, without a Python object
per host. A file without ``"failed"`` or ``"last"`` (written before they existed) has no
failed requests and no hand-out times.
"""

from __future__ import annotations

import math
import struct
import sys
import zlib
from array import array
from dataclasses import dataclass
from typing import Any

import msgpack

from ..files.atomic import write_atomic
from ..files.boundedjson import MAX_CRC, MAX_SIZE, check_int
from ..files.safefs import open_file
from ..politeness.delayed import DelayedRequests
from ..politeness.hosttable import HostTable
from ..politeness.schedule import HostSchedule
from .journal import MAX_SECONDS, MAX_TIME

HOSTS_MAGIC = b"DFHOST\x00\x01"
_MAX_BYTES = 1 << 34


@dataclass(frozen=True)
class HostFileRecord:
    """What a clean checkpoint keeps of ``requests.hosts``: its size and crc32."""

    size: int
    crc: int

    def to_json(self) -> list[int]:
        return [self.size, self.crc]

    @classmethod
    def from_json(cls, value: object) -> HostFileRecord:
        if not (isinstance(value, list) and len(value) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value)):
            raise ValueError("hosts_file is not [size, crc]")
        for part, number, high in zip(("size", "crc"), value, (MAX_SIZE, MAX_CRC), strict=True):
            check_int(f"hosts_file's {part}", number, 0, high)
        return cls(*value)


class HostFileUnusable(Exception):
    """``requests.hosts`` does not match its checkpoint or cannot be read; the message says why."""


def _little(data: array) -> bytes:
    if sys.byteorder != "little":
        data = array(data.typecode, data)
        data.byteswap()
    return data.tobytes()


_SECTIONS = (("ends", "Q"), ("pending", "I"), ("done", "Q"))
_DELAYED = (("due", "d"), ("offsets", "Q"), ("priorities", "i"))
_FAILED = (("failed", "Q"), ("fail_records", "Q"))
_LENGTH = struct.Struct("<I")


def save_host_state(
    path: str, schedule: HostSchedule, delayed: DelayedRequests, failed: dict[int, int] | None = None,
) -> HostFileRecord:
    """Write ``requests.hosts`` atomically; return what the checkpoint keeps of it.

    ``failed``: each failed request's journal offset -> the offset of its FAIL record, in FAIL order.
    """
    due, offsets, priorities = array("d"), array("Q"), array("i")
    for offset, priority, when in delayed.items():
        due.append(when)
        offsets.append(offset)
        priorities.append(priority)
    targets = array("Q", failed or {})
    fail_records = array("Q", (failed or {}).values())
    blob, ends, pending, done = schedule.counts.parts()
    settings = [[h.hid, h.delay, h.blocked_until, h.budget] for h in schedule.hot.values() if h.has_settings]
    head = msgpack.packb({"hosts": len(ends), "names": len(blob), "delayed": len(due), "settings": settings,
                          "failed": len(targets), "last": True}, use_bin_type=True)
    data = b"".join([HOSTS_MAGIC, _LENGTH.pack(len(head)), head, blob, _little(ends), _little(pending),
                     _little(done), _little(due), _little(offsets), _little(priorities), _little(targets),
                     _little(fail_records), _little(schedule.counts.last)])
    write_atomic(path, data)
    return HostFileRecord(len(data), zlib.crc32(data))


Setting = tuple[int, float | None, float, int | None]  # host id, delay, blocked_until, budget


@dataclass
class HostState:
    """What ``requests.hosts`` holds."""

    counts: HostTable
    settings: list[Setting]
    delayed: DelayedRequests
    failed: dict[int, int]  # failed request offset -> its FAIL record's offset, in FAIL order


def load_host_state(path: str, record: HostFileRecord) -> HostState:
    """Read ``requests.hosts``; raise ``HostFileUnusable`` unless it is the file ``record`` describes."""
    try:
        with open_file(path) as f:
            data = f.read(min(record.size, _MAX_BYTES) + 1)
    except FileNotFoundError:
        raise HostFileUnusable(f"{path} is missing") from None
    except OSError as exc:
        raise HostFileUnusable(f"{path} cannot be read ({exc})") from None
    if len(data) != record.size or zlib.crc32(data) != record.crc:
        raise HostFileUnusable(f"{path} is not the file the checkpoint names (size or crc32 differs)")
    if not data.startswith(HOSTS_MAGIC):
        raise HostFileUnusable(f"{path} does not start with its magic")
    try:
        view = memoryview(data)
        at = len(HOSTS_MAGIC) + _LENGTH.size
        (length,) = _LENGTH.unpack_from(data, len(HOSTS_MAGIC))
        head = msgpack.unpackb(view[at:at + length], raw=False, strict_map_key=False)
        at += length
        hosts, names, held, failed = head["hosts"], head["names"], head["delayed"], head.get("failed", 0)
        lasts = hosts if head.get("last") is True else 0
        blob = bytearray(view[at:at + names])
        at += names
        arrays: dict[str, array[Any]] = {}
        for name, typecode, count in [*((n, t, hosts) for n, t in _SECTIONS), *((n, t, held) for n, t in _DELAYED),
                                      *((n, t, failed) for n, t in _FAILED), ("last", "d", lasts)]:
            values = array(typecode)
            size = values.itemsize * count
            values.frombytes(view[at:at + size])
            if sys.byteorder != "little":
                values.byteswap()
            arrays[name] = values
            at += size
        if at != len(data) or len(blob) != names:
            raise ValueError("the arrays do not fill the file")
        for name in ("ends", "done", "offsets", "failed", "fail_records"):  # u64: past an off_t is damage
            if arrays[name] and max(arrays[name]) > MAX_SIZE:
                raise ValueError(f"a value of its {name} array is out of range")
        counts = HostTable.from_parts(blob, arrays["ends"], arrays["pending"], arrays["done"])
        if lasts:
            if not all(0.0 <= t <= MAX_TIME for t in arrays["last"]):
                raise ValueError("a host's last hand-out time is out of range")
            counts.last = arrays["last"]
        settings = [_setting(row, len(counts)) for row in head["settings"]]
        delayed = DelayedRequests.from_arrays(arrays["due"].tobytes(), arrays["offsets"].tobytes(),
                                              arrays["priorities"].tobytes())
        return HostState(counts, settings, delayed, _failed(arrays["failed"], arrays["fail_records"]))
    except Exception as exc:  # msgpack and the checks raise several unrelated types
        raise HostFileUnusable(f"{path} is malformed ({type(exc).__name__}: {exc})") from None


def _failed(targets: array, fail_records: array) -> dict[int, int]:
    """The failed set of the file: FAIL records in journal order, each after the request it names."""
    failed = dict(zip(targets, fail_records, strict=True))
    previous = 0
    for target, record in failed.items():
        if not target < record or not previous < record:
            raise ValueError(f"a bad failed request entry {target} -> {record}")
        previous = record
    if len(failed) != len(targets):
        raise ValueError("a failed request is listed twice")
    return failed


def _setting(row: Any, hosts: int) -> Setting:
    hid, delay, blocked_until, budget = row
    if not (isinstance(hid, int) and 0 <= hid < hosts
            and (delay is None or (isinstance(delay, float) and 0 <= delay <= MAX_SECONDS))
            and isinstance(blocked_until, float) and (0 <= blocked_until <= MAX_TIME or blocked_until == math.inf)
            and (budget is None or (isinstance(budget, int) and 0 <= budget <= MAX_SIZE))):
        raise ValueError(f"a bad host setting {row!r:.200}")
    return hid, delay, blocked_until, budget
