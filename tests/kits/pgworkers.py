"""Worker processes on one PostgreSQL crawl (``pg_worker_child.py``); their logs are read as the Redis
workers' are (``redisworkers.read_log``, ``not_begun``, ``outstanding``)."""

from __future__ import annotations

import os
import subprocess
import sys

from paths import KITS

CHILD = os.path.join(KITS, "pg_worker_child.py")


def start_worker(url: str, crawl: str, log: str, hold: int) -> subprocess.Popen:
    """A worker on crawl ``crawl`` at ``url`` writing its log to ``log``, holding up to ``hold`` requests."""
    return subprocess.Popen([sys.executable, CHILD, url, crawl, log, str(hold)], stderr=subprocess.PIPE)
