"""``requests.cursor``: the checkpoint that says whether the queue files can be trusted.

A JSON document, replaced atomically, carrying a crc32 of its own content (``crc``,
over the other keys serialised with sorted keys). While a frontier is open it says
``"state": "open"`` with the journal's length at that moment (``journal_floor``:
the journal only grows between compactions, so a shorter journal later is damage,
not a torn tail). A clean close writes ``"state": "clean"`` with the journal's and the
seen file's sizes, the offset of the journal's last record, the crc of each queue
file, the size and crc of ``requests.hosts``, the bytes of the pending PUSH records (what compaction would keep) and the
pending count per priority, which must equal the journal's PUSH count minus its DONE
count.

Every cursor names the job directory's ``id`` (``frontier.json``): a cursor that names
another one (copied from a sibling directory) is not this directory's checkpoint, and is
read as damaged.

At the next open the queue files are used as they are only if the checkpoint is
clean, intact and every figure matches the files; anything else (a crash, a damaged
or missing cursor, a file that changed) means the queues are rebuilt from the
journal. Trusting nothing is always safe, only slower; a damaged checkpoint never
means "empty".
"""

from __future__ import annotations

import json
import os
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from ..contract.checks import MAX_TIME
from ..files import boundedjson
from ..files.atomic import write_json_atomic
from ..files.boundedjson import MAX_CRC, MAX_SIZE, OutOfRange, check_int
from ..files.safefs import open_file
from ..request.model import PRIORITY_MAX, PRIORITY_MIN
from .hostfile import HostFileRecord
from .layout import ID_PATTERN as _ID
from .seenindex import IndexRecord
from .statefile import StateRecord


@dataclass
class Checkpoint:
    """The decoded cursor."""

    state: str = "missing"
    journal_bytes: int = -1
    journal_floor: int = 0
    seen_bytes: int = -1
    seen_tail: tuple[int, int] | None = None
    pending: dict[int, int] = field(default_factory=dict)
    queues: dict[int, int] = field(default_factory=dict)
    last_record: int = -1
    journal_pushes: int = 0
    journal_dones: int = 0
    live_bytes: int = 0
    paused_since: float | None = None  # a clean close of a paused crawl: when it was paused
    seen_index: IndexRecord | None = None  # the saved seen index that may be loaded instead of requests.seen
    journal_crc: int | None = None  # the crc32 of the journal's first ``floor`` bytes, when known
    hosts_file: HostFileRecord | None = None  # requests.hosts as a clean close wrote it
    states: list[StateRecord] = field(default_factory=list)  # saved states of the journal, the newest first
    failed_bytes: int | None = None  # bytes of the failed requests' records (a clean close keeps it)
    compactions: int = 0  # compactions of the journal since the directory was made (as far as cursors kept count)
    written: float | None = None  # when this cursor was written (time.time())
    pid: int | None = None
    problem: str | None = None
    ident: str | None = None  # the job directory id it names
    out_of_range: bool = False  # intact (its crc matched) but holding a number its field cannot hold

    @property
    def clean(self) -> bool:
        """True when the last close was clean."""
        return self.state == "clean"

    @property
    def floor(self) -> int:
        """The length below which the journal cannot have been cut by a crash."""
        return self.journal_bytes if self.clean else self.journal_floor


def _crc(value: dict[str, Any]) -> int:
    return zlib.crc32(json.dumps(value, sort_keys=True).encode())


MAX_PID = 2**31 - 1


def _int(value: dict[str, Any], key: str, default: int | None = None, low: int = 0, high: int = MAX_SIZE) -> int:
    return check_int(key, value.get(key, default), low, high)


def _int_map(value: dict[str, Any], key: str, low: int = 0, high: int = MAX_SIZE) -> dict[int, int]:
    items = value.get(key, {})
    if not isinstance(items, dict):
        raise ValueError(f"{key} is not an object")
    out = {}
    for k in items:
        priority = check_int(f"a priority of {key}", int(k), PRIORITY_MIN, PRIORITY_MAX)
        out[priority] = _int(items, k, None, low, high)
    return out


def _time(value: dict[str, Any], key: str) -> float:
    at = value[key]
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not 0 <= at <= MAX_TIME:
        raise OutOfRange(f"{key} {at!r}")
    return float(at)


def _tail(value: dict[str, Any]) -> tuple[int, int] | None:
    tail = value.get("seen_tail")
    if tail is None:
        return None
    if not isinstance(tail, list) or len(tail) != 2 or not all(isinstance(x, int) for x in tail):
        raise ValueError("seen_tail is not [end, crc]")
    return check_int("seen_tail's end", tail[0], 0, MAX_SIZE), check_int("seen_tail's crc", tail[1], 0, MAX_CRC)


def read_checkpoint(path: str, ident: str | None) -> Checkpoint:
    """Read the cursor; a missing, damaged or inconsistent one comes back as not clean, with the reason.

    ``ident``: the job directory's id (None for a directory of format 3 or older, which has none).
    """
    try:
        with open_file(path) as f:
            value = boundedjson.loads(f.read(boundedjson.MAX_JSON_BYTES + 1))
        if not isinstance(value, dict):
            raise ValueError("not a JSON object")
        crc = value.pop("crc", None)
        if crc != _crc(value):
            raise ValueError("its checksum does not match its content")
        if ident is not None and value.get("id") != ident:
            raise ValueError(f"it names the job directory {value.get('id')!r}, not this one ({ident})")
        state = value.get("state")
        if state not in ("open", "clean", "repaired"):
            raise ValueError(f"unknown state {state!r}")
        pid = value.get("pid")
        saved = Checkpoint(state=state, pid=pid if isinstance(pid, int) and 0 < pid <= MAX_PID else None)
        named = value.get("id")
        if named is not None:
            if not isinstance(named, str) or not _ID.fullmatch(named):
                raise ValueError(f"its id {named!r} is not 16 hex digits")
            saved.ident = named
        if "seen_index" in value:
            saved.seen_index = IndexRecord.from_json(value["seen_index"])
        if "journal_crc" in value:
            saved.journal_crc = _int(value, "journal_crc", None, 0, MAX_CRC)
        states = value.get("states", [])
        if not isinstance(states, list) or len(states) > 4:
            raise ValueError("states is not a list of at most 4 entries")
        saved.states = [StateRecord.from_json(entry) for entry in states]
        if "failed_bytes" in value:
            saved.failed_bytes = _int(value, "failed_bytes")
        saved.compactions = _int(value, "compactions", 0)
        if "time" in value:
            saved.written = _time(value, "time")
        if state == "open":
            saved.journal_floor = _int(value, "journal_floor", 0)
            saved.seen_tail = _tail(value)
        elif state == "clean":
            saved.journal_bytes = _int(value, "journal_bytes")
            saved.seen_bytes = _int(value, "seen_bytes")
            saved.seen_tail = _tail(value)
            saved.pending = _int_map(value, "pending", 1)
            saved.queues = _int_map(value, "queues", 0, MAX_CRC)
            saved.last_record = _int(value, "last_record", None, -1)
            saved.journal_pushes = _int(value, "journal_pushes")
            saved.journal_dones = _int(value, "journal_dones")
            saved.live_bytes = _int(value, "live_bytes")
            if "paused_since" in value:
                saved.paused_since = _time(value, "paused_since")
            if "hosts_file" in value:  # format 2 had none
                saved.hosts_file = HostFileRecord.from_json(value["hosts_file"])
            if sum(saved.pending.values()) != saved.journal_pushes - saved.journal_dones:
                raise ValueError(f"its pending counts add up to {sum(saved.pending.values())}, but the journal it "
                                 f"describes has {saved.journal_pushes} pushes and {saved.journal_dones} dones")
            if any(n <= 0 for n in saved.pending.values()) or not set(saved.queues) <= set(saved.pending):
                raise ValueError("its queue list does not match its pending counts")
        return saved
    except FileNotFoundError:
        return Checkpoint(state="missing", problem="no requests.cursor")
    except OutOfRange as exc:
        return Checkpoint(state="damaged", problem=f"requests.cursor holds a number out of range ({exc})",
                          out_of_range=True)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return Checkpoint(state="damaged", problem=f"unreadable requests.cursor ({exc})")


def named_id(path: str) -> str | None:
    """The job directory id that the intact cursor at ``path`` names, None if it names none (or is not intact)."""
    saved = read_checkpoint(path, None)
    return saved.ident


def _write(path: str, ident: str | None, value: dict[str, Any]) -> None:
    if ident is not None:
        value["id"] = ident
    value["time"] = time.time()
    value["crc"] = _crc(value)
    write_json_atomic(path, value)


def write_open(
    path: str, ident: str | None, journal_floor: int, seen_tail: tuple[int, int] | None,
    seen_index: IndexRecord | None = None, journal_crc: int | None = None, states: list[StateRecord] | None = None,
    compactions: int = 0,
) -> None:
    """Mark the directory (whose id is ``ident``) as open: from now on the queue files are not to be trusted.

    ``journal_crc``: the crc32 of the journal's first ``journal_floor`` bytes, if known.
    ``states``: the saved states (``statefile.py``) a recovery may start from, the newest first.
    """
    value: dict[str, Any] = {"state": "open", "pid": os.getpid(), "journal_floor": journal_floor}
    if compactions:
        value["compactions"] = compactions
    if states:
        value["states"] = [record.to_json() for record in states]
    if journal_crc is not None:
        value["journal_crc"] = journal_crc
    if seen_tail is not None:
        value["seen_tail"] = list(seen_tail)
    if seen_index is not None:
        value["seen_index"] = seen_index.to_json()
    _write(path, ident, value)


def write_clean(
    path: str, ident: str | None, *, journal_bytes: int, last_record: int, seen_tail: tuple[int, int],
    pending: dict[int, int], queues: dict[int, int], pushes: int, dones: int, live_bytes: int,
    hosts_file: HostFileRecord, seen_index: IndexRecord | None = None, journal_crc: int | None = None,
    paused_since: float | None = None, states: list[StateRecord] | None = None, failed_bytes: int | None = None,
    compactions: int = 0,
) -> None:
    """Mark a clean close: the queue files and requests.hosts match this journal and seen file."""
    extra: dict[str, Any] = {} if seen_index is None else {"seen_index": seen_index.to_json()}
    if compactions:
        extra["compactions"] = compactions
    if states:
        extra["states"] = [record.to_json() for record in states]
    if failed_bytes is not None:
        extra["failed_bytes"] = failed_bytes
    if paused_since is not None:
        extra["paused_since"] = paused_since
    extra["hosts_file"] = hosts_file.to_json()
    if journal_crc is not None:
        extra["journal_crc"] = journal_crc
    _write(path, ident, {**extra,
        "state": "clean", "journal_bytes": journal_bytes, "last_record": last_record,
        "seen_bytes": seen_tail[0], "seen_tail": list(seen_tail),
        "journal_pushes": pushes, "journal_dones": dones, "live_bytes": live_bytes,
        "pending": {str(p): n for p, n in sorted(pending.items())},
        "queues": {str(p): c for p, c in sorted(queues.items())},
    })


def write_repaired(path: str, ident: str | None) -> None:
    """Mark the directory as repaired: the queues must be rebuilt at the next open."""
    _write(path, ident, {"state": "repaired"})
