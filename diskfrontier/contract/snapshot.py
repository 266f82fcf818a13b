"""A crawl's state at one moment, as one JSON-ready dict: what ``status.json``, ``serve`` and ``/metrics`` show.

The same shape for a job directory (open, read-only, or published by its holder in
``status.json``) and a Redis crawl, so that the dashboard and the metrics read one thing.
"""

from __future__ import annotations

import heapq
import os
import socket
import time
from collections.abc import Iterable
from typing import Any

from .values import FailedRequest, HostInfo

SNAPSHOT_VERSION = 1
TOP_HOSTS = 50
"""Hosts a snapshot lists (those with the most pending and in-flight requests)."""
LATEST_FAILURES = 20
"""Failures a snapshot lists (the latest)."""


def top_hosts(hosts: Iterable[HostInfo], now: float,
              count: int = TOP_HOSTS) -> tuple[list[dict[str, Any]], int, int, int]:
    """The ``count`` busiest hosts as dicts, and how many hosts there are, are ready now and are waiting."""
    total = ready = waiting = 0
    busiest: list[tuple[int, int, str, HostInfo]] = []
    for info in hosts:
        total += 1
        if info.pending:
            if info.ready_at is not None and info.ready_at <= now:
                ready += 1
            else:
                waiting += 1
        entry = (info.pending + info.in_flight, info.done, info.host, info)
        if len(busiest) < count:
            heapq.heappush(busiest, entry)
        elif entry[:3] > busiest[0][:3]:
            heapq.heapreplace(busiest, entry)
    busiest.sort(key=lambda e: e[:3], reverse=True)
    return [e[3].to_dict() for e in busiest], total, ready, waiting


def failure_dict(failed: FailedRequest) -> dict[str, Any]:
    """One failure as the snapshot lists it."""
    return {"url": failed.request.url, "error": failed.error, "failed_at": failed.failed_at,
            "attempts": failed.request.attempts}


def snapshot(stats: dict[str, Any], hosts: Iterable[HostInfo], failures: Iterable[FailedRequest],
             next_ready: float | None, *, source: str, now: float | None = None,
             host_counts: tuple[int, int, int] | None = None) -> dict[str, Any]:
    """The snapshot of a crawl from its ``stats()``, ``hosts()``, latest failures and ``next_ready()``.

    ``source``: what was read (a job directory's path or a Redis URL and crawl name).
    ``host_counts``: (hosts, ready, waiting) when ``hosts`` holds only the busiest, counted elsewhere.
    """
    now = time.time() if now is None else now
    listed, total, ready, waiting = top_hosts(hosts, now)
    if host_counts is not None:
        total, ready, waiting = host_counts
    return {
        "version": SNAPSHOT_VERSION,
        "source": source,
        "taken": now,
        "pid": os.getpid(),
        "machine": socket.gethostname(),
        "paused_since": stats.get("paused_since"),
        "next_ready": next_ready,
        "stats": {k: v for k, v in stats.items() if isinstance(v, (int, float, str, dict, type(None)))},
        "hosts": listed,
        "hosts_total": total,
        "hosts_ready": ready,
        "hosts_waiting": waiting,
        "failures": [failure_dict(f) for f in failures],
    }
