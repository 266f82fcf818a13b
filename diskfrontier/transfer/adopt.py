"""Adopting a Scrapy JOBDIR: its seen fingerprints always, its pickled queue only on request.

``adopt_scrapy(path)`` turns a JOBDIR that Scrapy's own scheduler wrote into a
diskfrontier job directory in place: ``requests.seen`` (binary, or the hex lines of
Scrapy < 2.19) is kept, so every URL Scrapy had seen stays seen; ``requests.queue/`` is
renamed to ``requests.queue.scrapy-<time>`` and not read. ``trust_pickle=True`` also
imports the requests of that queue, unpickling them (which runs whatever code the files
hold), in Scrapy's pop order. The LIFO queue files are read back from their end, so the
queue of a Scrapy crawl killed with ``kill -9`` (which never wrote its headers or
``active.json``, and which Scrapy itself would not read again) is recovered too.

The job directory keeps a note (``scrapy-adopted.json``) that Scrapy issued the crawl's
start requests: Scrapy records no fingerprint for them, and without the note the next run
would fetch the start URLs again (see ``scrapyfiles/adopted.py``).

Adopted requests keep their priority, callback names, meta and the rest; they are
fingerprinted with Scrapy's default fingerprinter. Importing is resumable: the count
imported so far is kept in the set-aside folder, so a run that was killed carries on
where it stopped (a batch cut by the kill may be queued twice, never lost).
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field

from ..core.errors import FrontierError
from ..files import boundedjson
from ..files.atomic import write_json_atomic
from ..files.safefs import open_file
from ..jobdir.frontier import Frontier
from ..jobdir.layout import Layout, Lock
from ..jobdir.recovery import Progress
from ..request.codec import Unencodable, encode_request
from ..request.model import Request
from ..scrapyfiles.adopted import write_note
from ..scrapyfiles.queue import ScrapyQueue, find_queues, load_entry, set_aside
from ..scrapyfiles.records import frontier_request

MARKER = "diskfrontier-import.json"
BATCH = 10_000


@dataclass
class Adopted:
    """What ``adopt_scrapy`` did."""

    path: str
    seen: int = 0
    aside: str | None = None
    queues: int = 0
    counted: int = 0  # by the queues' headers, without unpickling (stale after a crash)
    found: int = 0  # entries found in the queue files (with trust_pickle)
    imported: int = 0
    earlier: int = 0  # imported by an earlier run that was interrupted
    skipped: list[str] = field(default_factory=list)


def adopt_scrapy(path: str, *, trust_pickle: bool = False, progress: Progress | None = None) -> Adopted:
    """Make the Scrapy JOBDIR at ``path`` a diskfrontier job directory (see the module docstring)."""
    layout = Layout(path)
    if not os.path.isdir(path):
        raise FrontierError(f"{path} is not a directory")
    unfinished = [a for a in sorted(glob.glob(layout.queue_dir + ".scrapy-*")) if not _finished(a)]
    aside: str | None = None
    if os.path.isdir(layout.queue_dir) and not os.path.exists(layout.meta):
        lock = Lock(layout.lock)
        lock.acquire()  # a live Scrapy crawl does not lock; a live diskfrontier one does
        try:
            aside = set_aside(layout.queue_dir)
        finally:
            lock.release()
    elif unfinished:
        aside = unfinished[-1]  # set aside earlier, and not (all) imported yet
    elif os.path.exists(layout.meta):
        raise FrontierError(f"{path} is already a diskfrontier job directory, with no Scrapy queue left to import")
    elif not os.path.exists(layout.seen):
        raise FrontierError(f"{path} is not a Scrapy JOBDIR: it has no requests.seen and no requests.queue/")
    report = Adopted(path, aside=aside)
    converting = not os.path.exists(layout.meta)
    with Frontier(path) as frontier:
        if converting:
            write_note(path)
        if aside is not None:
            queues = find_queues(aside)
            report.queues, report.counted = len(queues), sum(q.counted() for q in queues)
            if trust_pickle:
                _import(frontier, aside, queues, report, progress)
        report.seen = frontier.stats()["seen"]
    return report


def _finished(aside: str) -> bool:
    state = _read_marker(aside)
    return bool(state.get("finished"))


def _read_marker(aside: str) -> dict:
    try:
        with open_file(os.path.join(aside, MARKER)) as f:
            state = boundedjson.loads(f.read(boundedjson.MAX_JSON_BYTES + 1))
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError, FrontierError):  # missing, unreadable, or a link: nothing to resume
        return {}


def _in_push_order(queues: list[ScrapyQueue], lifo: bool) -> tuple[list[tuple[str, int, bytes]], list[str]]:
    """Every entry as (queue path, index in pop order, bytes), in the order to push them,
    and the problems met reading the queue files.

    Scrapy pops a priority's queues one after the other (the start-request queue last);
    a LIFO frontier pops the newest push first, so for it the whole list is reversed
    priority by priority.
    """
    by_priority: dict[int, list[tuple[str, int, bytes]]] = {}
    problems = []
    for queue in queues:
        items, problem = queue.entries()
        by_priority.setdefault(queue.priority, []).extend((queue.path, i, data) for i, data in enumerate(items))
        if problem:
            problems.append(f"{queue.path}: {problem}")
    ordered = []
    for priority in sorted(by_priority, reverse=True):
        entries = by_priority[priority]
        ordered += entries[::-1] if lifo else entries
    return ordered, problems


def _import(frontier: Frontier, aside: str, queues: list[ScrapyQueue], report: Adopted,
            progress: Progress | None) -> None:
    entries, problems = _in_push_order(queues, frontier.order == "lifo")
    report.skipped += problems
    report.found = len(entries)
    report.earlier = done = min(int(_read_marker(aside).get("imported", 0)), len(entries))
    batch: list[tuple[Request, bytes]] = []
    for path, index, data in entries[done:]:
        try:
            stored = frontier_request(load_entry(data), None)  # Scrapy's default fingerprint
            batch.append((stored, encode_request(stored)))
        except (ValueError, TypeError, Unencodable) as exc:
            report.skipped.append(f"{path} entry {index}: {exc}")
        done += 1
        if len(batch) >= BATCH:
            _commit(frontier, aside, batch, done, report, progress, len(entries))
            batch = []
    _commit(frontier, aside, batch, done, report, progress, len(entries))
    write_json_atomic(os.path.join(aside, MARKER), {"imported": done, "finished": True})


def _commit(frontier: Frontier, aside: str, batch: list[tuple[Request, bytes]], done: int, report: Adopted,
            progress: Progress | None, total: int) -> None:
    frontier.push_records(batch, dedupe=False)
    report.imported += len(batch)
    write_json_atomic(os.path.join(aside, MARKER), {"imported": done, "finished": False})
    if progress is not None:
        progress(done, total)
