"""``requests.hosts``: the host table and the delayed requests at the last clean close.

Written at every clean close (temp file, fsync, rename) and named in the clean
checkpoint by its size and crc32, so that a clean open does not read the journal to
know each host's counts and settings and which requests wait for a time. It is an
index like the queue files: after anything but a clean close, or when it does not
match its checkpoint, it is rebuilt from the journal (HOST records, and each
request's slot and not_before).

The file is the magic ``DFHOST\\x00\\x01`` and one msgpack map: ``hosts``, a list of
``[name, pending, done, delay or nil, blocked_until, budget or nil]``, and ``delayed``,
three byte strings holding little-endian arrays of the delayed requests' due times
(f64), journal offsets (u64) and priorities (i32).
"""

from __future__ import annotations

import math
import sys
import zlib
from array import array
from dataclasses import dataclass
from typing import Any

import msgpack

from .atomic import write_atomic
from .delayed import DelayedRequests
from .hosts import Host
from .safefs import open_file

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
        return cls(*value)


class HostFileUnusable(Exception):
    """``requests.hosts`` does not match its checkpoint or cannot be read; the message says why."""


def _little(data: array) -> bytes:
    if sys.byteorder != "little":
        data = array(data.typecode, data)
        data.byteswap()
    return data.tobytes()


def _native(typecode: str, data: bytes) -> bytes:
    values = array(typecode)
    values.frombytes(data)
    if sys.byteorder != "little":
        values.byteswap()
    return values.tobytes()


def save_host_state(path: str, hosts: list[Host], delayed: DelayedRequests) -> HostFileRecord:
    """Write ``requests.hosts`` atomically; return what the checkpoint keeps of it."""
    due, offsets, priorities = array("d"), array("Q"), array("i")
    for offset, priority, when in delayed.items():
        due.append(when)
        offsets.append(offset)
        priorities.append(priority)
    table = [[h.name, h.pending, h.done, h.delay, h.blocked_until, h.budget] for h in hosts]
    body = msgpack.packb({"hosts": table, "delayed": [_little(due), _little(offsets), _little(priorities)]},
                         use_bin_type=True)
    data = HOSTS_MAGIC + body
    write_atomic(path, data)
    return HostFileRecord(len(data), zlib.crc32(data))


@dataclass
class HostState:
    """What ``requests.hosts`` holds."""

    hosts: list[Host]
    delayed: DelayedRequests


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
        value = msgpack.unpackb(data[len(HOSTS_MAGIC):], raw=False, strict_map_key=False)
        return HostState([_host(row) for row in value["hosts"]],
                         DelayedRequests.from_arrays(*(_native(t, b) for t, b in zip("dQi", value["delayed"],
                                                                                     strict=True))))
    except Exception as exc:  # msgpack and the checks below raise several unrelated types
        raise HostFileUnusable(f"{path} is malformed ({type(exc).__name__}: {exc})") from None


def _host(row: Any) -> Host:
    name, pending, done, delay, blocked_until, budget = row
    if not (isinstance(name, str) and isinstance(pending, int) and pending >= 0 and isinstance(done, int)
            and done >= 0 and (delay is None or (isinstance(delay, float) and delay >= 0 and math.isfinite(delay)))
            and isinstance(blocked_until, float) and blocked_until >= 0
            and (budget is None or (isinstance(budget, int) and budget >= 0))):
        raise ValueError(f"a bad host row {row!r:.200}")
    host = Host(name)
    host.pending, host.done, host.delay, host.blocked_until, host.budget = pending, done, delay, blocked_until, budget
    return host
