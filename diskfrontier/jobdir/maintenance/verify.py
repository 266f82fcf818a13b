"""``verify``: check every record of every file of a job directory; ``repair`` keeps the intact ones.

Verification only reads. It uses the same checked scan as recovery (``jobdir/replay.py``), so
anything an open would refuse, verify names, and the other way round. Repair rewrites
a damaged journal with every intact record (each framed again for its new offset,
DONE, FAIL and RETRY records pointed at their target's new offset, DONE and FAIL
records that name nothing or what they may not name dropped: a failed request stays
failed), rewrites the seen file with every fingerprint that still parses plus every
fingerprint of the journal, with fresh checksums (each file replaced atomically), and
marks the checkpoint so that the next open rebuilds the queues from the repaired
journal.

Every pending (and failed) request is also decoded and checked as ``pop`` would
(``rejects.py``): one that cannot be served is named, and repair writes it to a side file
(``requests.urls.rejected-<time>``) and rewrites the journal without it (a RETRY or
REFETCH set aside still finishes the request it replaced), so that a drain after the
repair hands out every good request and nothing bad.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

from ...core.errors import FormatError, FrontierError, JobDirCorrupt
from ...files.atomic import write_all, write_atomic
from ...files.safefs import create_aside, open_file
from ...files.writeerrors import naming
from .. import checkpoint
from ..hostfile import HostFileUnusable, load_host_state
from ..identity import foreign_meta, foreign_meta_problem
from ..journal import MAGIC, JournalScan, journal_version
from ..layout import FORMAT_VERSION, SALTED_FROM, Layout, Lock, fold_id, journal_format, read_meta
from ..queues import distrust_reason, queue_offsets, queue_path
from ..records import (
    CARRIES_REQUEST,
    DONE,
    FAIL,
    HOST,
    PUSH,
    REQUEUES,
    as_push,
    done_body,
    done_target,
    fail_body,
    frame,
    kind_of,
    parse_fail,
    parse_push,
    requeue_target,
    retargeted,
)
from ..replay import JournalState, Progress, read_state
from ..seen import BLOCK, check_seen_file, read_sums, sums_of, write_sums
from ..statefile import StateUnusable, read_state_file, summary
from .rejects import find_unservable, write_rejected

PROGRESS_EVERY = 1 << 16
_LISTED = 100  # requests that cannot be served named one by one; the side file lists them all


@dataclass
class Finding:
    """One piece of damage: where it is and what is wrong."""

    file: str
    offset: int
    problem: str

    def __str__(self) -> str:
        return f"{self.file} at byte {self.offset}: {self.problem}"


@dataclass
class Report:
    """What verify found (and, with repair, what it did)."""

    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    records: int = 0
    dropped_bytes: int = 0
    repaired: bool = False
    set_aside: list[str] = field(default_factory=list)  # side files written by repair

    @property
    def sound(self) -> bool:
        return not self.findings


def verify(path: str | os.PathLike[str], *, repair: bool = False, progress: Progress | None = None) -> Report:
    """Check the job directory at ``path``; with ``repair``, rewrite what is damaged.

    ``progress(done, total)`` is called now and then during the journal scan (bytes).
    """
    layout = Layout(os.fspath(path))
    report = Report()
    lock = None
    if repair:
        lock = Lock(layout.lock)
        lock.acquire()
    try:
        version, ident = _check_meta(layout, report)
        salt = fold_id(ident) if ident is not None and version >= SALTED_FROM else 0
        saved = checkpoint.read_checkpoint(layout.cursor, ident if version >= SALTED_FROM else None)
        state = _check_journal(layout, report, saved, repair, progress, salt, ident)
        if state is not None:
            state = _check_requests(layout, report, state, version, repair, salt, ident)
        if version >= 2:
            _check_seen(layout, report, saved, state, repair, salt, ident)
        if state is not None and version >= SALTED_FROM:
            _check_queues(layout, report, saved, state, salt)
            _check_states(layout, report, saved, salt, ident)
        if saved.out_of_range:  # intact, yet holding what no close writes: damage, not a crash's leftover
            report.findings.append(Finding(layout.cursor, 0, f"{saved.problem}; repair marks it for a rebuild"))
        elif saved.problem is not None and saved.state != "missing":
            report.notes.append(f"{layout.cursor}: {saved.problem}; the queues will be rebuilt from the journal at "
                                f"the next open")
        if repair and report.findings:
            checkpoint.write_repaired(layout.cursor, ident)
            report.repaired = True
    finally:
        if lock is not None:
            lock.release()
    return report


def _check_meta(layout: Layout, report: Report) -> tuple[int, str | None]:
    """The directory's format and the id its records hold: ``frontier.json``'s, unless it names another
    directory's (then the id its cursor and journal hold, and a finding); without a readable
    ``frontier.json``, the id its cursor names (a format-4 journal cannot be checked without one)."""
    try:
        meta = read_meta(layout)
    except FileNotFoundError:
        report.findings.append(Finding(layout.meta, 0, "missing: not a diskfrontier job directory"))
    except FormatError:
        raise
    except FrontierError as exc:
        report.findings.append(Finding(layout.meta, 0, str(exc)))
    else:
        version: int = meta["version"]
        if version < FORMAT_VERSION:
            report.notes.append(f"{layout.root}: format {version}, upgraded to format {FORMAT_VERSION} when it is "
                                f"next opened")
        if version < SALTED_FROM:
            return version, None
        ident: str = meta["id"]
        named = foreign_meta(layout, ident)
        if named is None:
            return version, ident
        problem, advice = foreign_meta_problem(ident, named)
        report.findings.append(Finding(layout.meta, 0, f"{problem}; {advice}"))
        return version, named
    named = checkpoint.named_id(layout.cursor)
    if named is None and (_journal_version(layout) or 0) >= SALTED_FROM:
        raise UnknownId(f"{layout.root}: neither frontier.json nor requests.cursor names the job directory's id, "
                        f"which every journal record's checksum holds, so the journal cannot be checked; restore "
                        f"frontier.json from a backup")
    return FORMAT_VERSION, named


class UnknownId(FrontierError):
    """The id that a job directory's checksums hold cannot be told, so its records cannot be checked."""


def _journal_version(layout: Layout) -> int | None:
    """The format of the journal's magic, None if it has none."""
    try:
        with open_file(layout.journal) as f:
            return journal_version(layout.journal, f.read(len(MAGIC)), os.fstat(f.fileno()).st_size)
    except (OSError, FrontierError):
        return None


def _check_journal(
    layout: Layout, report: Report, saved: checkpoint.Checkpoint, repair: bool, progress: Progress | None, salt: int,
    ident: str | None,
) -> JournalState | None:
    if not os.path.lexists(layout.journal):
        report.findings.append(Finding(layout.journal, 0, "missing: the pending requests are gone"))
        if repair:
            _about_to_rewrite(layout, ident)
            write_atomic(layout.journal, MAGIC)
        return None
    try:
        state = read_state(layout.journal, salt=salt, floor=saved.floor, repair=True, progress=progress,
                           offsets=False)
    except JobDirCorrupt as exc:  # bad magic or empty file: nothing in it can be trusted
        report.findings.append(Finding(layout.journal, exc.offset, exc.problem))
        if repair:
            _set_aside(layout.journal)
            _about_to_rewrite(layout, ident)
            write_atomic(layout.journal, MAGIC)
        return None
    scan = state.scan
    report.records = state.pushes + state.dones + len(state.bad_dones)
    if scan.size < saved.floor:
        report.findings.append(Finding(layout.journal, scan.size, f"the journal is {scan.size:,} bytes, but it held "
                                       f"{saved.floor:,} at its last checkpoint: it was truncated"))
    for damage in scan.damage:
        problem = f"{damage.problem} ({damage.length} bytes skipped)"
        report.findings.append(Finding(layout.journal, damage.offset, problem))
        report.dropped_bytes += damage.length
    for offset, problem in state.bad_dones[:20]:
        report.findings.append(Finding(layout.journal, offset, problem))
    if scan.torn:
        report.notes.append(f"{layout.journal}: a torn last record of {scan.torn} bytes at byte {scan.end} "
                            f"(normal after a crash; cut at the next open)")
    if repair and (scan.damage or state.bad_dones or scan.size < saved.floor):
        _about_to_rewrite(layout, ident)
        _rewrite_journal(layout.journal, {offset for offset, _ in state.bad_dones}, salt)
        return read_state(layout.journal, salt=salt, repair=True, offsets=False)
    return state


def _check_requests(
    layout: Layout, report: Report, state: JournalState, version: int, repair: bool, salt: int, ident: str | None,
) -> JournalState:
    """Decode every pending and failed request; with ``repair``, set aside those that cannot be served."""
    rejected = find_unservable(layout.journal, state, journal_format(version), salt)
    for item in rejected[:_LISTED]:
        report.findings.append(Finding(layout.journal, item.offset, f"a request that cannot be served: {item.problem}"))
    if len(rejected) > _LISTED:
        report.findings.append(Finding(layout.journal, rejected[_LISTED].offset,
                                       f"and {len(rejected) - _LISTED:,} more requests that cannot be served"))
    if not (repair and rejected):
        return state
    name = write_rejected(layout.root, rejected)
    report.set_aside.append(name)
    report.notes.append(f"{name}: the {len(rejected):,} requests that cannot be served, set aside (JSON lines: "
                        f"offset, problem, url, record in base64); the journal no longer holds them")
    _about_to_rewrite(layout, ident)
    _rewrite_journal(layout.journal, set(), salt, {item.offset for item in rejected})
    return read_state(layout.journal, salt=salt, repair=True, offsets=False)


def _about_to_rewrite(layout: Layout, ident: str | None) -> None:
    """Before a file is rewritten: from now on the next open rebuilds everything from zero.

    A rewritten journal moves records below the checkpoint's floor (recovery re-adds
    fingerprints only from the floor on) and a rewritten seen file outdates the saved
    index, so a repair killed half-way must not leave the old checkpoint standing.
    """
    checkpoint.write_repaired(layout.cursor, ident)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(layout.seen_index)


def _rewrite_journal(
    path: str, bad_dones: set[int], salt: int, rejected: frozenset[int] | set[int] = frozenset(),
) -> None:
    """Rewrite the journal with every intact record, framed for its new place (in its own format).

    The request records at the ``rejected`` offsets are left out: what names them goes too,
    and a RETRY or REFETCH left out becomes the DONE of the request it finished.
    """
    with open_file(path) as f:
        magic = f.read(len(MAGIC))
    out = bytearray(magic)
    moved: dict[int, int] = {}  # old PUSH offset -> its offset in the repaired journal
    failed: set[int] = set()  # new offsets of the requests failed so far
    for offset, body in JournalScan(path, salt=salt, repair=True):
        kind = kind_of(body)
        if offset in rejected:
            target = requeue_target(body) if kind in REQUEUES else None
            if target is None or target not in moved or moved[target] in failed:
                continue  # nothing finished by it (a failed request it gave back stays failed)
            body = memoryview(done_body(moved[target]))  # what it finished stays finished
        elif kind == HOST:
            pass
        elif kind == DONE:
            if offset in bad_dones or done_target(body) not in moved:
                continue  # names nothing (or its PUSH was lost): nothing left to mark done
            body = memoryview(done_body(moved[done_target(body)]))
        elif kind == FAIL:
            failure = parse_fail(body)
            if offset in bad_dones or failure.target not in moved:
                continue  # names nothing pending (or its request was lost): nothing left to mark failed
            body = memoryview(fail_body(moved[failure.target], failure.failed_at, failure.error.encode("utf-8")))
            failed.add(moved[failure.target])
        elif kind != PUSH:  # a RETRY or REFETCH: a PUSH, and the DONE of its target
            target = requeue_target(body)
            moved[offset] = len(out)
            if offset in bad_dones or target not in moved:
                body = memoryview(as_push(body))  # what it finished is gone
            else:
                body = memoryview(retargeted(body, moved[target]))
                failed.discard(moved[target])
        else:
            moved[offset] = len(out)
        out += frame(len(out), bytes(body), salt if magic == MAGIC else 0)
    _set_aside(path)
    write_atomic(path, bytes(out))


def _set_aside(path: str) -> None:
    """Keep a copy of a damaged file beside it (``<file>.damaged``, a new name) before it is rewritten."""
    with open_file(path) as src:
        data = src.read()
    with naming(f"{path}.damaged"):
        fd, _name = create_aside(f"{path}.damaged")
        try:
            write_all(fd, data)
        finally:
            os.close(fd)


def _check_seen(
    layout: Layout, report: Report, saved: checkpoint.Checkpoint, state: JournalState | None, repair: bool, salt: int,
    ident: str | None,
) -> None:
    problems: list[Finding] = []
    try:
        sums = read_sums(layout.seen_sums, salt)
    except JobDirCorrupt as exc:
        problems.append(Finding(exc.file, exc.offset, exc.problem))
        sums = []
    check = check_seen_file(layout.seen, sums or [], saved.seen_tail, salt)
    if check.problem is not None:
        problems.append(Finding(check.problem.file, check.problem.offset, check.problem.problem))
    elif check.torn:
        report.notes.append(f"{layout.seen}: a torn last fingerprint of {check.torn} bytes (cut at the next open)")
    if sums is None:
        if check.end:
            problems.append(Finding(layout.seen_sums, 0, "missing: the checksums of requests.seen are gone"))
    elif saved.seen_tail is not None and len(sums) < saved.seen_tail[0] // BLOCK:
        problems.append(Finding(layout.seen_sums, 0, f"it holds {len(sums)} checksums, but requests.seen had "
                                                     f"{saved.seen_tail[0] // BLOCK} complete blocks at the last "
                                                     f"checkpoint: it was truncated"))
    report.findings += problems
    if repair and problems:
        data = b""
        if os.path.lexists(layout.seen):
            with open_file(layout.seen) as f:
                data = f.read()
        _about_to_rewrite(layout, ident)
        _rewrite_seen(layout, data, state, salt)


def _usual_width(data: bytes) -> int:
    """The fingerprint width of a seen file: 20 (sha1, all diskfrontier writes) unless most
    records say otherwise. The first length field alone may be the damaged one."""
    widths: dict[int, int] = {}
    for width in {20, int.from_bytes(data[:2], "big")} - {0}:
        step = 2 + width
        head = width.to_bytes(2, "big")
        widths[width] = sum(data[i:i + 2] == head for i in range(0, min(len(data), 4096 * step), step))
    return max(widths, key=lambda w: (widths[w], w == 20)) if widths else 20


def _rewrite_seen(layout: Layout, data: bytes, state: JournalState | None, salt: int) -> None:
    """Every fingerprint that still parses, plus every fingerprint of the journal, with fresh sums."""
    width = _usual_width(data)
    out = bytearray()
    pos = 0
    while pos + 2 + width <= len(data):
        if int.from_bytes(data[pos:pos + 2], "big") == width:
            out += data[pos:pos + 2 + width]
            pos += 2 + width
        else:
            pos += 1
    if state is not None:
        have = {bytes(out[i + 2:i + 2 + width]) for i in range(0, len(out), 2 + width)}
        with open_file(layout.journal) as f:
            version = journal_version(layout.journal, f.read(len(MAGIC)), os.fstat(f.fileno()).st_size)
        for _offset, body in JournalScan(layout.journal, salt=salt, repair=True):
            kind = kind_of(body)
            if kind in CARRIES_REQUEST and (version >= 3 or kind == PUSH):
                pushed = parse_push(body, version)
                if pushed.dont_filter:
                    continue
                fingerprint = pushed.fingerprint
                if fingerprint not in have:
                    have.add(fingerprint)
                    out += len(fingerprint).to_bytes(2, "big") + fingerprint
    if os.path.lexists(layout.seen):
        _set_aside(layout.seen)
    write_atomic(layout.seen, bytes(out))
    write_sums(layout.seen_sums, sums_of(bytes(out), salt), salt)


def _check_states(layout: Layout, report: Report, saved: checkpoint.Checkpoint, salt: int, ident: str | None) -> None:
    """Each saved state the checkpoint names must say what a scan of the journal up to its offset says: a recovery
    that starts from it must rebuild what one from the journal's start would."""
    if ident is None:
        return
    for record in saved.states:
        path = os.path.join(layout.root, record.name)
        try:
            stored = read_state_file(layout.root, record, ident, salt)
            scanned = read_state(layout.journal, salt=salt, until=record.at, save=ident, sizes=True, hosts=True,
                                 offsets=False).saved
        except StateUnusable as exc:
            report.notes.append(f"{path}: not used ({exc}); a recovery reads the journal from its start instead")
            continue
        except JobDirCorrupt:
            continue  # the journal's damage is named by its own check
        if scanned is None or summary(stored) != summary(scanned):
            report.findings.append(Finding(path, 0, f"it does not say what the journal says up to byte {record.at:,} "
                                                    f"(a recovery would start from a wrong state); repair leaves it "
                                                    f"out"))


def _check_queues(
    layout: Layout, report: Report, saved: checkpoint.Checkpoint, state: JournalState, salt: int,
) -> None:
    if not saved.clean:
        report.notes.append(f"{layout.cursor}: {saved.problem or saved.state}; the queues will be rebuilt from the "
                            f"journal at the next open")
        return
    seen_bytes = os.lstat(layout.seen).st_size if os.path.lexists(layout.seen) else 0
    distrust = distrust_reason(layout, saved, seen_bytes, salt)
    if distrust is not None and state.scan.torn and state.scan.end == saved.journal_bytes:
        report.notes.append(f"{distrust[0]}: {distrust[1]}; the queues will be rebuilt at the next open")
    elif distrust is not None:
        report.findings.append(Finding(distrust[0], 0, distrust[1]))
        return
    try:
        held = load_host_state(layout.hosts, saved.hosts_file) if saved.hosts_file else None
    except HostFileUnusable as exc:
        report.notes.append(f"{exc}; it is rebuilt from the journal at the next open")
        return
    if held is not None and list(held.failed.items()) != list(state.failed.items()):
        report.findings.append(Finding(layout.hosts, 0, f"it lists {len(held.failed):,} failed requests that are not "
                                                        f"the {len(state.failed):,} of the journal's FAIL records"))
    queued = dict(saved.pending)
    if held is not None:
        for priority, count in held.delayed.by_priority.items():
            queued[priority] = queued.get(priority, 0) - count
    taken = bytearray(len(state.order))  # a pending request named by a queue entry already
    for priority, count in queued.items():
        if count <= 0:
            continue
        qpath = queue_path(layout.queue_dir, priority)
        order = "fifo" if os.path.isdir(qpath) else "lifo"
        try:
            for offset in queue_offsets(layout.queue_dir, order, priority, count, oldest_first=True):
                found = state.find_pending(offset)
                if found is None or found[1] != priority or taken[found[0]]:
                    what = ("which is not a pending PUSH" if found is None else
                            f"a PUSH of priority {found[1]}" if found[1] != priority else "a second time")
                    report.findings.append(Finding(qpath, 0, f"an entry names journal offset {offset}, {what}"))
                    break
                taken[found[0]] = 1
        except JobDirCorrupt as exc:
            report.findings.append(Finding(exc.file, exc.offset, exc.problem))
