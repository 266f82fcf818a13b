"""Whole-file replacement that a crash cannot tear: temp file, fsync, rename, fsync dir.

The temp file is created with ``O_EXCL | O_NOFOLLOW`` under a name nobody else uses
(``<path>.tmp-<pid>-<random>``), so a link or a file planted at a predictable temp name
is never written through; the rename replaces ``path`` itself (a link at ``path`` is
replaced, not followed). If anything fails before the rename (ENOSPC, an interrupt), the
temp file is removed and ``path`` is as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from typing import Any

from .safefs import create_exclusive, descriptor, open_fd, unique_temp
from .writeerrors import naming, raise_named


def fsync_dir(path: str) -> None:
    """Make a rename or a new file in the folder ``path`` durable.

    The folder is opened with ``O_DIRECTORY`` but may be reached through a link: the job
    directory itself may be one, and an fsync writes no bytes, so following it is harmless.
    """
    with descriptor(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) as fd:
        os.fsync(fd)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write all of ``data`` to ``fd``, finishing a short write (a kill can cause one)."""
    written = os.write(fd, data)
    if written == len(data):
        return
    view = memoryview(data)[written:]
    while view:
        view = view[os.write(fd, view):]


def fsync_path(path: str) -> None:
    """fsync a file (or folder) that is not open here; a link raises ``JobDirUnsafe``."""
    fd = open_fd(path, os.O_RDONLY, directory=stat.S_ISDIR(os.lstat(path).st_mode))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes | bytearray | memoryview, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data``: readers see the old file or the new one, never a mix.

    ``durable=False`` leaves out the fsyncs (a file rewritten every second that nothing relies on
    after a crash, such as ``status.json``).

    On any exception (also ``KeyboardInterrupt``) the temp file is removed and re-raised;
    ``path`` is untouched unless the rename happened.
    """
    tmp = unique_temp(path)
    with naming(path):
        fd = create_exclusive(tmp)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise_named(path, exc)
        raise
    if durable:
        with naming(path):
            fsync_dir(os.path.dirname(os.path.abspath(path)))


def write_json_atomic(path: str, value: Any) -> None:
    """``write_atomic`` of a JSON document."""
    write_atomic(path, (json.dumps(value, indent=1, sort_keys=True) + "\n").encode())
