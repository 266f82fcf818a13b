"""Where ``serve`` reads a crawl's state from: each source gives a ``Reading``, a snapshot dict
(``diskfrontier.contract.snapshot``) and where it came from.

- ``FrontierSource``: an open frontier (a Redis crawl's ``RedisFrontier``): its ``stats()``,
  ``hosts()`` and ``next_ready()`` at every read, its failures again only when their count
  changed (or after ``FAILURES_EVERY`` seconds), since a Redis crawl gives them all at once.
- ``JobDirSource``: a job directory. While a process holds it, the holder's ``status.json``
  (a snapshot it replaces about once a second); a directory no process holds (or one whose
  holder publishes no ``status.json``) is read with the read-only views (``targets.open_view``
  for its hosts, the reader's failed list for its latest failures, ``inspect_jobdir`` for its
  counts), again only when its files changed: a read of a large directory that is not clean
  scans its journal, so an unchanged one costs a few ``stat`` calls, and a held one is read
  again no sooner than ``HELD_COST_FACTOR`` times its last read's cost.

Each reading also gives the failures grouped by kind (``errorkinds``), counted again only when the
number of failures changed (a held job directory's no sooner than ``HELD_COST_FACTOR`` times the
last count's cost: it scans the journal), a job directory's bytes on disk, and on request every
host, not only the busiest (``all_hosts``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..access.targets import backend_name, backend_of, is_server_target, open_target, open_view
from ..contract.protocol import FrontierProtocol
from ..contract.snapshot import LATEST_FAILURES, SNAPSHOT_VERSION, host_rank, snapshot
from ..contract.values import FailedRequest, HostInfo
from ..core.errors import FrontierError
from ..files import boundedjson
from ..files.safefs import open_file
from ..jobdir.layout import Layout
from ..jobdir.lock import probe_lock
from ..jobdir.outcomefile import read_outcomes
from ..jobdir.reader import JobInfo, failed_requests, inspect_jobdir
from ..transfer.copy import shown_url
from .errorkinds import count_kinds

STATUS_FILE = "status.json"
"""The snapshot that the process holding a job directory publishes there (replaced atomically)."""
STATUS_MAX_BYTES = 1 << 20
FAILURES_EVERY = 30.0
"""Seconds after which a frontier's failures are read again even if their count is the same."""
HELD_COST_FACTOR = 10.0
"""A held directory without ``status.json`` is read from its files again no sooner than this many
times the last read's duration after it (at most a tenth of the time goes to reading it)."""
OWN_CLIENT_STATS = ("leased_here", "lease", "prefetched", "acks_lost", "acks_failed")
"""A RedisFrontier's stats about the reading client itself, not the crawl."""
KIND_FAILURES = 50_000
"""The latest failures whose kinds are counted (older ones are not read)."""


@dataclass
class Reading:
    """One look at a crawl: its snapshot, where it came from, and what it cost."""

    snapshot: dict[str, Any]
    origin: str  # "redis", "postgres", "status.json" (published by the holder) or "files" (read-only views)
    holder: int | None = None  # the pid holding a job directory (0: unknown), None if none
    note: str | None = None  # what a person should know about this data
    read_seconds: float = 0.0  # how long the last full read took
    reread: bool = True  # False: the source had not changed, the last read was reused
    error_kinds: dict[str, int] | None = None  # the latest KIND_FAILURES failures by kind (None: not known)
    disk_bytes: int | None = None  # the bytes of a job directory's files


class Source(Protocol):
    """A crawl to watch."""

    name: str  # what the page shows: a job directory's path, or the Redis URL (no password) and crawl

    def read(self) -> Reading:
        """The crawl's state now (may reuse what an earlier read found, when nothing changed)."""
        ...

    def all_hosts(self) -> list[dict[str, Any]]:
        """Every host of the crawl (as a snapshot lists them), the busiest first."""
        ...

    def close(self) -> None:
        ...


def open_source(target: str, crawl: str | None) -> Source:
    """The source of ``target``: a crawl in Redis or PostgreSQL (a URL and ``crawl``) or a job directory."""
    if is_server_target(target):
        if crawl is None:
            raise ValueError(f"a {backend_name(target)} URL names a server: give the crawl's name as crawl=")
        frontier = open_target(target, crawl, create=False)
        return FrontierSource(frontier, f"{shown_url(target)} crawl {crawl}", origin=backend_of(target))
    if crawl is not None:
        raise ValueError(f"crawl= names a crawl in Redis, and {target} is a job directory")
    return JobDirSource(target)


def json_safe(value: Any) -> Any:
    """``value`` with every infinite float as the string "forever" and every NaN as None (JSON has
    neither), dict keys as strings; what ``/api/stats`` sends."""
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "forever" if value > 0 else None
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


# ------------------------------------------------------------------ an open frontier (Redis)
class FrontierSource:
    """An open frontier, read through the contract (``stats``, ``hosts``, ``failed``, ``next_ready``)."""

    def __init__(self, frontier: FrontierProtocol, name: str, *, origin: str,
                 clock: Callable[[], float] = time.time) -> None:
        self.frontier = frontier
        self.name = name
        self.origin = origin
        self.clock = clock
        self._failures: list[FailedRequest] = []
        self._failures_key: tuple[Any, ...] | None = None
        self._failures_at = -math.inf
        self._kinds: dict[str, int] = {}

    def read(self) -> Reading:
        started = time.perf_counter()
        stats = self.frontier.stats()
        for own in OWN_CLIENT_STATS:
            stats.pop(own, None)
        hosts = self.frontier.hosts()
        next_ready = self.frontier.next_ready()
        now = self.clock()
        key = (stats.get("failed"), stats.get("retried"))
        if key != self._failures_key or now - self._failures_at >= FAILURES_EVERY:
            failed = self.frontier.failed()[-KIND_FAILURES:] if stats.get("failed") else []
            self._failures = failed[-LATEST_FAILURES:]
            self._kinds = count_kinds(f.error for f in failed)
            self._failures_key, self._failures_at = key, now
        shot = snapshot(stats, hosts, self._failures, next_ready, source=self.name, now=now)
        return Reading(shot, self.origin, read_seconds=time.perf_counter() - started, error_kinds=self._kinds)

    def all_hosts(self) -> list[dict[str, Any]]:
        now = self.clock()
        return [info.to_dict() for info in sorted(self.frontier.hosts(), key=lambda h: host_rank(h, now))]

    def close(self) -> None:
        self.frontier.close()


# ------------------------------------------------------------------ a job directory
@dataclass
class _Files:
    """What a read of a job directory's files found, kept until they change."""

    signature: tuple[Any, ...]
    info: JobInfo
    rows: list[Any]  # HostRow
    failures: list[FailedRequest]
    kinds: dict[str, int]
    read_at: float
    cost: float
    held: int | None
    own_delay: dict[str, bool] = field(default_factory=dict)


class JobDirSource:
    """A job directory: its holder's ``status.json`` while one publishes it, else its files."""

    FILES = ("frontier.json", "requests.urls", "requests.cursor", "requests.hosts", "requests.seen", "outcomes.json")

    def __init__(self, path: str, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.name = path
        self.layout = Layout(path)
        self.clock = clock
        self.full_reads = 0  # reads of the files (the tests count them)
        self._files: _Files | None = None
        self._status_key: tuple[int, int, int] | None = None
        self._status: dict[str, Any] | None = None
        self._kinds: tuple[Any, dict[str, int], float, float] | None = None  # (failed, kinds, when, cost)
        if not os.path.lexists(self.layout.meta):
            raise FrontierError(f"{path} is not a diskfrontier job directory (no frontier.json)")

    # -------------------------------------------------------------- status.json
    def status_path(self) -> str:
        return os.path.join(self.path, STATUS_FILE)

    def read_status(self, holder: int) -> dict[str, Any] | None:
        """The holder's ``status.json`` if it is there, sound, and written by ``holder`` (0: any pid)."""
        path = self.status_path()
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if key != self._status_key:
            self._status_key, self._status = key, None
            try:
                with open_file(path) as f:
                    data = boundedjson.loads(f.read(STATUS_MAX_BYTES + 1), max_bytes=STATUS_MAX_BYTES)
            except (OSError, ValueError, FrontierError):
                return None  # being replaced, a link, or not JSON: the files are read instead
            if valid_status(data):
                self._status = data
        status = self._status
        if status is None or (holder and status.get("pid") != holder):
            return None  # left by an earlier holder
        return status

    # -------------------------------------------------------------- the files
    def _signature(self) -> tuple[Any, ...]:
        out: list[Any] = []
        for name in self.FILES:
            try:
                st = os.lstat(os.path.join(self.path, name))
            except FileNotFoundError:
                out.append(None)
                continue
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def _read_files(self, signature: tuple[Any, ...], holder: int | None) -> _Files:
        started = time.perf_counter()
        info = inspect_jobdir(self.path)
        with open_view(self.path, failed=False) as view:
            rows = view.host_rows()
        failures: list[FailedRequest] = []
        kinds: dict[str, int] = {}
        if info.failed:
            failed = failed_requests(self.path)
            failures = list(failed.latest(LATEST_FAILURES))
            kinds = count_kinds(f.error for f in failed.latest(KIND_FAILURES))
        self.full_reads += 1
        cost = time.perf_counter() - started
        return _Files(signature, info, rows, failures, kinds, self.clock(), cost, holder,
                      {row.host: row.delay is not None for row in rows})

    def read(self) -> Reading:
        holder = probe_lock(self.layout.lock)
        if holder is not None:
            status = self.read_status(holder)
            if status is not None:
                return Reading(dict(status), "status.json", holder=holder, error_kinds=self._held_kinds(status),
                               disk_bytes=directory_bytes(self.path))
        signature = (*self._signature(), holder is not None)
        files = self._files
        now = self.clock()
        reread = files is None or files.signature != signature
        note = None
        if reread and files is not None and holder is not None and now < files.read_at + HELD_COST_FACTOR * files.cost:
            reread = False  # a live directory without status.json: read at most a tenth of the time
        if reread:
            files = self._files = self._read_files(signature, holder)
        assert files is not None
        if holder is not None:
            who = f"pid {holder}" if holder else "another process"
            note = (f"held by {who}, which publishes no {STATUS_FILE}: read from its files (its requests in "
                    f"flight are counted as pending)")
        shot = self.snapshot_of(files, now if files.signature == signature else files.read_at)
        return Reading(shot, "files", holder=holder, note=note, read_seconds=files.cost, reread=reread,
                       error_kinds=files.kinds, disk_bytes=directory_bytes(self.path))

    def _held_kinds(self, status: dict[str, Any]) -> dict[str, int] | None:
        """The failures by kind of a directory its holder publishes: read from the journal again when their
        number changed, and no sooner than ``HELD_COST_FACTOR`` times the last count's cost after it."""
        failed = (status.get("stats") or {}).get("failed")
        if not failed:
            return {}
        kept = self._kinds
        now = time.monotonic()
        if kept is not None and (kept[0] == failed or now < kept[2] + HELD_COST_FACTOR * kept[3]):
            return kept[1]
        started = time.perf_counter()
        try:
            kinds = count_kinds(f.error for f in failed_requests(self.path).latest(KIND_FAILURES))
        except (OSError, FrontierError):
            return None if kept is None else kept[1]  # the journal moved under the scan: the next read tries again
        self._kinds = (failed, kinds, now, time.perf_counter() - started)
        return kinds

    def all_hosts(self) -> list[dict[str, Any]]:
        """Every host, from the files (read-only; a held directory's requests in flight count as pending)."""
        now = self.clock()
        with open_view(self.path, failed=False) as view:
            rows = view.host_rows()
        infos = [HostInfo(row.host, row.pending, row.in_flight or 0, row.done,
                          row.delay if row.delay is not None else 0.0, None, row.blocked_until, row.budget,
                          row.failures) for row in rows]
        own = {row.host: row.delay is not None for row in rows}
        hosts = []
        for info in sorted(infos, key=lambda h: host_rank(h, now)):
            host = info.to_dict()
            if not own[info.host]:
                host["delay"] = None  # the crawl's own
            hosts.append(host)
        return hosts

    def snapshot_of(self, files: _Files, now: float) -> dict[str, Any]:
        """The snapshot of what ``files`` found, as of ``now`` (hosts ready or waiting then)."""
        info = files.info
        held = files.held is not None
        stats: dict[str, Any] = {
            "pending": info.pending, "in_flight": None if held else 0, "done": info.done, "failed": info.failed,
            "seen": info.seen, "delayed": info.delayed, "hosts": info.hosts,
            "pending_by_priority": {str(p): n for p, n in info.pending_by_priority.items()},
            "order": info.order, "state": info.state, "journal_bytes": info.journal_bytes,
            "reclaimable_bytes": info.reclaimable_bytes,
            **read_outcomes(self.path, warn=False),  # the outcome counters and the counters of every run
        }
        hosts = []
        first_block: float | None = None
        any_ready = False
        for row in files.rows:
            blocked = row.blocked_until if row.blocked_until and row.blocked_until > now else None
            ready_at = None
            if row.pending:
                ready_at = blocked if blocked is not None else now
                if blocked is None:
                    any_ready = True
                elif first_block is None or blocked < first_block:
                    first_block = blocked
            hosts.append(HostInfo(row.host, row.pending, 0, row.done, row.delay if row.delay is not None else 0.0,
                                  ready_at, row.blocked_until, row.budget))
        if not info.pending:
            next_ready = None
        elif any_ready and info.pending > info.delayed:
            next_ready = now
        else:
            times = [t for t in (first_block, info.next_due) if t is not None and not math.isinf(t)]
            next_ready = max(now, min(times)) if times else None
        shot = snapshot(stats, hosts, files.failures, next_ready, source=self.name, now=now)
        for host in shot["hosts"]:  # a job directory's files keep no crawl delay: None is "the crawl's own"
            if not files.own_delay.get(host["host"], True):
                host["delay"] = None
        shot["pid"] = None  # no process took it: the files were read
        return shot

    def close(self) -> None:
        pass


def directory_bytes(path: str) -> int | None:
    """The bytes of the files in the job directory at ``path`` and its folders (None: it could not be read);
    a file removed during the count (a temporary file, a queue file of a compaction) is left out."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return None
    total = 0
    while entries:
        entry = entries.pop()
        try:
            if entry.is_dir(follow_symlinks=False):
                entries.extend(os.scandir(entry.path))
            elif entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue  # removed during the count
    return total


def valid_status(data: Any) -> bool:
    """Whether ``data`` has the snapshot's shape (as ``status.json`` must)."""
    if not isinstance(data, dict) or not isinstance(data.get("version"), int) or data["version"] > SNAPSHOT_VERSION:
        return False
    taken = data.get("taken")
    return (isinstance(data.get("stats"), dict) and isinstance(taken, (int, float)) and not isinstance(taken, bool)
            and isinstance(data.get("hosts", []), list) and isinstance(data.get("failures", []), list)
            and isinstance(data.get("pid"), int))
