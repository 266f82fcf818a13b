"""Scrapy's own request queue (``requests.queue/`` of a Scrapy JOBDIR), read without changing it.

Scrapy keeps one queuelib disk queue per priority: a ``LifoDiskQueue`` file or a
``FifoDiskQueue`` folder named by the negated priority (``0``, ``-10`` for priority 10),
with ``s`` appended for start requests (Scrapy 2.13+), inside one folder per download
slot with ``DownloaderAwarePriorityQueue``; ``active.json`` lists them, written only on a
clean close. Each entry is a request dict (``Request.to_dict``) pickled (or marshalled).

Nothing here unpickles unless asked to (``load_entry``): unpickling runs code.
"""

from __future__ import annotations

import marshal
import os
import pickle
import re
import time
from dataclasses import dataclass
from typing import Any

from ..files import boundedjson
from .queuelib_files import fifo_entries, fifo_info, lifo_entries, lifo_header

_QUEUE_NAME = re.compile(r"(-?\d+)(s?)\Z")


@dataclass
class ScrapyQueue:
    """One of Scrapy's disk queues."""

    path: str
    priority: int
    start: bool
    lifo: bool

    def counted(self) -> int:
        """How many entries its header says it holds (stale after a crash)."""
        if self.lifo:
            return lifo_header(self.path)
        info = fifo_info(self.path)
        return int(info["size"]) if info else 0

    def has_bytes(self) -> bool:
        """True if it holds anything beyond an empty header."""
        if self.lifo:
            return os.path.getsize(self.path) > 4
        return any(os.path.getsize(os.path.join(self.path, n)) for n in os.listdir(self.path) if n.startswith("q"))

    def entries(self) -> tuple[list[bytes], str | None]:
        """Its entries in Scrapy's pop order, and a problem met on the way, if any.

        A LIFO file is walked back from its end rather than trusting its header, so the
        requests of a crawl killed before it wrote the header are found too.
        """
        read = lifo_entries(self.path, trust_header=False) if self.lifo else fifo_entries(self.path)
        return read.items, read.problem


def find_queues(directory: str) -> list[ScrapyQueue]:
    """Every Scrapy disk queue in ``directory`` or its download-slot folders, highest priority first."""
    found = _queues_in(directory)
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not _QUEUE_NAME.match(name):
            found += _queues_in(path)  # a DownloaderAwarePriorityQueue slot
    found.sort(key=lambda q: (-q.priority, q.start, q.path))
    return found


def _queues_in(folder: str) -> list[ScrapyQueue]:
    queues = []
    for name in os.listdir(folder):
        match = _QUEUE_NAME.match(name)
        if match:
            path = os.path.join(folder, name)
            queues.append(ScrapyQueue(path, -int(match.group(1)), bool(match.group(2)), os.path.isfile(path)))
    return queues


def holds_requests(directory: str) -> bool:
    """True if Scrapy's queue folder holds (or may hold) requests."""
    if any(queue.has_bytes() for queue in find_queues(directory)):
        return True
    try:
        with open(os.path.join(directory, "active.json"), "rb") as f:
            return bool(boundedjson.loads(f.read(boundedjson.MAX_JSON_BYTES + 1)))
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True  # unreadable: assume the worst, let adopt-scrapy look


def set_aside(directory: str) -> str:
    """Rename ``directory`` to ``<directory>.scrapy-<time>`` and return the new path."""
    stamp = int(time.time())
    while os.path.exists(aside := f"{directory}.scrapy-{stamp}"):
        stamp += 1
    os.rename(directory, aside)
    return aside


def load_entry(data: bytes) -> dict[str, Any]:
    """The request dict of one entry. Unpickles: only for queues you trust."""
    try:
        value = pickle.loads(data) if data[:1] == b"\x80" else marshal.loads(data)  # noqa: S301, S302 - asked for
    except Exception as exc:  # unpickling raises anything the pickled objects raise
        raise ValueError(f"cannot be unpickled ({type(exc).__name__}: {exc})") from None
    if not isinstance(value, dict) or "url" not in value:
        raise ValueError(f"holds a {type(value).__name__}, not a Scrapy request dict")
    return value
