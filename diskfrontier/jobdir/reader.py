"""Read-only views of a job directory: its state, what is pending, in pop order.

Nothing here writes, takes the lock, or opens a file for writing, so it is safe on a
directory that a live crawl holds (guarantee 5). The journal is read with the one
checked scan (``jobdir/replay.py``) and each request with the one crc-checked record read
(``journal.read_record``): a damaged record is an error, never printed as data.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..contract.values import FailedRequest
from ..core.errors import FrontierError, JobDirCorrupt
from ..files import boundedjson
from ..files.safefs import open_fd, open_file
from ..request.model import Request
from . import checkpoint
from .hostfile import HostFileUnusable, HostState, load_host_state
from .hostmeta import read_health
from .journal import MAGIC, read_fail, read_record, record_end
from .layout import FORMAT_VERSION, SALTED_FROM, Layout, journal_format, probe_lock, read_meta, salt_of
from .queues import distrust_reason, queue_offsets
from .records import request_of
from .replay import JournalState, read_state
from .seen import count_fingerprints, fingerprints_in
from .seenindex import key_of
from .statefile import StateUnusable, read_state_file


@dataclass
class JobInfo:
    """What ``diskfrontier inspect`` shows."""

    path: str
    state: str
    holder_pid: int | None
    format_version: int
    order: str
    created: str
    pending: int
    pending_by_priority: dict[int, int] = field(default_factory=dict)
    done: int = 0  # requests done (re-fetches counted each time, retries not), failed ones apart
    seen: int = 0  # exact when seen_exact, else a lower bound (recovery counts the rest)
    seen_exact: bool = True
    journal_bytes: int = 0
    queue_bytes: int = 0
    seen_bytes: int = 0
    reclaimable_bytes: int = 0
    torn_bytes: int = 0
    hosts: int = 0  # hosts with pending requests
    delayed: int = 0  # pending requests waiting for a time
    next_due: float | None = None  # when the first of them is due
    failed: int = 0  # failed requests not requeued
    paused_since: float | None = None  # when the crawl was paused, if it is
    live_bytes: int = 0  # bytes of the journal a compaction keeps (pending and failed requests' records)
    compactions: int = 0  # compactions of the journal since the directory was made
    checkpoint_at: int | None = None  # the journal offset of the newest checkpoint's saved state (None: none)
    checkpoint_time: float | None = None  # when that checkpoint was written

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        total += sum(os.lstat(os.path.join(root, f)).st_size for f in files)
    return total


def _require_jobdir(layout: Layout) -> dict[str, Any]:
    if not os.path.lexists(layout.meta):
        raise FrontierError(f"{layout.root} is not a diskfrontier job directory (no frontier.json)")
    return read_meta(layout)


def _ident(meta: dict[str, Any]) -> str | None:
    """The id that the directory's cursor must name (None before format 4)."""
    return meta["id"] if meta["version"] >= SALTED_FROM else None


def inspect_jobdir(path: str) -> JobInfo:
    """Describe the job directory at ``path`` without changing it.

    A cleanly closed directory is described from its checkpoint, after checking that
    the checkpoint matches the files (their sizes and the journal's last record): a
    few small reads, whatever its size. Any other is read with one scan of the journal.
    """
    layout = Layout(path)
    meta = _require_jobdir(layout)
    holder = probe_lock(layout.lock)
    salt = salt_of(meta)
    saved = checkpoint.read_checkpoint(layout.cursor, _ident(meta))
    journal_bytes = os.lstat(layout.journal).st_size
    seen_bytes = os.lstat(layout.seen).st_size if os.path.lexists(layout.seen) else 0
    if holder is not None:
        label = f"in use by pid {holder}" if holder else "in use by another process"
    elif meta["version"] < SALTED_FROM:
        label = f"format {meta['version']} (upgraded to format {FORMAT_VERSION} at the next open)"
    elif saved.clean and saved.journal_bytes == journal_bytes and saved.seen_bytes == seen_bytes:
        label = "clean"
    else:
        label = "needs recovery (it will be rebuilt from the journal at the next open)"
    info = JobInfo(
        path=path, state=label, holder_pid=holder or None, format_version=meta["version"], order=meta["order"],
        created=meta.get("created", ""), pending=0, journal_bytes=journal_bytes,
        queue_bytes=_dir_bytes(layout.queue_dir), seen_bytes=seen_bytes)
    info.compactions = saved.compactions
    if saved.states:
        info.checkpoint_at, info.checkpoint_time = saved.states[0].at, saved.written
    host_state = _host_state(layout, saved) if label == "clean" else None
    if host_state is not None and record_end(layout.journal, saved.last_record, salt) == journal_bytes:
        by_priority, info.done, live = saved.pending, saved.journal_dones, saved.live_bytes + (saved.failed_bytes or 0)
        info.seen = _seen_count(layout.seen, seen_bytes)
        info.hosts = sum(1 for pending in host_state.counts.pending if pending)
        info.delayed, info.next_due = len(host_state.delayed), host_state.delayed.next_due()
        info.failed = len(host_state.failed)
        info.done = sum(host_state.counts.done) - info.failed
        info.paused_since = saved.paused_since
    else:
        now = time.time()
        tail: set[int] = set()  # the journal's fingerprints from the floor on, which requests.seen may lack
        state = _scan(layout, meta, saved, sizes=True, offsets=False, hosts=True,
                      fingerprint=lambda fingerprint: tail.add(key_of(fingerprint)), fingerprints_from=saved.floor)
        by_priority = state.counts
        info.done, live, info.torn_bytes = state.dones, state.live_bytes + state.failed_bytes, state.scan.torn
        info.seen = _seen_count(layout.seen, seen_bytes, exact=True)
        if tail:  # some may be in requests.seen already: at least the larger of the two
            info.seen, info.seen_exact = max(info.seen, len(tail)), False
        info.hosts = sum(1 for count in state.host_pending.values() if count)
        due = state.held_after(now)
        info.delayed, info.next_due = len(due), min(due, default=None)
        info.failed = len(state.failed)
        info.paused_since = state.paused_since
        if state.host_done:  # format 3: each host's count of finished requests, kept across compactions
            info.done = sum(state.host_done)
        info.done -= info.failed
    info.pending = sum(by_priority.values())
    info.pending_by_priority = dict(sorted(by_priority.items(), reverse=True))
    info.live_bytes = live
    info.reclaimable_bytes = max(0, journal_bytes - len(MAGIC) - live)
    return info


STATUS_FRESH = 30.0
"""Seconds after which a holder's ``status.json`` is no longer taken as what it is doing now."""


def published_status(path: str) -> dict[str, Any] | None:
    """What the process holding the job directory at ``path`` published in ``status.json``, if it holds
    it and the file is its own and fresh (``snapshot.snapshot``'s dict); else None."""
    layout = Layout(path)
    holder = probe_lock(layout.lock)
    if not holder:
        return None
    try:
        with open_file(layout.status) as f:
            value = boundedjson.loads(f.read(boundedjson.MAX_JSON_BYTES + 1))
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict) or value.get("pid") != holder or not isinstance(value.get("stats"), dict):
        return None
    taken = value.get("taken")
    if not isinstance(taken, (int, float)) or abs(time.time() - taken) > STATUS_FRESH:
        return None
    return value


def _seen_count(path: str, size: int, *, exact: bool = False) -> int:
    """Fingerprints in the seen file: from its size when every one is a 20-byte sha1 (the
    format diskfrontier writes), else by reading it."""
    if not size:
        return 0
    if not exact:
        with open_file(path) as f:
            head = f.read(2)
        if head == b"\x00\x14" and size % 22 == 0:
            return size // 22
    return count_fingerprints(path)


def _scan(layout: Layout, meta: dict[str, Any], saved: checkpoint.Checkpoint, **options: Any) -> JournalState:
    """One scan of the journal as a recovery reads it: from the newest saved state the checkpoint names that still
    describes the journal (``statefile.py``), then the records after it; else from the journal's start, the part
    the checkpoint vouches for read without each record's checksums. Nothing is written."""
    ident, salt = _ident(meta), salt_of(meta)
    if ident is not None:
        for record in saved.states:
            try:
                start = read_state_file(layout.root, record, ident, salt)
                return read_state(layout.journal, salt=salt, start=start, **options)
            except StateUnusable:
                continue  # replaced by a newer one while this was read, or not this journal's: the next
    return read_state(layout.journal, salt=salt, prefix=_vouched(saved), **options)


def _vouched(saved: checkpoint.Checkpoint) -> tuple[int, int] | None:
    """The start of the journal (length, crc32) that the checkpoint vouches for: read without checking
    each record's checksums when its bytes still have that crc (a directory in use or killed is read
    that way, as its next open would)."""
    return None if saved.journal_crc is None else (saved.floor, saved.journal_crc)


def _host_state(layout: Layout, saved: checkpoint.Checkpoint) -> HostState | None:
    """``requests.hosts`` of a clean checkpoint, or None if it cannot be used."""
    if saved.hosts_file is None:
        return None
    try:
        return load_host_state(layout.hosts, saved.hosts_file)
    except HostFileUnusable:
        return None


def _trusted_queues(layout: Layout, meta: dict[str, Any]) -> tuple[dict[int, int], HostState] | None:
    """The queued count per priority of a cleanly closed directory whose queue files match its
    checkpoint (each file's crc32 is checked) and its host file, or None if its queues cannot be
    read as they are."""
    if meta["version"] < SALTED_FROM or probe_lock(layout.lock) is not None:
        return None
    saved = checkpoint.read_checkpoint(layout.cursor, _ident(meta))
    seen_bytes = os.lstat(layout.seen).st_size if os.path.lexists(layout.seen) else 0
    if distrust_reason(layout, saved, seen_bytes, salt_of(meta)) is not None:
        return None
    host_state = _host_state(layout, saved)
    if host_state is None:
        return None
    queued = {p: n - host_state.delayed.by_priority.get(p, 0) for p, n in saved.pending.items()}
    return {p: n for p, n in queued.items() if n}, host_state


class PendingRequests:
    """The pending requests of a job directory in pop order, read without changing it.

    ``len()`` is their number; iterating reads each from the journal, checked against
    its crc. For a cleanly closed directory the order is read lazily from its queue
    files (whose checksums the checkpoint holds), so the first K requests cost O(K)
    reads; it differs from journal order where requests in flight at the close were
    put back. Otherwise it is the order a frontier rebuilt from the journal would pop
    them in, from one scan of the journal. With ``push_order``, within each priority
    they are in the order they were pushed (the LIFO reversal undone), so that pushing
    them in that order into a directory of the same order gives the same pop order.
    """

    def __init__(self, path: str, *, priority: int | None = None, push_order: bool = False) -> None:
        self.layout = Layout(path)
        meta = _require_jobdir(self.layout)
        self.version: int = journal_format(meta["version"])
        self.salt = salt_of(meta)
        lifo = meta["order"] == "lifo"
        self._parts: list[tuple[int, Callable[[], Iterable[int]]]] = []  # (count, offsets in order) per priority
        found = _trusted_queues(self.layout, meta)
        if found is not None:
            trusted, host_state = found
            for p in sorted(trusted, reverse=True):
                if priority is None or p == priority:
                    self._parts.append((trusted[p], functools.partial(
                        queue_offsets, self.layout.queue_dir, meta["order"], p, trusted[p], oldest_first=push_order)))
            held = [offset for offset, p, _due in host_state.delayed.items() if priority is None or p == priority]
            if held:  # the requests waiting for a time, in the order they become due
                self._parts.append((len(held), functools.partial(iter, held)))
            return
        saved = checkpoint.read_checkpoint(self.layout.cursor, _ident(meta))
        pending = _scan(self.layout, meta, saved).pending
        for p in sorted(pending, reverse=True):
            if priority is None or p == priority:
                offsets = pending[p]
                ordered = offsets[::-1] if lifo and not push_order else offsets
                self._parts.append((len(offsets), functools.partial(iter, ordered)))

    def __len__(self) -> int:
        return sum(count for count, _ in self._parts)

    def __iter__(self) -> Iterator[Request]:
        path = self.layout.journal
        fd = open_fd(path, os.O_RDONLY)
        try:
            for _, offsets in self._parts:
                for offset in offsets():
                    yield _request_at(fd, offset, path, self.salt, self.version)
        finally:
            os.close(fd)


def _request_at(fd: int, offset: int, path: str, salt: int, version: int) -> Request:
    """The request of the record at ``offset`` of the journal open as ``fd``, checked against its crc."""
    body = read_record(fd, offset, path, salt, version)
    try:
        return request_of(body, version)
    except ValueError as exc:  # UnicodeDecodeError included
        raise JobDirCorrupt(path, offset, str(exc)) from None


class FailedRequests:
    """The failed requests of a job directory (not requeued), oldest failure first, read without changing it.

    ``len()`` is their number; iterating reads each request and its FAIL record from the
    journal, checked against their crcs, so the first K cost O(K) reads. For a cleanly
    closed directory that no process holds, the list comes from ``requests.hosts`` (whose
    crc32 the checkpoint holds); otherwise from one scan of the journal (a live crawl's
    failures up to the moment of the scan).
    """

    def __init__(self, path: str) -> None:
        self.layout = layout = Layout(path)
        meta = _require_jobdir(layout)
        self._entries: list[tuple[int, int]] = []  # (request offset, FAIL record offset)
        self.version: int = journal_format(meta["version"])
        self.salt = salt = salt_of(meta)
        if self.version < 3:
            return  # formats 1 and 2 have no FAIL records
        saved = checkpoint.read_checkpoint(layout.cursor, _ident(meta))
        journal_bytes = os.lstat(layout.journal).st_size
        host_state = None
        if saved.clean and saved.journal_bytes == journal_bytes and probe_lock(layout.lock) is None:
            host_state = _host_state(layout, saved)
        if host_state is not None and record_end(layout.journal, saved.last_record, salt) == journal_bytes:
            self._entries = list(host_state.failed.items())
        else:
            self._entries = list(_scan(layout, meta, saved, offsets=False).failed.items())

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[FailedRequest]:
        return self._read(self._entries)

    def latest(self, count: int) -> Iterator[FailedRequest]:
        """The last ``count`` failures, oldest first: only their records are read."""
        return self._read(self._entries[max(0, len(self._entries) - count):])

    def _read(self, entries: list[tuple[int, int]]) -> Iterator[FailedRequest]:
        path = self.layout.journal
        fd = open_fd(path, os.O_RDONLY)
        try:
            for target, record_at in entries:
                info = read_fail(fd, record_at, path, target, self.salt, self.version)
                request = _request_at(fd, target, path, self.salt, self.version)
                request.not_before = None
                yield FailedRequest(request, info.error, info.failed_at)
        finally:
            os.close(fd)


def failed_requests(path: str) -> FailedRequests:
    """The failed requests of the job directory at ``path``, oldest failure first (read-only); see
    ``FailedRequests``."""
    return FailedRequests(path)


@dataclass(frozen=True)
class HostRow:
    """One host of a crawl as ``diskfrontier hosts`` shows it (``host_table``: of a job directory)."""

    host: str
    pending: int
    done: int
    delay: float | None  # None: the frontier's delay
    blocked_until: float | None
    budget: int | None
    in_flight: int | None = None  # None: not known (a job directory read without its lock counts them as pending)
    failures: int = 0  # consecutive failures (``host_failed``) since the host's last done request

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict; ``in_flight`` only when it is known."""
        data = dict(self.__dict__)
        if self.in_flight is None:
            del data["in_flight"]
        return data


def host_table(path: str) -> list[HostRow]:
    """Every host of the job directory at ``path`` with pending or done requests, a setting or
    failures (read-only: from ``requests.hosts`` after a clean close, else from one scan of the
    journal; the failures from ``hosts.health``)."""
    rows = _host_rows(path)
    failing = read_health(Layout(path).health)
    if not failing:
        return rows
    out = [dataclasses.replace(row, failures=failing.pop(row.host)) if row.host in failing else row for row in rows]
    return out + [HostRow(host, 0, 0, None, None, None, failures=count) for host, count in sorted(failing.items())]


def _host_rows(path: str) -> list[HostRow]:
    layout = Layout(path)
    meta = _require_jobdir(layout)
    if meta["version"] < 3:
        raise FrontierError(f"{path} is a format-{meta['version']} job directory, which has no hosts: open it "
                            f"once (any command that opens it, or Frontier()) to upgrade it")
    saved = checkpoint.read_checkpoint(layout.cursor, _ident(meta))
    journal_bytes = os.lstat(layout.journal).st_size
    host_state = _host_state(layout, saved) if saved.clean and saved.journal_bytes == journal_bytes else None
    if host_state is not None and probe_lock(layout.lock) is None:
        counts = host_state.counts
        settings = {hid: (delay, blocked, budget) for hid, delay, blocked, budget in host_state.settings}
        rows: list[HostRow] = []
        for hid in counts.ids():
            own_delay, until, own_budget = settings.get(hid, (None, 0.0, None))
            if counts.pending[hid] or counts.done[hid] or hid in settings:
                rows.append(HostRow(counts.name(hid), counts.pending[hid], counts.done[hid], own_delay,
                                    until or None, own_budget))
        return rows
    state = _scan(layout, meta, saved, offsets=False, hosts=True)
    rows = []
    for hid, raw in enumerate(state.host_names):
        record = state.host_settings.get(hid)
        delay = None if record is None or record.delay != record.delay else record.delay
        blocked = record.blocked_until or None if record is not None else None
        budget = None if record is None or record.budget < 0 else record.budget
        pending, done = state.host_pending.get(hid, 0), state.host_done[hid]
        if pending or done or delay is not None or blocked or budget is not None:
            rows.append(HostRow(raw.decode("utf-8", "replace"), pending, done, delay, blocked, budget))
    return rows


def pending_requests(path: str, *, priority: int | None = None, push_order: bool = False) -> PendingRequests:
    """Pending requests in pop order, or push order (read-only); see ``PendingRequests``."""
    return PendingRequests(path, priority=priority, push_order=push_order)


def seen_fingerprints(path: str) -> Iterator[bytes]:
    """Every fingerprint of the job directory's ``requests.seen`` (read-only)."""
    layout = Layout(path)
    _require_jobdir(layout)
    if not os.path.lexists(layout.seen):
        return iter(())
    with open_file(layout.seen) as f:
        data = f.read()
    return fingerprints_in(data)


def all_seen_fingerprints(path: str) -> Iterator[bytes]:
    """Every seen fingerprint of the job directory (read-only): ``requests.seen``, then those of the
    journal's PUSH records that the seen file may not have received yet (after a crash, or while
    a crawl holds the directory), read from the checkpoint's floor on as recovery reads them.
    A fingerprint may come twice (in the seen file and in the journal's tail)."""
    yield from seen_fingerprints(path)
    layout = Layout(path)
    meta = _require_jobdir(layout)
    saved = checkpoint.read_checkpoint(layout.cursor, _ident(meta))
    journal_bytes = os.lstat(layout.journal).st_size
    if saved.clean and saved.journal_bytes == journal_bytes and probe_lock(layout.lock) is None:
        return  # a clean close flushed the seen file: it holds them all
    tail: list[bytes] = []
    _scan(layout, meta, saved, fingerprint=lambda fingerprint: tail.append(bytes(fingerprint)),
          fingerprints_from=saved.floor, offsets=False)
    yield from tail


__all__ = ["FailedRequests", "HostRow", "JobInfo", "PendingRequests", "all_seen_fingerprints", "failed_requests",
           "host_table", "inspect_jobdir", "pending_requests", "seen_fingerprints"]
