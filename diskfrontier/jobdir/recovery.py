"""Rebuilding the queues from the journal: the path every unclean stop takes.

One scan of ``requests.urls`` (``state.read_state``) gives the pending PUSH offsets per
priority in journal order and adds to the seen index any fingerprint the seen file had
not received yet; the offsets are then queued in that order. Journal order is push
order, so LIFO/FIFO order within a priority comes back exactly as it was for
everything that was not in flight.
"""

from __future__ import annotations

import os

from ..files.atomic import write_all
from ..files.safefs import create_aside, open_file
from ..files.writeerrors import naming
from .queues import OffsetQueues
from .replay import JournalState, Progress, read_state
from .seen import SeenFile
from .statefile import SavedState

__all__ = ["Progress", "rebuild", "save_torn_tail"]


def rebuild(
    path: str, queues: OffsetQueues, seen: SeenFile, *, salt: int, floor: int = 0, floor_crc: int | None = None,
    progress: Progress | None = None, now: float = 0.0, exclude: tuple[int, ...] = (), start: SavedState | None = None,
    save: str | None = None,
) -> tuple[JournalState, int]:
    """Fill ``queues`` (empty) with every pending request of the journal at ``path``.

    Returns the journal's state and how many fingerprints were added to ``seen``. Only
    PUSH records from ``floor`` on can hold a fingerprint that ``requests.seen`` lacks:
    the seen file is flushed before every checkpoint that sets the floor. ``floor_crc``:
    the crc32 of the journal below the floor, from the checkpoint (the records there are
    then checked by it as a whole). Requests whose not_before is after ``now`` are left
    out of the queues, in ``state.delayed``; ``state.host_*`` holds the hosts. ``exclude``: offsets of
    requests in flight, left out of the queues and the pending counts. ``start``: a saved state to
    begin from (``StateUnusable`` if it does not describe this journal; nothing is changed then).
    ``save``: the directory's id, to have the state at the journal's end in ``state.saved``.
    """
    added = 0

    def remember(fingerprint: bytes) -> None:
        nonlocal added
        added += seen.add(fingerprint)

    state = read_state(path, salt=salt, floor=floor, fingerprint=remember, fingerprints_from=floor, progress=progress,
                       sizes=True, floor_crc=floor_crc, hosts=True, hold_after=now, exclude=exclude, start=start,
                       save=save)
    for priority, offsets in state.pending.items():
        queues.load(priority, offsets)
    return state, added


def save_torn_tail(path: str, end: int) -> str | None:
    """Copy the bytes past ``end`` aside (``<file>.torn-<offset>``, a new file) before they are cut."""
    with open_file(path) as src:
        src.seek(end)
        data = src.read()
    if not data:
        return None
    with naming(f"{path}.torn-{end}"):
        fd, aside = create_aside(f"{path}.torn-{end}")
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
    return aside
