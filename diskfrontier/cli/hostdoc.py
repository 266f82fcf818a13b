"""A host as ``hosts --json`` and ``host --json`` give it: one shape (``schemas/host.json``), whatever the
source.

``delay`` is the host's own delay (null: the crawl's delay applies), ``ready_at`` when its next request
may be handed out (Unix seconds; null when nothing is pending or when the source cannot tell: a job
directory read without its lock), ``blocked_until`` Unix seconds, ``"forever"``, or null.
"""

from __future__ import annotations

from typing import Any

from ..contract.values import HostInfo
from ..jobdir.reader import HostRow
from .jsonout import instant


def host_document(*, host: str, pending: int, in_flight: int | None, done: int, delay: float | None,
                  ready_at: float | None, blocked_until: float | None, budget: int | None,
                  failures: int) -> dict[str, Any]:
    """The fields of one host, in the schema's order."""
    return {"host": host, "pending": pending, "in_flight": in_flight, "done": done, "delay": delay,
            "ready_at": ready_at if pending else None, "blocked_until": instant(blocked_until or None),
            "budget": budget, "failures": failures}


def from_row(row: HostRow, published: dict[str, Any] | None = None) -> dict[str, Any]:
    """A host of a read-only view; ``published``: what the crawl holding it published of it (its
    ``status.json`` lists the busiest hosts), for the counts a view cannot know."""
    in_flight, ready_at, pending = row.in_flight, None, row.pending
    if published is not None:
        in_flight, ready_at, pending = published.get("in_flight"), published.get("ready_at"), published["pending"]
    return host_document(host=row.host, pending=pending, in_flight=in_flight, done=row.done, delay=row.delay,
                         ready_at=ready_at, blocked_until=row.blocked_until, budget=row.budget,
                         failures=row.failures)


def from_info(info: HostInfo, own_delay: float | None) -> dict[str, Any]:
    """A host as an open frontier tells it (``HostInfo``: its delay is the one in effect), with its own delay."""
    return host_document(host=info.host, pending=info.pending, in_flight=info.in_flight, done=info.done,
                         delay=own_delay, ready_at=info.ready_at, blocked_until=info.blocked_until,
                         budget=info.budget, failures=info.failures)


def published_hosts(live: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The hosts a running crawl listed in its ``status.json``, by name."""
    if live is None:
        return {}
    return {entry["host"]: entry for entry in live.get("hosts", ()) if isinstance(entry, dict) and "host" in entry}
