"""The last lines of a crawl's log file, for the dashboard's "Log" panel (``serve --log FILE``).

Only the end of the file is read (``TAIL_BYTES``), however large it grows; a line cut by that
start is left out. Bytes that are not UTF-8 are shown replaced, never refused.
"""

from __future__ import annotations

import os

from ..core.errors import FrontierError

TAIL_LINES = 200
"""The most lines sent."""
TAIL_BYTES = 64 << 10
"""The most bytes read from the end of the file."""


def tail_lines(path: str, lines: int = TAIL_LINES, limit: int = TAIL_BYTES) -> tuple[list[str], int]:
    """The last ``lines`` lines of the file at ``path`` (from its last ``limit`` bytes) and its size;
    ``FrontierError`` saying what to do when it cannot be read."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = max(0, size - limit)
            f.seek(start)
            data = f.read(limit)
    except OSError as exc:
        raise FrontierError(f"cannot read the log {path}: {exc.strerror or exc}; check the path given to "
                            f"--log (serve reads it again at each refresh)") from None
    text = data.decode("utf-8", "replace")
    found = text.splitlines()
    if start > 0 and found:
        found = found[1:]  # the first line began before what was read
    return found[-lines:], size
