"""Two sidecar stores of a job directory, kept beside the journal: host failure streaks and robots.txt.

Neither is part of the journal's truth: each is advice that a crawl can lose without losing or
repeating a request. Losing ``hosts.health`` means a failing host gets up to ``block_after`` more
tries before it is blocked again; losing a file of ``robots/`` means that host's robots.txt is
fetched again. So they are written as whole files (temp file, fsync, rename: a reader sees the
old file or the new one), at each change, and a file that does not check is reported (logged,
naming it) and treated as absent rather than stopping the crawl.

* ``hosts.health``: ``DFHEALTH\\x00\\x01``, the crc32 (u32, big-endian) of the rest, then a
  msgpack map ``{host name: consecutive failures}`` of the hosts with at least one failure.
* ``robots/``: one file a host, named by the first 32 hex digits of the sha256 of its name:
  ``DFROBOT\\x00\\x01``, the crc32 (u32, big-endian) of the rest, then a msgpack array
  ``[host name, status, fetched_at, body]`` (``body`` at most ``MAX_ROBOTS`` bytes).

The block that a streak causes is not kept here: it is a HOST record of the journal, written
after this file (see ``docs/format.md``, "Sidecar stores").
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import struct
import zlib
from typing import Any

import msgpack

from ..contract.checks import MAX_ROBOTS, MAX_TIME
from ..contract.values import HostInfo, RobotsEntry
from ..files.atomic import write_atomic
from ..files.safefs import make_dir, open_file

log = logging.getLogger("diskfrontier")

HEALTH_NAME = "hosts.health"
ROBOTS_DIR = "robots"
HEALTH_MAGIC = b"DFHEALTH\x00\x01"
ROBOTS_MAGIC = b"DFROBOT\x00\x01"
_CRC = struct.Struct(">I")
_MAX_HEALTH_BYTES = 1 << 30
_MAX_ROBOTS_FILE = MAX_ROBOTS + 4096
_MAX_FAILURES = 2**31 - 1


def _framed(magic: bytes, value: Any) -> bytes:
    body = msgpack.packb(value, use_bin_type=True)
    return magic + _CRC.pack(zlib.crc32(body)) + body


def _unframed(path: str, magic: bytes, limit: int) -> Any:
    """The msgpack value of a sidecar file; None if it is missing; ValueError saying what is wrong."""
    try:
        with open_file(path) as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        return None
    if len(data) > limit:
        raise ValueError(f"it is larger than {limit:,} bytes")
    head = len(magic) + _CRC.size
    if len(data) < head or not data.startswith(magic):
        raise ValueError("it does not start with its magic")
    (crc,) = _CRC.unpack_from(data, len(magic))
    if zlib.crc32(data[head:]) != crc:
        raise ValueError("its crc32 does not match")
    try:
        return msgpack.unpackb(data[head:], raw=False, strict_map_key=True, max_bin_len=MAX_ROBOTS)
    except Exception as exc:  # msgpack raises several unrelated types
        raise ValueError(f"it is not msgpack ({type(exc).__name__})") from None


class HostHealth:
    """Each host's consecutive failures, in memory and in ``hosts.health``."""

    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, HEALTH_NAME)
        self.failures: dict[str, int] = read_health(self.path)

    def count(self, host: str) -> int:
        return self.failures.get(host, 0)

    def failed(self, host: str) -> int:
        """One more failure of ``host``, written before it returns; the new count."""
        count = min(self.failures.get(host, 0) + 1, _MAX_FAILURES)
        changed = dict(self.failures)
        changed[host] = count
        self._save(changed)
        return count

    def succeeded(self, host: str) -> None:
        """End the streak of ``host`` (a write only if it had one)."""
        if host in self.failures:
            changed = dict(self.failures)
            del changed[host]
            self._save(changed)

    def annotate(self, infos: list[HostInfo], delay: float) -> list[HostInfo]:
        """``hosts()``: each host with its failures, and the hosts known only by their failures, by name."""
        out = [self._with(info) for info in infos]
        listed = {info.host for info in out}
        more = [self._alone(name, delay) for name in self.failures if name not in listed]
        return sorted(out + more, key=lambda info: info.host) if more else out

    def annotate_one(self, name: str, info: HostInfo | None, delay: float) -> HostInfo | None:
        """``host(name)``: ``info`` with its failures; a host known only by its failures; or None."""
        if info is None:
            return self._alone(name, delay) if name in self.failures else None
        return self._with(info)

    def _with(self, info: HostInfo) -> HostInfo:
        count = self.failures.get(info.host, 0)
        return dataclasses.replace(info, failures=count) if count else info

    def _alone(self, name: str, delay: float) -> HostInfo:
        return HostInfo(name, 0, 0, 0, delay, None, None, None, self.failures[name])

    def _save(self, failures: dict[str, int]) -> None:
        write_atomic(self.path, _framed(HEALTH_MAGIC, failures))
        self.failures = failures  # only once the file holds it: a failed write changes nothing


def read_health(path: str) -> dict[str, int]:
    """The failure counts of a ``hosts.health`` file (read-only); empty, with a warning naming the file,
    if it is damaged."""
    try:
        value = _unframed(path, HEALTH_MAGIC, _MAX_HEALTH_BYTES)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and 0 < v <= _MAX_FAILURES
                for k, v in value.items()):
            raise ValueError("it is not a map of host names to counts")
        return value
    except (OSError, ValueError) as exc:
        log.warning("%s cannot be used (%s): the hosts' failure counts start from 0 again", path, exc)
        return {}


class RobotsStore:
    """The robots.txt of each host, one file a host under ``robots/``, read when asked for."""

    def __init__(self, root: str) -> None:
        self.dir = os.path.join(root, ROBOTS_DIR)

    def _path(self, host: str) -> str:
        digest = hashlib.sha256(host.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return os.path.join(self.dir, digest + ".robots")

    def get(self, host: str) -> RobotsEntry | None:
        path = self._path(host)
        try:
            value = _unframed(path, ROBOTS_MAGIC, _MAX_ROBOTS_FILE)
            if value is None:
                return None
            if not (isinstance(value, list) and len(value) == 4):
                raise ValueError("it is not [host, status, fetched_at, body]")
            name, status, fetched_at, body = value
            if name != host:
                return None  # another host whose name has the same digest prefix: fetched again
            if not (isinstance(status, int) and not isinstance(status, bool) and 0 <= status <= 999
                    and isinstance(fetched_at, float) and 0 <= fetched_at <= MAX_TIME and isinstance(body, bytes)):
                raise ValueError("a field is out of range")
            return RobotsEntry(status, body, fetched_at)
        except (OSError, ValueError) as exc:
            log.warning("%s cannot be used (%s): the robots.txt of %s will be fetched again", path, exc, host)
            return None

    def put(self, host: str, entry: RobotsEntry) -> None:
        if not os.path.lexists(self.dir):
            with contextlib.suppress(FileExistsError):
                make_dir(self.dir)
        write_atomic(self._path(host), _framed(ROBOTS_MAGIC, [host, entry.status, entry.fetched_at, entry.body]))


__all__ = ["HEALTH_NAME", "ROBOTS_DIR", "HostHealth", "RobotsStore", "read_health"]
