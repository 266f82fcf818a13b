"""Opening files inside a job directory without ever following a symbolic link.

A job directory is untrusted input: it may come from a tarball, from another user, or
from a place others can write to. A symbolic link planted there (``requests.seen`` ->
``~/.bashrc``) would turn an ordinary open-for-append, truncate or copy into a write to
a file outside it. Every open of a file inside a job directory goes through this module:

- ``open_fd``/``open_file`` add ``O_NOFOLLOW`` (a link as the last component is refused)
  and ``O_CLOEXEC``, open with ``O_NONBLOCK`` so that a planted named pipe cannot hang
  the open, and check with ``fstat`` that what was opened is a regular file;
- ``create_exclusive`` creates files that must not exist yet (temp files, files set
  aside) with ``O_EXCL``, which never follows a link and never reuses a file;
- ``check_entries``/``check_tree`` look (``lstat``) at entries before they are handed
  to code that opens them by name itself (queuelib);
- ``make_dir``/``remove_tree`` create and wipe a folder without following a link.

A refused entry raises ``JobDirUnsafe`` naming it; other ``OSError``s propagate unchanged.

The job directory itself may be a link (a big crawl moved to another disk and linked
back is an ordinary thing to do), so only entries *inside* it are checked, never the
path leading to it. ``resolve_root`` resolves that path once, when the directory is
opened, so that every later path names the directory whose lock was taken, even if the
link is changed while the frontier runs.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import secrets
import stat
from collections.abc import Iterator, Mapping
from typing import IO, Any

from ..core.errors import JobDirUnsafe

FILE = "file"
DIRECTORY = "directory"

MAX_DEPTH = 8  # requests.queue/ nests two levels (FIFO queues are folders of chunk files)

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_FOREIGN = "move it out of the job directory"

_MODES = {
    "r": os.O_RDONLY,
    "r+": os.O_RDWR,
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "w+": os.O_RDWR | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "a+": os.O_RDWR | os.O_CREAT | os.O_APPEND,
    "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
    "x+": os.O_RDWR | os.O_CREAT | os.O_EXCL,
}


def describe(mode: int) -> str:
    """What kind of entry an ``st_mode`` is, for messages."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _unsafe(path: str, mode: int, expected: str) -> JobDirUnsafe | None:
    """The error to raise unless ``mode`` is of the ``expected`` kind (FILE or DIRECTORY)."""
    if stat.S_ISLNK(mode):
        fix = "replace it with the real file" if expected == FILE else "replace it with the real directory"
        return JobDirUnsafe(path, fix=fix)
    ok = stat.S_ISREG(mode) if expected == FILE else stat.S_ISDIR(mode)
    if not ok:
        wanted = "a regular file" if expected == FILE else "a directory"
        return JobDirUnsafe(path, f"is {describe(mode)}, not {wanted}", fix=_FOREIGN)
    return None


def _refuse(path: str, mode: int, expected: str) -> None:
    """Raise ``JobDirUnsafe`` unless ``mode`` is of the ``expected`` kind (FILE or DIRECTORY)."""
    error = _unsafe(path, mode, expected)
    if error is not None:
        raise error


def open_fd(path: str, flags: int, mode: int = 0o644, *, directory: bool = False) -> int:
    """``os.open`` that refuses a symbolic link and anything but a regular file.

    ``O_NOFOLLOW | O_CLOEXEC`` are added to ``flags``. With ``directory=True`` a directory
    is accepted instead of a regular file (for fsync). Raises ``JobDirUnsafe`` for a link
    or a file of another kind (named pipe, device, socket); other ``OSError``s unchanged.
    """
    expected = DIRECTORY if directory else FILE
    before = _lstat(path)  # a pipe or device is refused before it is opened at all
    if before is not None:
        _refuse(path, before.st_mode, expected)
    nonblock = 0 if flags & os.O_NONBLOCK else os.O_NONBLOCK
    # The descriptor is stored by C code (list.extend) before any Python code can run, so a
    # KeyboardInterrupt at any point after the open still finds it here and closes it, once.
    opened: list[int] = []
    try:
        try:
            opened.extend(map(os.open, (path,), (flags | _NOFOLLOW | nonblock,), (mode,)))
        except OSError as exc:
            _explain_refused_open(path, exc, expected)
            raise
        fd = opened[0]
        _refuse(path, os.fstat(fd).st_mode, expected)
        if nonblock:
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return fd
    except BaseException:
        for fd in opened:
            os.close(fd)
        raise


def _explain_refused_open(path: str, exc: OSError, expected: str) -> None:
    """Raise ``JobDirUnsafe`` if ``exc`` came from a link or a pipe that appeared since the lstat.

    ELOOP (Linux, macOS) or EMLINK (FreeBSD) come from O_NOFOLLOW, EEXIST from O_EXCL, ENXIO
    from a pipe without a reader. Returns (and the caller re-raises ``exc``) otherwise.
    """
    now = _lstat(path) if exc.errno in (errno.ELOOP, errno.EMLINK, errno.EEXIST, errno.ENXIO) else None
    if now is None or stat.S_ISREG(now.st_mode) or stat.S_ISDIR(now.st_mode):
        return
    error = _unsafe(path, now.st_mode, expected)
    assert error is not None
    raise error from None


def open_file(path: str, mode: str = "rb") -> IO[Any]:
    """A Python file object over ``open_fd``: ``open()`` for files inside a job directory.

    ``mode`` is one of ``open()``'s: r, r+, w, w+, a, a+, x, x+, with b or t (text is UTF-8). ``open_fd`` is
    ``open()``'s opener, so the descriptor belongs to the file object from the moment it
    exists: an exception at any point (an interrupt too) closes it exactly once, and never
    here a second time (a second close could close another thread's new file).
    """
    base = mode.replace("b", "").replace("t", "")
    if base not in _MODES:
        raise ValueError(f"unsupported mode {mode!r}")
    if "b" in mode:
        return open(path, mode, opener=open_fd)
    return open(path, mode, encoding="utf-8", opener=open_fd)


@contextlib.contextmanager
def descriptor(path: str, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> Iterator[int]:
    """``os.open`` as a context: the descriptor is closed exactly once when the block ends.

    For the few opens that are not of a job directory's files (folders, to fsync or to walk).
    The descriptor is kept by C code before any Python code runs, so an interrupt right after
    the open still closes it (and only once).
    """
    opened: list[int] = []
    try:
        opened.extend(map(functools.partial(os.open, dir_fd=dir_fd), (path,), (flags,), (mode,)))
        yield opened[0]
    finally:
        for fd in opened:
            os.close(fd)


def create_exclusive(path: str, mode: int = 0o644) -> int:
    """Create ``path``, which must not exist, for writing (``O_CREAT | O_EXCL | O_NOFOLLOW``).

    Raises ``JobDirUnsafe`` if a link is there and ``FileExistsError`` if anything else is.
    """
    return open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)


def unique_temp(path: str) -> str:
    """A fresh name for a temp file beside ``path``: ``<path>.tmp-<pid>-<random hex>``."""
    return f"{path}.tmp-{os.getpid()}-{secrets.token_hex(6)}"


def create_aside(path: str, attempts: int = 1000) -> tuple[int, str]:
    """Create a new file to set bytes aside in: ``path``, or ``path.1``, ``path.2``... if taken.

    Returns the open descriptor and the name used. A link at any of these names raises
    ``JobDirUnsafe`` (it is never written through, and never silently stepped over).
    """
    for n in range(attempts):
        name = path if n == 0 else f"{path}.{n}"
        try:
            return create_exclusive(name), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"{path} and {attempts - 1} numbered names beside it all exist", path)


def remove_stale_temps(path: str) -> list[str]:
    """Remove the temp files of ``path`` (``<path>.tmp-*``, and ``<path>.tmp``) that a kill left.

    Only call this while holding the job directory's lock. Removing a link removes the link,
    never its target; a directory of such a name is left alone. Returns the names removed.
    """
    directory, base = os.path.split(os.path.abspath(path))
    removed = []
    for name in os.listdir(directory):
        if name == f"{base}.tmp" or name.startswith(f"{base}.tmp-"):
            full = os.path.join(directory, name)
            st = _lstat(full)
            if st is not None and not stat.S_ISDIR(st.st_mode):
                os.unlink(full)
                removed.append(full)
    return removed


def resolve_root(path: str) -> str:
    """The real path of a job directory, resolved once (the directory itself may be a link)."""
    return os.path.realpath(path)


def check_entries(root: str, expected: Mapping[str, str]) -> None:
    """Check that each named entry of ``root`` that exists is of its expected kind, not a link.

    ``expected`` maps entry names to ``FILE`` or ``DIRECTORY``, e.g.
    ``{"requests.seen": FILE, "requests.queue": DIRECTORY}``. Missing entries are fine (they
    are created later, through this module). ``root`` itself may be a link: see the module.
    """
    for name, kind in expected.items():
        if kind not in (FILE, DIRECTORY) or not name or os.sep in name or name in (".", ".."):
            raise ValueError(f"bad entry {name!r}: {kind!r}")
        path = os.path.join(root, name)
        st = _lstat(path)
        if st is not None:
            _refuse(path, st.st_mode, kind)


def check_tree(path: str) -> None:
    """Check that ``path`` is a real directory whose whole content is folders and regular files.

    For ``requests.queue/`` before queuelib, which opens its files by name, is given it. A
    missing ``path`` is fine. Nesting deeper than ``MAX_DEPTH`` is refused too.
    """
    st = _lstat(path)
    if st is None:
        return
    _refuse(path, st.st_mode, DIRECTORY)
    stack = [(path, 0)]
    while stack:
        folder, depth = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    if depth + 1 >= MAX_DEPTH:
                        raise JobDirUnsafe(entry.path, f"nests more than {MAX_DEPTH} folders deep", fix=_FOREIGN)
                    stack.append((entry.path, depth + 1))
                else:
                    _refuse(entry.path, mode, FILE)


def make_dir(path: str, mode: int = 0o755) -> None:
    """Create the folder ``path`` in an existing parent, or accept a real folder already there.

    ``os.makedirs(path, exist_ok=True)`` for an entry of a job directory: a link (even one
    to a folder) or a file of that name raises ``JobDirUnsafe``.
    """
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        st = _lstat(path)
        if st is None:  # removed in between: try once more, and let an error propagate
            os.mkdir(path, mode)
            return
        _refuse(path, st.st_mode, DIRECTORY)


def remove_tree(path: str) -> None:
    """Remove the folder ``path`` and everything in it, never following a link.

    ``path`` itself must be a real folder (a link there raises ``JobDirUnsafe``: the folder
    it points to is not removed). Links inside are removed as links, their targets left
    alone. Every step works relative to an open folder descriptor, so a folder swapped for
    a link while this runs is not entered. A missing ``path`` is fine.
    """
    st = _lstat(path)
    if st is None:
        return
    _refuse(path, st.st_mode, DIRECTORY)
    with descriptor(path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW) as top:
        _clear(top, path, 0)
    os.rmdir(path)


def _clear(dir_fd: int, where: str, depth: int) -> None:
    """Empty the folder open as ``dir_fd`` (``where`` is its path, for messages)."""
    with os.scandir(dir_fd) as entries:
        names = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
    for name, is_dir in names:
        if not is_dir:
            os.unlink(name, dir_fd=dir_fd)  # a link goes, its target stays
            continue
        if depth + 1 >= MAX_DEPTH:
            raise JobDirUnsafe(os.path.join(where, name), f"nests more than {MAX_DEPTH} folders deep", fix=_FOREIGN)
        with descriptor(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=dir_fd) as sub:
            _clear(sub, os.path.join(where, name), depth + 1)
        os.rmdir(name, dir_fd=dir_fd)
