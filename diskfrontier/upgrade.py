"""Upgrading a format-1 or format-2 job directory to format 3, in place, when it is opened.

Format 1 journals have no record identity inside their checksums and format-1 seen
files have no block checksums; format-2 PUSH records have no slot, attempts or
not_before. The upgrade, under the directory's lock:

1. adds every fingerprint of the old journal to ``requests.seen`` (a seen file may
   lag its journal) and writes ``requests.seen.sums``, fsynced;
2. writes a new format-3 journal and renames it over the old one: a HOST record with
   the count of done requests of each host, then each pending request as a PUSH
   record whose slot is its URL's host (compaction: the DONE records are no longer
   needed);
3. marks the checkpoint so that the queues are rebuilt from the new journal;
4. writes ``frontier.json`` with version 3, last.

Killed at any point, the next open finds either the old journal (the upgrade starts
again; the seen file only gained fingerprints) or the new one under an older
``frontier.json`` (the upgrade only finishes steps 3 and 4).
"""

from __future__ import annotations

import contextlib
import logging
import os
from array import array
from bisect import bisect_left

from . import boundedjson, checkpoint
from .atomic import fsync_dir, write_all, write_json_atomic
from .codec import decode_request
from .errors import JobDirCorrupt
from .jobdir import FORMAT_VERSION, Layout
from .journal import (
    DONE,
    FRAME,
    MAGIC,
    JournalScan,
    Pushed,
    done_target,
    frame,
    host_body,
    journal_version,
    parse_push,
    push_body,
)
from .recovery import save_torn_tail
from .request import host_of
from .safefs import create_exclusive, open_file
from .seen import SeenFile
from .state import Progress

log = logging.getLogger("diskfrontier")


def install(path: str, tmp_path: str) -> None:
    """Move the new journal over the old one (atomic), and make the rename durable."""
    os.replace(tmp_path, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def upgrade_journal(layout: Layout, progress: Progress | None = None) -> None:
    """Upgrade the job directory of ``layout`` to format 3 (see the module docstring)."""
    with open_file(layout.journal) as f:
        head = f.read(len(MAGIC))
        size = os.fstat(f.fileno()).st_size
    version = journal_version(layout.journal, head, size)
    if version < 3:
        kept, dropped = _rewrite(layout, version, progress)
        log.warning("upgraded %s to job directory format %d: %s pending requests kept, %s finished records dropped",
                    layout.root, FORMAT_VERSION, f"{kept:,}", f"{dropped:,}")
    checkpoint.write_repaired(layout.cursor)
    with open_file(layout.meta) as f:
        meta = boundedjson.loads(f.read(boundedjson.MAX_JSON_BYTES + 1))
    meta["version"] = FORMAT_VERSION
    write_json_atomic(layout.meta, meta)


def _rewrite(layout: Layout, version: int, progress: Progress | None) -> tuple[int, int]:
    seen = SeenFile(layout.seen)
    seen.open(require_sums=False)
    offsets = array("Q")  # every PUSH, in journal order
    host_ids = array("I")
    alive = bytearray()
    names: dict[str, int] = {}
    done = [0]
    records = 0
    try:
        scan = JournalScan(layout.journal)
        for offset, body in scan:
            records += 1
            if body[0] == DONE:
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
    fd = create_exclusive(_fresh(layout.compacting))
    kept = 0
    try:
        out = bytearray(MAGIC)
        position = len(MAGIC)
        for name, hid in names.items():
            if done[hid]:
                record = host_body(name.encode(), float("nan"), 0.0, -1, done[hid])
                out += frame(position, record)
                position += FRAME.size + len(record)
        for offset, old in JournalScan(layout.journal):
            if old[0] == DONE:
                continue
            i = bisect_left(offsets, offset)
            if not alive[i]:
                continue
            pushed = parse_push(old, version)
            name = host_of(_url(layout.journal, offset, pushed)) or "-"
            new = push_body(pushed.priority, pushed.dont_filter, pushed.fingerprint, bytes(pushed.record),
                            slot=name.encode())
            out += frame(position, new)
            position += FRAME.size + len(new)
            kept += 1
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
    install(layout.journal, layout.compacting)
    return kept, records - kept


def _fresh(path: str) -> str:
    if os.path.lexists(path):
        os.unlink(path)  # left by an upgrade or compaction that was killed: the old journal stands
    return path


def _url(path: str, offset: int, pushed: Pushed) -> str:
    try:
        return decode_request(pushed.record, pushed.priority, pushed.dont_filter, pushed.fingerprint, None).url
    except ValueError as exc:
        raise JobDirCorrupt(path, offset, str(exc)) from None
