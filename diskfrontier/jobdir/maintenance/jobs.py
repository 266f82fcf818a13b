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

from ...files.safefs import open_fd
from ..layout import Layout
from ..replay import JournalState, read_state
from ..statefile import SavedState, StateRecord, StateUnusable, read_state_file, write_state


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
    from .background import Cancelled

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
    record = write_state(layout.root, params["name"], saved, params["salt"])
    return {"ok": True, "record": record.to_json(), "began": began, "pending": saved.pending,
            "seconds": round(time.monotonic() - started, 4)}


def compact(params: dict[str, Any], cancelled: Callable[[], bool],
            progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Write a compacted journal beside the live one (``compaction.py``)."""
    from .compaction import compact_beside

    return compact_beside(params, cancelled, progress)
