"""Upgrading a format-1 job directory to format 2, in place, when it is opened.

Format 1 journals have no record identity inside their checksums and format-1 seen
files have no block checksums. The upgrade, under the directory's lock:

1. adds every fingerprint of the old journal to ``requests.seen`` (a seen file may
   lag its journal) and writes ``requests.seen.sums``, fsynced;
2. writes the pending PUSH records, framed the format-2 way, to a new journal and
   renames it over the old one (compaction: the DONE records are no longer needed);
3. marks the checkpoint so that the queues are rebuilt from the new journal;
4. writes ``frontier.json`` with version 2, last.

Killed at any point, the next open finds either the old journal (the upgrade starts
again; the seen file only gained fingerprints) or the new one under a version-1
``frontier.json`` (the upgrade only finishes steps 3 and 4).
"""

from __future__ import annotations

import json
import logging
import os

from . import checkpoint
from .atomic import write_json_atomic
from .compaction import install, write_compacted
from .jobdir import FORMAT_VERSION, Layout
from .journal import MAGIC, journal_version
from .recovery import save_torn_tail
from .safefs import open_file
from .seen import SeenFile
from .state import Progress, read_state

log = logging.getLogger("diskfrontier")


def upgrade_format1(layout: Layout, progress: Progress | None = None) -> None:
    """Upgrade the format-1 job directory of ``layout`` to format 2 (see the module docstring)."""
    with open_file(layout.journal) as f:
        head = f.read(len(MAGIC))
        size = os.fstat(f.fileno()).st_size
    if journal_version(layout.journal, head, size) == 1:
        seen = SeenFile(layout.seen)
        seen.open(require_sums=False)
        try:
            state = read_state(layout.journal, fingerprint=seen.add, progress=progress)
            seen.sync()
        finally:
            seen.close()
        if state.scan.torn:
            save_torn_tail(layout.journal, state.scan.end)
        result = write_compacted(layout.journal, layout.compacting)
        install(layout.journal, layout.compacting)
        log.warning("upgraded %s to job directory format %d: %s pending requests kept, %s finished records dropped",
                    layout.root, FORMAT_VERSION, f"{len(result.kept):,}", f"{result.dropped_records:,}")
    checkpoint.write_repaired(layout.cursor)
    with open_file(layout.meta) as f:
        meta = json.loads(f.read(1 << 20))
    meta["version"] = FORMAT_VERSION
    write_json_atomic(layout.meta, meta)
