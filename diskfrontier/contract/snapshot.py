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
"""Hosts a snapshot lists (the busiest: blocked or failing first, then by requests pending, in flight and done)."""
LATEST_FAILURES = 20
"""Failures a snapshot lists (the latest)."""


def host_rank(info: HostInfo, now: float) -> tuple[int, int, str]:
    """Where a host comes among the busiest (lowest first): blocked or failing now (what a person watching
    looks for), then by its requests pending, in flight and done together."""
    blocked = info.blocked_until is not None and info.blocked_until > now
    return (0 if blocked or info.failures else 1, -(info.pending + info.in_flight + info.done), info.host)


def top_hosts(hosts: Iterable[HostInfo], now: float,
              count: int = TOP_HOSTS) -> tuple[list[dict[str, Any]], int, int, int]:
    """The ``count`` busiest hosts as dicts (``host_rank``), and how many hosts there are, are ready now and
    are waiting."""
    total = ready = waiting = 0
    ranked: list[tuple[int, int, str]] = []
    infos: dict[str, HostInfo] = {}
    for info in hosts:
        total += 1
        if info.pending:
            if info.ready_at is not None and info.ready_at <= now:
                ready += 1
            else:
                waiting += 1
        infos[info.host] = info
    ranked = heapq.nsmallest(count, (host_rank(info, now) for info in infos.values()))
    return [infos[rank[2]].to_dict() for rank in ranked], total, ready, waiting


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
