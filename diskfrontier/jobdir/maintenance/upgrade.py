"""Upgrading a job directory of format 1 to 5 to format 6, in place, when it is opened.

Format 4 or 5 to 6 rewrites ``frontier.json``'s version only: format 5 adds three record
types (PAUSE, DROP, MARK) to the same files, and format 6 a request's revisit state to its
request record; an older release must not read either. The rest of this docstring is the
upgrade of formats 1 to 3.

Format 1 journals have no record identity inside their checksums and format-1 seen
files have no block checksums; format-2 PUSH records have no slot, attempts or
not_before; format-3 checksums hold the record's offset but not the directory's salt.
The upgrade, under the directory's lock:

0. gives ``frontier.json`` an ``id`` (16 random hex digits) if it has none, keeping
   its version: the salt of every file written from here on;
1. format 1 or 2: adds every fingerprint of the old journal to ``requests.seen`` (a
   seen file may lag its journal) and writes its unsalted ``requests.seen.sums``,
   fsynced; then writes a new format-4 journal and renames it over the old one: a HOST
   record with the count of done requests of each host, then each pending request as
   a PUSH record whose slot is its URL's host (compaction: the DONE records are no
   longer needed). Format 3: every record is checked and framed again, at the same
   offset, with the salt (a new file renamed over the old one);
2. checks ``requests.seen`` against its unsalted sums and writes salted ones;
3. marks the checkpoint so that the queues are rebuilt from the new journal;
4. writes ``frontier.json`` with version 6, last.

Each step is told done by what it wrote (the journal's magic, the sums file's magic),
so killed at any point, the next open finds the old journal (the upgrade starts again;
the seen file only gained fingerprints) or the new one under an older
``frontier.json`` (the upgrade finishes the steps after it).
"""

from __future__ import annotations

import contextlib
import logging
import os
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator

from ...core.errors import JobDirCorrupt
from ...files import boundedjson
from ...files.atomic import fsync_dir, write_all, write_json_atomic
from ...files.safefs import create_exclusive, open_file
from ...files.writeerrors import naming
from ...request.model import host_of
from .. import checkpoint
from ..journal import MAGIC, JournalScan, journal_version
from ..layout import FORMAT_VERSION, SALTED_FROM, Layout, fold_id, new_id
from ..records import DONE, FRAME, Pushed, done_target, frame, host_body, kind_of, parse_push, push_body
from ..recovery import save_torn_tail
from ..replay import Progress
from ..seen import BLOCK, SUMS_MAGIC, SeenFile, block_crc, check_seen_file, read_sums, write_sums

log = logging.getLogger("diskfrontier")


def install(path: str, tmp_path: str) -> None:
    """Move the new journal over the old one (atomic), and make the rename durable."""
    os.replace(tmp_path, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def upgrade_journal(layout: Layout, progress: Progress | None = None) -> None:
    """Upgrade the job directory of ``layout`` to the current format (see the module docstring)."""
    with open_file(layout.meta) as f:
        meta = boundedjson.loads(f.read(boundedjson.MAX_JSON_BYTES + 1))
    if meta.get("version", 0) >= SALTED_FROM:  # format 4 or 5: the same files; 5 and 6 add to the records
        meta["version"] = FORMAT_VERSION
        write_json_atomic(layout.meta, meta)
        log.info("upgraded %s to job directory format %d", layout.root, FORMAT_VERSION)
        return
    if "id" not in meta:
        meta["id"] = new_id()
        write_json_atomic(layout.meta, meta)
    salt = fold_id(meta["id"])
    with open_file(layout.journal) as f:
        head = f.read(len(MAGIC))
        size = os.fstat(f.fileno()).st_size
    version = journal_version(layout.journal, head, size)
    if version < 3:
        kept, dropped = _rewrite(layout, version, progress, salt)
        log.warning("upgraded %s to job directory format %d: %s pending requests kept, %s finished records dropped",
                    layout.root, FORMAT_VERSION, f"{kept:,}", f"{dropped:,}")
    elif version == 3:
        records = _resalt_journal(layout, salt, progress)
        log.warning("upgraded %s to job directory format %d: %s records now hold the directory's id",
                    layout.root, FORMAT_VERSION, f"{records:,}")
    _resalt_seen(layout, salt)
    checkpoint.write_repaired(layout.cursor, meta["id"])
    meta["version"] = FORMAT_VERSION
    write_json_atomic(layout.meta, meta)


def _resalt_journal(layout: Layout, salt: int, progress: Progress | None) -> int:
    """Check every record of a format-3 journal and write it again, at the same offset, framed with ``salt``."""
    scan = JournalScan(layout.journal, salt=0)
    records = 0

    def framed() -> Iterator[bytes]:
        nonlocal records
        for offset, body in scan:
            yield frame(offset, bytes(body), salt)
            records += 1
            if progress is not None and records % 65536 == 0:
                progress(offset, scan.result.size)
        if scan.result.torn:
            save_torn_tail(layout.journal, scan.result.end)

    _write_journal(layout, framed())
    return records


def _write_journal(layout: Layout, framed: Iterable[bytes]) -> None:
    """Write the magic and the ``framed`` records to a new file, fsync it and rename it over the journal (a
    failed write, e.g. a full disk, is named; the old journal stands and the next open starts again)."""
    with naming(layout.compacting, "free space on its disk and open the job directory again: the upgrade starts "
                                   "again from the old journal"):
        _write_new(layout, framed)
    install(layout.journal, layout.compacting)


def _write_new(layout: Layout, framed: Iterable[bytes]) -> None:
    fd = create_exclusive(_fresh(layout.compacting))
    try:
        out = bytearray(MAGIC)
        for piece in framed:
            out += piece
            if len(out) >= 1 << 20:
                write_all(fd, out)
                out = bytearray()
        write_all(fd, out)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(layout.compacting)
        raise
    os.close(fd)


def _resalt_seen(layout: Layout, salt: int) -> None:
    """Check ``requests.seen`` against its unsalted sums and replace them with sums that hold ``salt``."""
    try:
        with open_file(layout.seen_sums) as f:
            if f.read(len(SUMS_MAGIC)) == SUMS_MAGIC:
                return  # done by an upgrade that was killed after it
    except FileNotFoundError:
        pass
    old = read_sums(layout.seen_sums, 0)
    if not os.path.lexists(layout.seen):
        write_sums(layout.seen_sums, [], salt)
        return
    check = check_seen_file(layout.seen, old or [], None, 0)
    if old is None and check.end:
        raise JobDirCorrupt(layout.seen_sums, 0, "missing: the checksums of requests.seen are gone",
                            hint=f"run 'diskfrontier verify --repair {layout.root}' and open it again")
    if check.problem is not None:
        raise check.problem
    sums = []
    with open_file(layout.seen) as f:
        for index in range(check.end // BLOCK):
            sums.append(block_crc(index, f.read(BLOCK), salt))
    write_sums(layout.seen_sums, sums, salt)


def _rewrite(layout: Layout, version: int, progress: Progress | None, salt: int) -> tuple[int, int]:
    seen = SeenFile(layout.seen, 0)  # its sums get the salt in the next step
    seen.open(require_sums=False)
    offsets = array("Q")  # every PUSH, in journal order
    host_ids = array("I")
    alive = bytearray()
    names: dict[str, int] = {}
    done = [0]
    records = 0
    try:
        scan = JournalScan(layout.journal, salt=0)
        for offset, body in scan:
            records += 1
            if kind_of(body) == DONE:
                target = done_target(body)
                i = bisect_left(offsets, target)
                if target >= offset or i == len(offsets) or offsets[i] != target or not alive[i]:
                    raise JobDirCorrupt(layout.journal, offset, f"a DONE record names byte {target}, where no "
                                        f"pending PUSH record starts")
                alive[i] = 0
                done[host_ids[i]] += 1
                continue
            pushed = parse_push(body, version)
            if not pushed.dont_filter:
                seen.add(pushed.fingerprint)
            url = _url(layout.journal, offset, pushed)
            hid = names.setdefault(host_of(url) or "-", len(names))
            if hid == len(done):
                done.append(0)
            offsets.append(offset)
            host_ids.append(hid)
            alive.append(1)
            if progress is not None and records % 65536 == 0:
                progress(offset, 2 * scan.result.size)
        seen.sync()
    finally:
        seen.close()
    if scan.result.torn:
        save_torn_tail(layout.journal, scan.result.end)
    kept = 0

    def framed() -> Iterator[bytes]:
        nonlocal kept
        position = len(MAGIC)
        for name, hid in names.items():
            if done[hid]:
                record = host_body(name.encode(), float("nan"), 0.0, -1, done[hid])
                yield frame(position, record, salt)
                position += FRAME.size + len(record)
        for offset, old in JournalScan(layout.journal, salt=0):
            if kind_of(old) == DONE:
                continue
            i = bisect_left(offsets, offset)
            if not alive[i]:
                continue
            pushed = parse_push(old, version)
            name = host_of(_url(layout.journal, offset, pushed)) or "-"
            new = push_body(pushed.priority, pushed.dont_filter, pushed.fingerprint, bytes(pushed.record),
                            slot=name.encode())
            yield frame(position, new, salt)
            position += FRAME.size + len(new)
            kept += 1

    _write_journal(layout, framed())
    return kept, records - kept


def _fresh(path: str) -> str:
    if os.path.lexists(path):
        os.unlink(path)  # left by an upgrade or compaction that was killed: the old journal stands
    return path


def _url(path: str, offset: int, pushed: Pushed) -> str:
    try:
        return pushed.request().url
    except ValueError as exc:
        raise JobDirCorrupt(path, offset, str(exc)) from None
