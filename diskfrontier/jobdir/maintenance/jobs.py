"""The maintenance jobs themselves: what a checkpoint and a compaction of a running frontier compute and write.

Each takes its parameters as a JSON-ready dict (``background.py`` runs it in a child process
or a thread) and returns its result the same way. Both read only bytes the frontier will not
change any more: the journal below the offset ``at`` it chose, and the saved state named
``start``. Both write only new files, created exclusively under new names, and fsync them;
nothing they write is part of the job directory until the frontier, holding the lock, names
it in its checkpoint (``upkeep.py``).

**checkpoint**: the state of the journal at ``at`` (``statefile.py``), made from the newest
saved state and the records after it (from the journal's start when there is none, or when
it does not describe the journal), written as ``name``. The journal and the seen file are
fsynced too, so that the checkpoint that names the state may say the journal held ``at``
bytes (its floor) even after a power cut.

**compact**: see ``compaction.py``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from ...core.errors import JobDirCorrupt
from ...files.safefs import open_fd, open_file
from ..layout import Layout
from ..replay import JournalState, read_state
from ..seen import BLOCK, check_blocks, parse_seen, read_sums
from ..seenindex import IndexRecord, IndexUnusable, SeenIndex
from ..statefile import SavedState, StateRecord, StateUnusable, read_state_file, write_state


class Cancelled(Exception):
    """The job was stopped by its frontier (closing)."""


INDEX_MIN_NEW_KEYS = 1 << 16
"""A checkpoint saves the seen index when at least this many keys (and a quarter of it) are new since the last."""
ENTRY_BYTES = 22  # a fingerprint of requests.seen: its length (u16) and 20 bytes


def _fsync(path: str) -> None:
    fd = open_fd(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def state_at(layout: Layout, params: dict[str, Any], cancelled: Callable[[], bool],
             report: Callable[[int, int], None] | None = None) -> tuple[JournalState, int]:
    """The scan of the journal up to ``params["at"]``, from the state ``params["start"]`` names when it describes
    the journal; and where the scan began (0: the journal's start)."""
    ident, salt, at = params["ident"], params["salt"], params["at"]

    def progress(done: int, total: int) -> None:
        if cancelled():
            raise Cancelled
        if report is not None:
            report(done, total)

    start: SavedState | None = None
    if params.get("start") is not None:
        try:
            start = read_state_file(layout.root, StateRecord.from_json(params["start"]), ident, salt)
        except StateUnusable:
            start = None
    kwargs = {"salt": salt, "until": at, "save": ident, "sizes": True, "hosts": True, "offsets": False,
              "progress": progress}
    if start is not None:
        try:
            return read_state(layout.journal, start=start, **kwargs), start.at
        except StateUnusable:
            pass
    return read_state(layout.journal, **kwargs), 0


def checkpoint(params: dict[str, Any], cancelled: Callable[[], bool],
               progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Write the state of the journal at ``params["at"]`` as the new file ``params["name"]``."""
    started = time.monotonic()
    layout = Layout(params["root"])
    state, began = state_at(layout, params, cancelled, progress)
    saved = state.saved
    if saved is None:
        return {"ok": False, "error": "an inbox command is applied only in part: no checkpoint until it is whole"}
    tail = params.get("seen_tail")
    saved.seen_tail = None if tail is None else (tail[0], tail[1])
    _fsync(layout.journal)
    _fsync(layout.seen)
    _fsync(layout.seen_sums)
    record = write_state(layout.root, params["name"], saved, params["salt"])
    index = save_seen_index(layout, params)
    return {"ok": True, "record": record.to_json(), "began": began, "pending": saved.pending,
            "seen_index": None if index is None else index.to_json(), "seconds": round(time.monotonic() - started, 4)}


def save_seen_index(layout: Layout, params: dict[str, Any]) -> IndexRecord | None:
    """Save the seen index as ``params["index_out"]`` (a new file), covering requests.seen up to the end the
    frontier flushed it to (``params["seen_tail"]``): the saved one (``params["seen_index"]``) loaded in bulk and
    the fingerprints after it added, their blocks checked against their sums. None when it would not pay: fewer
    than ``INDEX_MIN_NEW_KEYS`` new keys, or a quarter of those it holds, since the saved one.

    A recovery, which has no index when a crawl was only ever killed, then reads requests.seen only from
    where this one ends, instead of from its start: what keeps a recovery's cost to the crawl's size.
    """
    if not params.get("index_out"):
        return None
    end = params["seen_tail"][0]
    saved = None if params.get("seen_index") is None else IndexRecord.from_json(params["seen_index"])
    covered, index = 0, None
    if saved is not None:
        try:
            index = SeenIndex.load(layout.seen_index, saved)
            covered = saved.seen_bytes
        except IndexUnusable:
            index = None
    count = 0 if index is None else len(index)
    if (end - covered) // ENTRY_BYTES < max(INDEX_MIN_NEW_KEYS, count // 4) or end <= covered:
        return None
    first = covered // BLOCK
    with open_file(layout.seen) as f:
        f.seek(first * BLOCK)
        data = f.read(end - first * BLOCK)
    if len(data) != end - first * BLOCK:
        raise JobDirCorrupt(layout.seen, first * BLOCK + len(data), "shorter than the frontier flushed it to")
    sums = read_sums(layout.seen_sums, params["salt"]) or []
    damage = check_blocks(layout.seen, data, sums[:end // BLOCK], params["salt"], first)
    if damage is not None:
        raise damage
    keys, _info = parse_seen(layout.seen, data[covered - first * BLOCK:])
    if index is None:
        index = SeenIndex(expected=len(keys) + 1024)
    index.update(keys)
    return index.save(os.path.join(layout.root, params["index_out"]), end)


