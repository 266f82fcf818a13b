"""Failed writes named: a full disk, a quota, an I/O error become an error naming the file.

``os.write`` on a full disk raises ``OSError(ENOSPC)`` with no file name, so a crawl
stopped by it said only "[Errno 28] No space left on device". The few places every write
of a job directory goes through (the journal's append, the seen file's flush, the queues,
``atomic.write_atomic`` for every file replaced whole, and the outputs of the CLI) pass
such an error through ``raise_named``/``naming``, which raise ``DiskFull`` (ENOSPC,
EDQUOT) or ``JobDirWriteError`` (EIO, EROFS, EFBIG) naming the file and what to do,
chained to the original. Each keeps its own rollback: it runs before the error is named.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

from ..core.errors import DiskFull, JobDirWriteError

FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
BROKEN = frozenset({errno.EIO, errno.EROFS, errno.EFBIG})


def named(path: str, exc: BaseException, fix: str | None = None) -> JobDirWriteError | None:
    """The named error for ``exc``, a failed write to ``path``; None if it is not one to name.

    ``fix``: what to do after making room or checking the disk, for a file that is not a
    job directory's (the default says to open the frontier again).
    """
    if not isinstance(exc, OSError) or isinstance(exc, JobDirWriteError):
        return None
    if exc.errno in FULL:
        return DiskFull(path, exc, fix)
    if exc.errno in BROKEN:
        return JobDirWriteError(path, exc, None if fix is None else f"check the disk, then {fix}")
    return None


def raise_named(path: str, exc: BaseException, fix: str | None = None) -> None:
    """Raise the named error for ``exc`` (a failed write to ``path``), chained to it; return if there is none."""
    error = named(path, exc, fix)
    if error is not None:
        raise error from exc


@contextlib.contextmanager
def naming(path: str, fix: str | None = None) -> Iterator[None]:
    """Within the block, a write failure of the kinds above is raised as the error naming ``path``."""
    try:
        yield
    except OSError as exc:
        raise_named(path, exc, fix)
        raise
