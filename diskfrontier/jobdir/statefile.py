"""``requests.state.*``: the journal's state at one offset, saved, so that a reader starts there.

A checkpoint of a running frontier (``maintenance/``) is what one scan of the journal up
to an offset ``at`` gives (``replay.py``): the pending requests (offset, priority,
host and record size each, and the not_before of those that have one), the failed
requests, each host's done count and last HOST record, the pause, the last inbox
commands applied, and the counts. Recovery, ``inspect``, ``peek``, ``export``, ``copy``
and ``serve`` load it and read only the journal after ``at``; a compaction writes the
state of the journal it made.

The file is the magic ``DFSTAT\\x00\\x01``, a u32 (little-endian) length and that many
bytes of a msgpack map (the scalars, the priorities, the host settings, the commands),
then raw little-endian arrays (``docs/format.md`` lists them), then the crc32 of
everything before it, continued from the directory's salt. Its name is
``requests.state.<at as 16 hex digits>.<random>``, and the checkpoint
(``requests.cursor``) names it with its size, its crc32, ``at`` and the crc32 of the
journal's first ``at`` bytes: a state is used only if all of these match, the id it
holds is the directory's, and the journal's first ``at`` bytes still have that crc32 (a
state of another journal, of a sibling directory or of the journal before a
compaction is never taken for this one's). Anything else is logged and the journal is
read from its start: the state is a cache, like the queue files.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import struct
import sys
import zlib
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from ..files.atomic import write_all
from ..files.boundedjson import MAX_CRC, MAX_SIZE, check_int
from ..files.safefs import create_exclusive, open_file
from ..request.model import PRIORITY_MAX, PRIORITY_MIN
from .journal import MAX_SECONDS, MAX_TIME
from .records import HostRecord

STATE_MAGIC = b"DFSTAT\x00\x01"
STATE_PREFIX = "requests.state."
_LENGTH = struct.Struct("<I")
_CRC = struct.Struct("<I")
_MAX_HEAD = 1 << 26
_CODE_TYPES = ("B", "H", "I")
MAX_COMMANDS = 64
"""Inbox commands whose MARK records a state (and a compacted journal) keeps: the latest."""


class StateUnusable(Exception):
    """A saved state that cannot be used (the journal is read from its start instead); the message says why."""


@dataclass
class SavedState:
    """The journal's state at byte ``at``: what a scan of its first ``at`` bytes finds, pending requests only."""

    ident: str
    at: int  # every record before this offset is in the state; the next one starts here
    journal_crc: int  # the crc32 of the journal's first ``at`` bytes
    last_record: int = -1
    pushes: int = 0  # request records in the journal (PUSH, RETRY, REFETCH), pending or not
    dones: int = 0  # requests they finished (DONE, RETRY and REFETCH targets, FAIL, DROP)
    dropped: int = 0
    paused_since: float | None = None
    priorities: list[int] = field(default_factory=list)  # code -> priority
    order: array = field(default_factory=lambda: array("Q"))  # each pending request's offset, in journal order
    codes: array = field(default_factory=lambda: array("B"))  # its priority's code
    hosts: array = field(default_factory=lambda: array("I"))  # its host's index in ``names``
    sizes: array = field(default_factory=lambda: array("I"))  # its record's size (frame included)
    timed_index: array = field(default_factory=lambda: array("Q"))  # index (in ``order``) of those with a not_before
    timed_at: array = field(default_factory=lambda: array("d"))  # their not_before
    failed: array = field(default_factory=lambda: array("Q"))  # each failed request's offset, in FAIL order
    fails: array = field(default_factory=lambda: array("Q"))  # its FAIL record's offset
    fail_sizes: array = field(default_factory=lambda: array("I"))  # the bytes of its request and FAIL records
    names: list[bytes] = field(default_factory=list)  # every host the journal names, by index
    host_done: array = field(default_factory=lambda: array("Q"))  # requests done per host
    settings: dict[int, HostRecord] = field(default_factory=dict)  # host index -> its last HOST record
    applied: list[tuple[str, str]] = field(default_factory=list)  # the latest inbox commands: (id, result JSON)
    seen_tail: tuple[int, int] | None = None  # requests.seen's (end, crc of its partial block) at ``at``

    @property
    def pending(self) -> int:
        return len(self.order)

    def live_bytes(self) -> int:
        """Bytes of the pending requests' records (what a compaction keeps of them)."""
        return sum(self.sizes)

    def failed_bytes(self) -> int:
        """Bytes of the failed requests' records and their FAIL records."""
        return sum(self.fail_sizes)


@dataclass(frozen=True)
class StateRecord:
    """What the checkpoint keeps of a state file: its name, size, crc32, ``at`` and the journal's crc32 there."""

    name: str
    size: int
    crc: int
    at: int
    journal_crc: int

    def to_json(self) -> list[Any]:
        return [self.name, self.size, self.crc, self.at, self.journal_crc]

    @classmethod
    def from_json(cls, value: object) -> StateRecord:
        if not (isinstance(value, list) and len(value) == 5 and isinstance(value[0], str)):
            raise ValueError("a checkpoint entry is not [name, size, crc, at, journal_crc]")
        name = value[0]
        if not is_state_name(name):
            raise ValueError(f"{name!r} is not the name of a state file")
        for part, number, high in zip(("size", "crc", "at", "journal_crc"), value[1:],
                                      (MAX_SIZE, MAX_CRC, MAX_SIZE, MAX_CRC), strict=True):
            check_int(f"a checkpoint entry's {part}", number, 0, high)
        return cls(name, value[1], value[2], value[3], value[4])


def is_state_name(name: str) -> bool:
    """True for ``requests.state.<16 hex digits>.<hex>``: a name the job directory's states take."""
    if not name.startswith(STATE_PREFIX):
        return False
    parts = name[len(STATE_PREFIX):].split(".")
    return (len(parts) == 2 and len(parts[0]) == 16 and 1 <= len(parts[1]) <= 16
            and all(c in "0123456789abcdef" for c in parts[0] + parts[1]))


def state_name(at: int, nonce: int) -> str:
    """The file name of a state at journal offset ``at`` (``nonce``: makes it a name never used before)."""
    return f"{STATE_PREFIX}{at:016x}.{nonce & 0xFFFFFFFFFFFF:x}"


def _little(values: array) -> bytes:
    if sys.byteorder != "little":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _sections(state: SavedState) -> list[tuple[str, array]]:
    ends = array("Q")
    total = 0
    for name in state.names:
        total += len(name)
        ends.append(total)
    return [("order", state.order), ("codes", state.codes), ("hosts", state.hosts), ("sizes", state.sizes),
            ("timed_index", state.timed_index), ("timed_at", state.timed_at), ("failed", state.failed),
            ("fails", state.fails), ("fail_sizes", state.fail_sizes), ("ends", ends), ("host_done", state.host_done)]


def encode_state(state: SavedState, salt: int) -> bytes:
    """The bytes of the state file."""
    settings = [[hid, r.delay, r.blocked_until, r.budget, r.done] for hid, r in sorted(state.settings.items())]
    head = {
        "id": state.ident, "at": state.at, "journal_crc": state.journal_crc, "last": state.last_record,
        "pushes": state.pushes, "dones": state.dones, "dropped": state.dropped, "paused": state.paused_since,
        "priorities": state.priorities, "code": state.codes.typecode, "pending": len(state.order),
        "timed": len(state.timed_index), "failed": len(state.failed), "hosts": len(state.names),
        "names": sum(len(n) for n in state.names), "settings": settings,
        "applied": [list(pair) for pair in state.applied[-MAX_COMMANDS:]],
        "seen": None if state.seen_tail is None else list(state.seen_tail),
    }
    packed = msgpack.packb(head, use_bin_type=True)
    parts = [STATE_MAGIC, _LENGTH.pack(len(packed)), packed, b"".join(state.names)]
    parts += [_little(values) for _name, values in _sections(state)]
    data = b"".join(parts)
    return data + _CRC.pack(zlib.crc32(data, salt))


def write_state(directory: str, name: str, state: SavedState, salt: int, *, durable: bool = True) -> StateRecord:
    """Write ``state`` as a new file ``name`` in ``directory`` (created exclusively), fsynced unless not ``durable``."""
    data = encode_state(state, salt)
    path = os.path.join(directory, name)
    fd = create_exclusive(path)
    try:
        write_all(fd, data)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)
    return StateRecord(name, len(data), zlib.crc32(data), state.at, state.journal_crc)


def read_state_file(directory: str, record: StateRecord, ident: str, salt: int) -> SavedState:
    """The state file ``record`` names; ``StateUnusable`` unless it is that file, whole, of this directory."""
    path = os.path.join(directory, record.name)
    try:
        with open_file(path) as f:
            data = f.read(record.size + 1)
    except FileNotFoundError:
        raise StateUnusable(f"{record.name} is missing") from None
    except OSError as exc:
        raise StateUnusable(f"{record.name} cannot be read ({exc})") from None
    if len(data) != record.size or zlib.crc32(data) != record.crc:
        raise StateUnusable(f"{record.name} is not the file the checkpoint names (its size or crc32 differs)")
    try:
        return decode_state(data, ident, salt, record)
    except StateUnusable:
        raise
    except Exception as exc:  # msgpack and the checks raise several unrelated types
        raise StateUnusable(f"{record.name} is malformed ({type(exc).__name__}: {exc})") from None


def decode_state(data: bytes, ident: str, salt: int, record: StateRecord | None = None) -> SavedState:
    """The state that ``data`` (a state file's bytes) holds, every field checked."""
    if not data.startswith(STATE_MAGIC) or len(data) < len(STATE_MAGIC) + _LENGTH.size + _CRC.size:
        raise StateUnusable("it does not start with the magic of a state file")
    (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
    body = memoryview(data)[:len(data) - _CRC.size]
    if zlib.crc32(body, salt) != crc:
        raise StateUnusable("its checksum does not hold (damaged, or written by another job directory)")
    (length,) = _LENGTH.unpack_from(data, len(STATE_MAGIC))
    at = len(STATE_MAGIC) + _LENGTH.size
    if length > min(_MAX_HEAD, len(body) - at):
        raise ValueError("its head runs past its end")
    head = msgpack.unpackb(body[at:at + length], raw=False, strict_map_key=False, max_bin_len=0,
                           max_array_len=1 << 20, max_map_len=64)
    at += length
    if not isinstance(head, dict):
        raise ValueError("its head is not a map")
    if head.get("id") != ident:
        raise StateUnusable(f"it names the job directory {head.get('id')!r}, not this one ({ident})")
    state = SavedState(ident=ident, at=check_int("at", head["at"]),
                       journal_crc=check_int("journal_crc", head["journal_crc"], 0, MAX_CRC))
    if record is not None and (state.at != record.at or state.journal_crc != record.journal_crc):
        raise StateUnusable("it describes another point of the journal than the checkpoint names")
    state.last_record = check_int("last", head["last"], -1)
    state.pushes, state.dones = check_int("pushes", head["pushes"]), check_int("dones", head["dones"])
    state.dropped = check_int("dropped", head["dropped"])
    paused = head["paused"]
    if paused is not None and not (isinstance(paused, float) and 0 <= paused <= MAX_TIME):
        raise ValueError(f"paused {paused!r}")
    state.paused_since = paused
    priorities = head["priorities"]
    if not isinstance(priorities, list) or len(set(priorities)) != len(priorities):
        raise ValueError("its priorities are not a list of distinct priorities")
    state.priorities = [check_int("a priority", p, PRIORITY_MIN, PRIORITY_MAX) for p in priorities]
    code = head["code"]
    if code not in _CODE_TYPES:
        raise ValueError(f"code type {code!r}")
    counts = {name: check_int(name, head[name], 0, len(data)) for name in ("pending", "timed", "failed", "hosts",
                                                                            "names")}
    blob = bytes(body[at:at + counts["names"]])
    at += counts["names"]
    sizes = {"order": ("Q", counts["pending"]), "codes": (code, counts["pending"]), "hosts": ("I", counts["pending"]),
             "sizes": ("I", counts["pending"]), "timed_index": ("Q", counts["timed"]),
             "timed_at": ("d", counts["timed"]), "failed": ("Q", counts["failed"]), "fails": ("Q", counts["failed"]),
             "fail_sizes": ("I", counts["failed"]), "ends": ("Q", counts["hosts"]),
             "host_done": ("Q", counts["hosts"])}
    arrays: dict[str, array] = {}
    for name, (typecode, count) in sizes.items():
        values = array(typecode)
        size = values.itemsize * count
        if at + size > len(body):
            raise ValueError(f"its {name} array runs past its end")
        values.frombytes(body[at:at + size])
        if sys.byteorder != "little":
            values.byteswap()
        arrays[name] = values
        at += size
    if at != len(body):
        raise ValueError("its arrays do not fill it")
    state.order, state.codes, state.hosts, state.sizes = (arrays["order"], arrays["codes"], arrays["hosts"],
                                                          arrays["sizes"])
    state.timed_index, state.timed_at = arrays["timed_index"], arrays["timed_at"]
    state.failed, state.fails, state.fail_sizes = arrays["failed"], arrays["fails"], arrays["fail_sizes"]
    state.host_done = arrays["host_done"]
    state.names = _names(blob, arrays["ends"])
    _check_arrays(state)
    state.settings = _settings(head["settings"], len(state.names))
    state.applied = _applied(head["applied"])
    seen = head["seen"]
    if seen is not None:
        if not (isinstance(seen, list) and len(seen) == 2):
            raise ValueError("seen is not [end, crc]")
        state.seen_tail = (check_int("seen's end", seen[0]), check_int("seen's crc", seen[1], 0, MAX_CRC))
    return state


def _names(blob: bytes, ends: array) -> list[bytes]:
    names = []
    start = 0
    for end in ends:
        if not start <= end <= len(blob):
            raise ValueError("a host name runs past the names")
        names.append(blob[start:end])
        start = end
    if start != len(blob):
        raise ValueError("the host names do not fill their bytes")
    if len(set(names)) != len(names):
        raise ValueError("a host is named twice")
    return names


def _check_arrays(state: SavedState) -> None:
    """Offsets in order and before ``at``, codes and hosts in range, timed indexes increasing."""
    at = state.at
    order = state.order
    if order and (order[-1] >= at or any(a >= b for a, b in itertools.pairwise(order))):
        raise ValueError("its pending offsets are not increasing offsets of the journal")
    if state.codes and max(state.codes) >= len(state.priorities):
        raise ValueError("a pending request's priority code names no priority")
    if state.hosts and max(state.hosts) >= len(state.names):
        raise ValueError("a pending request's host names no host")
    index = state.timed_index
    if index and (index[-1] >= len(order) or any(a >= b for a, b in itertools.pairwise(index))):
        raise ValueError("its timed indexes are not increasing indexes of the pending requests")
    if not all(0 < t <= MAX_TIME for t in state.timed_at):
        raise ValueError("a not_before is out of range")
    failed, fails = state.failed, state.fails
    if len(set(failed)) != len(failed) or not all(t < f < at for t, f in zip(failed, fails, strict=False)):
        raise ValueError("a failed request's entry does not name a FAIL record after it")
    if any(a >= b for a, b in itertools.pairwise(fails)):
        raise ValueError("the FAIL records are not in journal order")


def _settings(rows: Any, hosts: int) -> dict[int, HostRecord]:
    if not isinstance(rows, list):
        raise ValueError("settings is not a list")
    out = {}
    for row in rows:
        hid, delay, blocked_until, budget, done = row
        if not (isinstance(hid, int) and 0 <= hid < hosts and hid not in out
                and isinstance(delay, float) and (delay != delay or 0 <= delay <= MAX_SECONDS)
                and isinstance(blocked_until, float) and blocked_until >= 0
                and isinstance(budget, int) and -1 <= budget <= MAX_SIZE
                and isinstance(done, int) and 0 <= done <= MAX_SIZE):
            raise ValueError(f"a bad host setting {row!r:.200}")
        out[hid] = HostRecord(b"", delay, blocked_until, budget, done)
    return out


def _applied(rows: Any) -> list[tuple[str, str]]:
    if not isinstance(rows, list) or len(rows) > MAX_COMMANDS:
        raise ValueError("applied is not a list of at most 64 commands")
    out = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == 2 and all(isinstance(x, str) for x in row)):
            raise ValueError("an applied command is not [id, result]")
        out.append((row[0], row[1]))
    return out


def summary(state: SavedState) -> dict[str, Any]:
    """What ``state`` says, independent of how its arrays are laid out (hosts by name, not by index): two states
    of the same journal at the same offset, one made by a compaction and one by a scan, summarise the same."""
    names = state.names
    times = dict(zip(state.timed_index, state.timed_at, strict=True))
    pending = [(offset, state.priorities[state.codes[i]], names[state.hosts[i]], state.sizes[i], times.get(i, 0.0))
               for i, offset in enumerate(state.order)]
    settings = {names[hid]: (r.delay if r.delay == r.delay else None, r.blocked_until, r.budget, r.done)
                for hid, r in state.settings.items()}
    return {
        "at": state.at, "journal_crc": state.journal_crc, "last_record": state.last_record, "pushes": state.pushes,
        "dones": state.dones, "paused_since": state.paused_since, "pending": pending,
        "failed": list(zip(state.failed, state.fails, state.fail_sizes, strict=True)),
        "done": {names[hid]: n for hid, n in enumerate(state.host_done) if n}, "settings": settings,
        "applied": list(state.applied),
    }


def remove_stale_states(directory: str, keep: Iterable[StateRecord]) -> int:
    """Remove the state files of ``directory`` that are not in ``keep`` (replaced, or left by a stop); how many."""
    kept = {record.name for record in keep}
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return 0
    removed = 0
    for name in names:
        if name.startswith(STATE_PREFIX) and name not in kept:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))  # a link is removed, not followed
                removed += 1
    return removed
