"""The job directory: its file names, ``frontier.json`` and the ``lock``.

Format 1::

    JOBDIR/
      frontier.json        {"format": "diskfrontier", "version": 1, "order", "created", ...}
      lock                 flock()ed by the one process that has the frontier open; its pid
      requests.seen        every accepted fingerprint (Scrapy's format, seen.py)
      requests.queue/      per-priority queuelib queues of journal offsets + active.json
      requests.urls        the journal: every accepted push and done (journal.py)
      requests.cursor      the checkpoint (checkpoint.py)
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from dataclasses import dataclass
from typing import Any

from .atomic import write_json_atomic
from .errors import FormatError, JobDirCorrupt, JobDirLocked

FORMAT_NAME = "diskfrontier"
FORMAT_VERSION = 1
FINGERPRINT_VERSION = "scrapy-sha1-1"


@dataclass(frozen=True)
class Layout:
    """The paths of a job directory's files."""

    root: str

    @property
    def meta(self) -> str:
        return os.path.join(self.root, "frontier.json")

    @property
    def lock(self) -> str:
        return os.path.join(self.root, "lock")

    @property
    def seen(self) -> str:
        return os.path.join(self.root, "requests.seen")

    @property
    def queue_dir(self) -> str:
        return os.path.join(self.root, "requests.queue")

    @property
    def active(self) -> str:
        return os.path.join(self.root, "requests.queue", "active.json")

    @property
    def journal(self) -> str:
        return os.path.join(self.root, "requests.urls")

    @property
    def cursor(self) -> str:
        return os.path.join(self.root, "requests.cursor")

    @property
    def compacting(self) -> str:
        return os.path.join(self.root, "requests.urls.compact")


_META_HINT = (
    'restore it from a backup, or write it anew as {"format": "diskfrontier", "version": 1, '
    '"order": "lifo"} (or "fifo": FIFO queues are folders in requests.queue/)'
)


def read_meta(layout: Layout) -> dict[str, Any]:
    """Read and check ``frontier.json``."""
    try:
        with open(layout.meta, "rb") as f:
            meta = json.loads(f.read())
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise JobDirCorrupt(layout.meta, 0, f"unreadable frontier.json ({exc})", hint=_META_HINT) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise FormatError(f"{layout.meta} is not a diskfrontier job directory description")
    version = meta.get("version")
    if version != FORMAT_VERSION:
        raise FormatError(
            f"{layout.root}: incompatible job directory format (got v{version}, can handle "
            f"v{FORMAT_VERSION}); use the diskfrontier release that wrote it"
        )
    if meta.get("order") not in ("lifo", "fifo"):
        raise JobDirCorrupt(layout.meta, 0, f"unknown queue order {meta.get('order')!r}", hint=_META_HINT)
    return meta


def write_meta(layout: Layout, order: str) -> dict[str, Any]:
    """Write a new ``frontier.json``."""
    meta = {
        "format": FORMAT_NAME, "version": FORMAT_VERSION, "order": order,
        "fingerprint": FINGERPRINT_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json_atomic(layout.meta, meta)
    return meta


def _holder_pid(path: str) -> int | None:
    try:
        with open(path, "rb") as f:
            text = f.read(32).strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


class Lock:
    """The job directory's exclusive lock (``flock``), released by the kernel on any exit."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1

    def acquire(self) -> None:
        """Take the lock or raise ``JobDirLocked`` naming the holder's pid."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        for attempt in range(5):  # a read-only probe holds a shared lock for microseconds
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN) or attempt == 4:
                    pid = _holder_pid(self.path)
                    os.close(fd)
                    raise JobDirLocked(os.path.dirname(self.path), pid) from None
                time.sleep(0.01)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        """Release the lock."""
        if self.fd >= 0:
            os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1


def probe_lock(path: str) -> int | None:
    """Without taking it for more than an instant: the pid holding the lock, 0 if unknown, None if free."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _holder_pid(path) or 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
