"""Whole-file replacement that a crash cannot tear: temp file, fsync, rename, fsync dir."""

from __future__ import annotations

import json
import os
from typing import Any


def fsync_dir(path: str) -> None:
    """Make a rename or a new file in ``path`` durable."""
    fsync_path(path)


def write_all(fd: int, data: bytes | bytearray) -> None:
    """Write all of ``data`` to ``fd``, finishing a short write (a kill can cause one)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def fsync_path(path: str) -> None:
    """fsync a file that is not open here."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``: readers see the old file or the new one, never a mix."""
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def write_json_atomic(path: str, value: Any) -> None:
    """``write_atomic`` of a JSON document."""
    write_atomic(path, (json.dumps(value, indent=1, sort_keys=True) + "\n").encode())
