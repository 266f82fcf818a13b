"""Worker processes on one Redis crawl (``redis_worker_child.py``) and what their logs say: the shared
parts of the crash tests of many workers, on one server and on a cluster."""

from __future__ import annotations

import os
import subprocess
import sys

from paths import KITS

CHILD = os.path.join(KITS, "redis_worker_child.py")


def start_worker(url: str, crawl: str, log: str, hold: int) -> subprocess.Popen:
    """A worker on crawl ``crawl`` at ``url`` writing its log to ``log``, holding up to ``hold`` requests."""
    return subprocess.Popen([sys.executable, CHILD, url, crawl, log, str(hold)], stderr=subprocess.PIPE)


def read_log(path: str) -> list[list[str]]:
    """A worker's log, a list of words a line."""
    with open(path) as f:
        return [line.split() for line in f.read().splitlines()]


def not_begun(lines: list[list[str]]) -> set[str]:
    """URLs popped whose done was not begun in a worker's log: a kill then leaves them leased, and their leases
    must run out and be taken back."""
    held: set[str] = set()
    for line in lines:
        if line[0] == "P":
            held.add(line[1])
        elif line[0] in ("B", "D"):
            held.discard(line[1])
    return held


def outstanding(lines: list[list[str]]) -> set[str]:
    """URLs popped and not yet done in a worker's log."""
    held: set[str] = set()
    for line in lines:
        if line[0] == "P":
            held.add(line[1])
        elif line[0] == "D":
            held.discard(line[1])
    return held
