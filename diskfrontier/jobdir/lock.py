"""The job directory's ``lock``: one process at a time, and only that process unlocks it.

``lock`` is ``flock()``ed exclusively by the process that has the frontier open; once the
lock is held, that process writes its pid into the file so that a second opener can say
who has it. The kernel drops the lock when the holder exits, however it exits. The file
is opened with ``O_NOFOLLOW``: a ``lock`` link to a file elsewhere raises ``JobDirUnsafe``
instead of having that file truncated and overwritten with a pid.

An ``flock`` belongs to the open file description, which ``fork()`` shares between parent
and child: ``LOCK_UN`` in a child would unlock the directory for the parent too, and a
third process could then open a live directory. So a ``Lock`` records the pid that
acquired it, and in any other process ``release()`` only closes that process's copy of
the descriptor (which leaves the parent's lock in place). Right after ``os.fork()`` the
child's copy is closed at once (``os.register_at_fork``), so a child that outlives its
parent does not keep the directory locked either, and ``owned()`` is False in the child.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
import weakref

from ..core.errors import FrontierError, JobDirLocked, JobDirNotOwned
from ..files.safefs import open_fd, open_file

_ATTEMPTS = 5  # a read-only probe holds a shared lock for microseconds
_HELD: weakref.WeakSet[Lock] = weakref.WeakSet()


def _holder_pid(path: str) -> int | None:
    """The pid written in the lock file, or None if there is none (or it cannot be read)."""
    try:
        with open_file(path, "rb") as f:
            text = f.read(32).strip()
        return int(text) if text else None
    except (OSError, ValueError, FrontierError):
        return None


class Lock:
    """The job directory's exclusive lock (``flock``), released by the kernel on any exit."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1
        self.pid: int | None = None  # the process that acquired the lock

    def acquire(self) -> None:
        """Take the lock or raise ``JobDirLocked`` naming the holder's pid.

        Raises ``JobDirUnsafe`` if ``lock`` is a link or not a regular file.
        """
        if self.owned():
            return
        fd = open_fd(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            for attempt in range(_ATTEMPTS):
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN) or attempt == _ATTEMPTS - 1:
                        raise JobDirLocked(os.path.dirname(self.path), _holder_pid(self.path)) from None
                    time.sleep(0.01)
            pid = os.getpid()
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{pid}\n".encode(), 0)
        except BaseException:
            os.close(fd)  # the only descriptor of this open file: closing it drops the lock
            raise
        self.fd = fd
        self.pid = pid
        _HELD.add(self)

    def owned(self) -> bool:
        """True if the lock is held, by this very process (False in a forked child)."""
        return self.fd >= 0 and self.pid == os.getpid()

    def check_owner(self) -> None:
        """Raise ``JobDirNotOwned`` in a process other than the one that acquired the lock."""
        if self.pid is not None and self.pid != os.getpid():
            raise JobDirNotOwned(os.path.dirname(self.path), self.pid)

    def release(self) -> None:
        """Release the lock; in a process that did not acquire it, only close this process's copy."""
        fd = self.fd
        if fd < 0:
            return
        self.fd = -1
        _HELD.discard(self)
        try:
            if self.pid == os.getpid():
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _forget_in_child(self) -> None:
        """Close a forked child's copy of the descriptor; the parent keeps its lock."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __repr__(self) -> str:
        if self.owned():
            state = "held"
        else:
            state = f"held by pid {self.pid}" if self.fd >= 0 else "not held"
        return f"<Lock {self.path} ({state})>"


def _after_fork_in_child() -> None:
    for lock in list(_HELD):
        lock._forget_in_child()
    _HELD.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def probe_lock(path: str) -> int | None:
    """Without taking it for more than an instant: the pid holding the lock, 0 if unknown, None if free.

    Read-only: a missing lock file is not created. A link raises ``JobDirUnsafe``.
    """
    try:
        fd = open_fd(path, os.O_RDONLY)
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
