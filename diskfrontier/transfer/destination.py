"""Where ``copy`` builds its destination, so that it appears only when it is complete.

* A job directory is built in a hidden sibling folder, ``.<name>.diskfrontier-copy`` (the same
  parent, so that the final rename is atomic), closed cleanly, fsynced file by file, and
  renamed into place: a copy stopped at any point leaves no ``<name>`` (or the empty folder
  that was there). The frontier built there runs no watcher (``watch=False``): it publishes
  no ``status.json`` and applies no inbox command while the copy writes. A rerun removes the
  leftover build and starts again, once no process holds its lock; it takes a folder of that
  name for a leftover build if it holds the copy's marker (whatever else is in it), or else
  only names that a build writes (a copy stopped while it wrote the marker, or after it
  removed it at the end).
* A Redis crawl is marked (the ``copying`` field of its ``meta`` hash, set in the same step
  that makes the crawl) until the last step removes the mark. Every open refuses a marked
  crawl (``IncompleteCopy``) but the copy's own; a rerun deletes the marked crawl's keys and
  starts again.
* A PostgreSQL crawl is built as a crawl of another name (``pgfrontier/building.py``) whose
  schema is renamed to the crawl's in one transaction at the end; a rerun drops a build left
  by a copy that was stopped, and starts again.

The frontier classes are imported when a build is made, so that the command line's check for the
copy's marker (``MARKER``) does not load them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from typing import TYPE_CHECKING, Any

from ..core.errors import FrontierError
from ..files import boundedjson
from ..files.atomic import fsync_dir, fsync_path, write_json_atomic
from ..files.safefs import FILE, open_file
from ..jobdir.layout import Layout, probe_lock

if TYPE_CHECKING:
    from ..jobdir.frontier import Frontier
    from ..pgfrontier.frontier import PostgresFrontier
    from ..redisfrontier.frontier import RedisFrontier

TEMP_SUFFIX = ".diskfrontier-copy"
MARKER = "COPY-IN-PROGRESS"  # a file in the build folder: what is being copied, from where
_DEFAULT_EXPECTED_URLS = 10_000_000


def build_path(dst: str) -> str:
    """The hidden sibling folder in which the job directory ``dst`` is built."""
    parent, name = os.path.split(os.path.abspath(dst))
    return os.path.join(parent, f".{name}{TEMP_SUFFIX}")


# The files a job directory's layout names (outcomes.json, written at the build's close, included) and its
# queue folder: what a copy's build holds besides its marker.
_JOB_NAMES = (*(name for name, kind in Layout("").entries().items() if kind == FILE), "requests.")


def _is_job_file(name: str) -> bool:
    """A name that a job directory (or a copy being built) holds, their temp files included."""
    return name.startswith((MARKER, *_JOB_NAMES))


def _holds_marker(build: str) -> bool:
    """Whether the folder ``build`` holds the copy's marker: a regular file of it, as the copy writes it."""
    try:
        with open_file(os.path.join(build, MARKER)) as f:
            value = boundedjson.loads(f.read(boundedjson.MAX_JSON_BYTES + 1))
    except (OSError, ValueError, FrontierError):  # missing, a link, a folder, unreadable or not JSON
        return False
    return isinstance(value, dict) and "copy_of" in value and "to" in value


def _remove_leftover(build: str, dst: str) -> None:
    """Remove the unfinished build of an earlier copy to ``dst``; FrontierError if ``build`` is not one."""
    why = None
    st = os.lstat(build)
    if not stat.S_ISDIR(st.st_mode):
        why = "it is not a folder"
    elif not _holds_marker(build):
        strange = sorted(name for name in os.listdir(build) if not _is_job_file(name))
        if strange:
            why = f"it holds {', '.join(strange[:3])}, which no copy writes"
    if why is not None:
        raise FrontierError(f"{build} is in the way of the copy to {dst} and is not an unfinished copy ({why}): "
                            f"move it away, then copy again")
    holder = probe_lock(os.path.join(build, "lock"))
    if holder is not None:
        who = f"pid {holder}" if holder else "another process"
        raise FrontierError(f"a copy to {dst} is running ({who} holds {build}): wait for it to end, or stop it "
                            f"and copy again")
    shutil.rmtree(build)  # removes links inside, never what they point to


def _check_jobdir_destination(path: str) -> None:
    try:
        names = sorted(os.listdir(path))
    except FileNotFoundError:
        return
    if names:
        if "frontier.json" in names:
            raise FrontierError(f"{path} is a diskfrontier job directory already; copy into a new or empty "
                                f"directory")
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise FrontierError(f"{path} is not empty (it holds {shown}); copy into a new or empty directory")


def _sync_tree(root: str) -> None:
    """fsync every file and folder under ``root`` (no link is followed), folders last."""
    for folder, dirs, files in os.walk(root, topdown=False):
        for name in files + dirs:
            fsync_path(os.path.join(folder, name))
        fsync_dir(folder)


class JobDirBuild:
    """A job directory built in ``build_path(dst)`` and renamed to ``dst`` by ``finish``."""

    def __init__(self, dst: str, order: str, source: str) -> None:
        from ..jobdir.frontier import Frontier

        self.dst = dst
        self.notes: list[str] = []
        _check_jobdir_destination(dst)
        self.path = build_path(dst)
        if os.path.lexists(self.path):
            _remove_leftover(self.path, dst)
            self.notes.append(f"an unfinished copy to {dst} was found ({self.path}): it was removed and the copy "
                              f"done again")
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        made = False
        try:  # the folder made inside: a Ctrl-C the moment it exists still removes it
            os.mkdir(self.path)
            made = True
            write_json_atomic(os.path.join(self.path, MARKER), {"copy_of": source, "to": dst, "pid": os.getpid()})
            # no background checkpoints or compactions: the copy is written once, then closed and renamed
            self.frontier: Frontier = Frontier(self.path, order=order, watch=False, maintenance=None)
        except BaseException:
            if made:
                shutil.rmtree(self.path, ignore_errors=True)
            raise

    def finish(self) -> None:
        """Close the copy cleanly, make it durable and rename it into place."""
        self.frontier.close()
        _check_jobdir_destination(self.dst)  # something may have been put there meanwhile
        os.unlink(os.path.join(self.path, MARKER))
        _sync_tree(self.path)
        os.rename(self.path, self.dst)  # atomic; replaces an empty folder
        fsync_dir(os.path.dirname(os.path.abspath(self.dst)))

    def abandon(self) -> None:
        """Close and remove the unfinished copy (after an error or an interrupt)."""
        with contextlib.suppress(Exception):
            self.frontier.close()
        shutil.rmtree(self.path, ignore_errors=True)


class RedisBuild:
    """A Redis crawl made under a copy mark, removed by ``finish`` (of ``shards`` shards; None: one, or
    the number an empty crawl there has)."""

    def __init__(self, url: str, crawl: str, *, order: str, source: str, settings: dict[str, Any] | None,
                 expected: int, where: str, shards: int | None = None) -> None:
        from ..redisfrontier.frontier import RedisFrontier

        self.notes: list[str] = []
        expected = max(_DEFAULT_EXPECTED_URLS, expected)
        frontier = RedisFrontier(url, crawl=crawl, create=True, new_order=order, expected_urls=expected,
                                 copy_of=source, shards=shards)
        try:
            if frontier.copy_mark is not None and not frontier.made:  # an interrupted copy: redo it
                earlier = frontier.copy_mark
                frontier.drop_crawl()
                self.notes.append(f"{where} held an unfinished copy of {earlier}: it was deleted and the copy "
                                  f"done again")
                frontier = RedisFrontier(url, crawl=crawl, create=True, new_order=order, expected_urls=expected,
                                         copy_of=source, shards=shards)
            if not frontier.made:
                _check_empty(frontier, where, order)
                frontier.set_copy_mark(source)  # before the first write
        except BaseException:
            frontier.close()
            raise
        if settings is not None:  # opened again with the source's settings, which then belong to this crawl
            frontier.close()
            per_host = settings["per_host"]
            frontier = RedisFrontier(url, crawl=crawl, create=False, delay=settings["delay"],
                                     per_host=0 if per_host is None else per_host, prefer=settings["prefer"],
                                     copy_of=source)
        self.frontier: RedisFrontier = frontier

    def finish(self) -> None:
        """Remove the mark (the copy's last step) and close."""
        try:
            self.frontier.set_copy_mark(None)
        finally:
            self.frontier.close()

    def abandon(self) -> None:
        """Close, leaving the crawl marked: a rerun of the copy deletes it and starts again."""
        with contextlib.suppress(Exception):
            self.frontier.close()


def _check_empty(frontier: RedisFrontier, where: str, order: str) -> None:
    stats = frontier.stats()
    counts = {name: int(stats[name]) for name in ("pending", "in_flight", "done", "seen", "hosts", "failed")}
    if any(counts.values()):
        held = ", ".join(f"{n:,} {name.replace('_', ' ')}" for name, n in counts.items())
        raise FrontierError(f"{where} is not empty ({held}); copy into a new crawl name, or "
                            f"drop this one first (RedisFrontier(url, crawl=...).drop_crawl())")
    if frontier.order != order:
        raise FrontierError(f"{where} exists (empty) and is {frontier.order.upper()}, and the "
                            f"source is {order.upper()}: copy into a new crawl name")


class PostgresBuild:
    """A PostgreSQL crawl built under the name ``building.build_name(crawl)`` and renamed to ``crawl`` by
    ``finish``, with the source's order and its settings (delay, per-host limit) if it keeps any."""

    def __init__(self, url: str, crawl: str, *, order: str, settings: dict[str, Any] | None, where: str) -> None:
        from ..pgfrontier import building
        from ..pgfrontier.frontier import PostgresFrontier

        self.url, self.crawl, self.order, self.where = url, crawl, order, where
        self.notes: list[str] = []
        building.check_empty(url, crawl, order, where)
        self.build = building.build_name(crawl)
        if building.drop(url, self.build):
            self.notes.append(f"an unfinished copy to {where} was found (crawl {self.build!r}): it was deleted and "
                              f"the copy done again")
        delay = per_host = None
        if settings is not None:
            delay, per_host = settings["delay"], settings["per_host"] or 0
            if settings.get("prefer", "priority") != "priority":
                self.notes.append(f"the source's prefer={settings['prefer']!r} is not kept by a PostgreSQL crawl "
                                  f"(it hands out the best request of a ready host)")
        try:  # a Ctrl-C once the build is made still drops it
            self.frontier: PostgresFrontier = PostgresFrontier(url, crawl=self.build, create=True, new_order=order,
                                                               order=order, delay=delay, per_host=per_host,
                                                               renew=False)
        except BaseException:
            with contextlib.suppress(Exception):
                building.drop(url, self.build)
            raise

    def finish(self) -> None:
        """Close the build and move it into place."""
        from ..pgfrontier import building

        self.frontier.close()
        building.move_into_place(self.url, self.build, self.crawl, self.order, self.where)

    def abandon(self) -> None:
        """Close and drop the unfinished build (after an error or an interrupt; a kill leaves it to the rerun)."""
        from ..pgfrontier import building

        with contextlib.suppress(Exception):
            self.frontier.close()
        with contextlib.suppress(Exception):
            building.drop(self.url, self.build)


Build = JobDirBuild | RedisBuild | PostgresBuild

__all__ = ["MARKER", "TEMP_SUFFIX", "Build", "JobDirBuild", "PostgresBuild", "RedisBuild", "build_path"]
