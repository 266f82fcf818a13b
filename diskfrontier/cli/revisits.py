"""What the command line shows of a crawl's revisits: due, overdue, the spread of intervals, the next visits.

Counting them reads every pending request (their revisit states are in their records), so ``inspect``
counts them by itself only up to ``AUTO_LIMIT`` pending requests; ``--revisits`` counts them whatever
the size.
"""

from __future__ import annotations

import heapq
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ..request.model import Request
from ..request.revisit import RevisitSummary, summarize
from .support import open_crawl_view

AUTO_LIMIT = 100_000
"""Pending requests up to which ``inspect`` counts the revisits without being asked."""


def _revisited(target: str, crawl: str | None) -> Iterator[Request]:
    with open_crawl_view(target, crawl, failed=False) as view:
        for request in view.pending_requests():
            if request.revisit is not None:
                yield request


def revisit_summary(target: str, crawl: str | None, now: float | None = None) -> RevisitSummary:
    """The revisits of the pending requests of a job directory or a Redis or PostgreSQL crawl."""
    now = time.time() if now is None else now
    return summarize((request.revisit for request in _revisited(target, crawl)), now)


def revisits_by_host(target: str, crawl: str | None, now: float | None = None) -> dict[str, RevisitSummary]:
    """The same, host by host (a request's slot)."""
    now = time.time() if now is None else now
    states: dict[str, list[Any]] = defaultdict(list)
    for request in _revisited(target, crawl):
        states[request.slot].append(request.revisit)
    return {host: summarize(found, now) for host, found in states.items()}


def next_visits(target: str, crawl: str | None, count: int) -> list[Request]:
    """The pending requests with a revisit state, soonest next visit first (``count`` of them; 0: all)."""
    found = _revisited(target, crawl)
    key = _next_visit
    return sorted(found, key=key) if not count else heapq.nsmallest(count, found, key=key)


def _next_visit(request: Request) -> float:
    assert request.revisit is not None
    return request.revisit.next_visit


def seconds_text(seconds: float) -> str:
    """A duration as people read it: 45s, 12m, 3.5h, 2.0d."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def revisit_rows(summary: RevisitSummary | None, pending: int, limit: int = AUTO_LIMIT) -> list[tuple[str, Any]]:
    """``inspect``'s rows for the revisits (a note instead when they were not counted: more than ``limit``)."""
    if summary is None:
        return [("revisits", f"not counted for {pending:,} pending requests (more than {limit:,}); "
                             f"--revisits counts them")]
    if not summary.pages:
        return []
    spread = summary.intervals
    changed = 100.0 * summary.changes / max(1, summary.visits - summary.pages)
    return [
        ("revisits", f"{summary.pages:,} pages; due now {summary.due:,} ({summary.overdue:,} overdue)"),
        ("  intervals", "  ".join(f"{name} {seconds_text(spread[name])}"
                                  for name in ("min", "p10", "median", "p90", "max"))),
        ("  fetches", f"{summary.visits:,}: changed {summary.changes:,} ({changed:.0f}% of revisits), "
                      f"304 {summary.not_modified:,}"),
    ]
