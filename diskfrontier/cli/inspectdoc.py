"""``inspect --json``: one document of one shape, whether it describes a job directory that is stopped,
one that a running crawl holds, or a Redis crawl (``schemas/inspect.json``).

What a source cannot tell is null, never left out: a stopped job directory does not know which of its
hosts are ready, a running one publishes this run's counts and not every run's done, a Redis crawl keeps
no files.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..jobdir.inbox import Survey
from ..jobdir.journal import MAGIC
from ..jobdir.layout import Layout, read_meta
from ..jobdir.reader import JobInfo
from ..redisfrontier.connection import shown_url
from ..request.revisit import RevisitSummary
from .jsonout import iso_to_unix

RUN_COUNTS = ("pushed", "duplicates", "popped", "done", "dropped", "retried", "requeued", "recovered",
              "refetch_scheduled", "commands", "revisits", "revisit_changes", "revisit_not_modified")
"""The counts a running crawl publishes of its own run, in ``run``."""


def jobdir_state(label: str) -> tuple[str, str]:
    """The state (``jsonout.STATES``) and its sentence, of the label ``inspect_jobdir`` gives."""
    if label == "clean":
        return "clean", "closed cleanly"
    if label.startswith("in use"):
        return "held", f"{label}, which publishes no status (an older version, or it stopped publishing)"
    if label.startswith("format"):
        return "old_format", label
    return "needs_recovery", label


def _document(**fields: Any) -> dict[str, Any]:
    """The fields in the schema's order; every one must be given."""
    order = ("backend", "target", "crawl", "state", "state_text", "pid", "machine", "status_at", "format_version",
             "order", "created_at", "paused", "paused_at", "pending", "pending_by_priority", "in_flight", "done",
             "failed", "seen", "seen_exact", "delayed", "dropped", "hosts", "hosts_ready", "next_ready_at",
             "next_due_at", "settings", "storage", "run", "failing_hosts", "inbox", "revisits")
    assert set(fields) == set(order), set(fields) ^ set(order)
    return {name: fields[name] for name in order}


def _revisits(counted: RevisitSummary | None) -> dict[str, Any] | None:
    return None if counted is None else counted.as_dict()


def _by_priority(counts: dict[Any, int]) -> dict[str, int]:
    return {str(priority): count for priority, count in counts.items()}


def stopped_document(info: JobInfo, state: str, state_text: str, failing: dict[str, int], held: Survey,
                     counted: RevisitSummary | None) -> dict[str, Any]:
    """A job directory that no crawl runs on, from ``inspect_jobdir``."""
    return _document(
        backend="jobdir", target=info.path, crawl=None, state=state, state_text=state_text, pid=info.holder_pid,
        machine=None, status_at=None, format_version=info.format_version, order=info.order,
        created_at=iso_to_unix(info.created), paused=info.paused_since is not None, paused_at=info.paused_since,
        pending=info.pending, pending_by_priority=_by_priority(info.pending_by_priority), in_flight=None,
        done=info.done, failed=info.failed, seen=info.seen, seen_exact=info.seen_exact, delayed=info.delayed,
        dropped=None, hosts=info.hosts, hosts_ready=None, next_ready_at=None, next_due_at=info.next_due,
        settings={"delay": None, "per_host": None, "prefer": None},
        storage={"journal_bytes": info.journal_bytes, "live_bytes": info.live_bytes, "queue_bytes": info.queue_bytes,
                 "seen_bytes": info.seen_bytes, "reclaimable_bytes": info.reclaimable_bytes,
                 "torn_bytes": info.torn_bytes, "checkpoint_offset": info.checkpoint_at,
                 "checkpoint_written_at": info.checkpoint_time, "compactions": info.compactions},
        run=None, failing_hosts=failing, inbox=held.as_dict(), revisits=_revisits(counted))


def _file_bytes(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _folder_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        total += sum(_file_bytes(os.path.join(root, name)) for name in files)
    return total


def live_document(path: str, live: dict[str, Any], state_text: str, failing: dict[str, int], held: Survey,
                  counted: RevisitSummary | None) -> dict[str, Any]:
    """A job directory that a running crawl holds, from the ``status.json`` it publishes (and the sizes of
    its files)."""
    stats = live["stats"]
    layout = Layout(path)
    meta = read_meta(layout)
    journal = stats.get("journal_bytes")
    kept = stats.get("live_bytes")
    reclaimable = None if journal is None or kept is None else max(0, journal - len(MAGIC) - kept)
    delay = stats.get("delay")
    return _document(
        backend="jobdir", target=path, crawl=None, state="running", state_text=state_text, pid=live.get("pid"),
        machine=live.get("machine"), status_at=live.get("taken"), format_version=meta["version"],
        order=stats.get("order", meta["order"]), created_at=iso_to_unix(meta.get("created")),
        paused=live.get("paused_since") is not None, paused_at=live.get("paused_since"),
        pending=stats.get("pending", 0), pending_by_priority=_by_priority(stats.get("pending_by_priority") or {}),
        in_flight=stats.get("in_flight"), done=None, failed=stats.get("failed", 0), seen=stats.get("seen", 0),
        seen_exact=True, delayed=stats.get("delayed", 0), dropped=None,
        hosts=live.get("hosts_ready", 0) + live.get("hosts_waiting", 0),
        hosts_ready=live.get("hosts_ready"), next_ready_at=live.get("next_ready"), next_due_at=None,
        settings={"delay": delay if isinstance(delay, (int, float)) else None, "per_host": None, "prefer": None},
        storage={"journal_bytes": journal, "live_bytes": kept, "queue_bytes": _folder_bytes(layout.queue_dir),
                 "seen_bytes": _file_bytes(layout.seen), "reclaimable_bytes": reclaimable, "torn_bytes": None,
                 "checkpoint_offset": None, "checkpoint_written_at": stats.get("last_checkpoint"),
                 "compactions": stats.get("compactions_total")},
        run={name: stats[name] for name in RUN_COUNTS if isinstance(stats.get(name), int)},
        failing_hosts=failing, inbox=held.as_dict(), revisits=_revisits(counted))


def redis_document(url: str, crawl: str, stats: dict[str, Any], ready: float | None, live_clients: int,
                   failing: dict[str, int], counted: RevisitSummary | None) -> dict[str, Any]:
    """A Redis or PostgreSQL crawl, from its ``stats()``, ``next_ready()`` and the clients that are live."""
    state = "running" if live_clients else "idle"
    text = f"{live_clients:,} live client{'s' * (live_clients != 1)}" if live_clients else "no live client"
    return _document(
        backend=stats.get("backend", "redis"), target=shown_url(url), crawl=crawl, state=state, state_text=text,
        pid=None, machine=None,
        status_at=time.time(), format_version=None, order=stats["order"], created_at=None,
        paused=stats["paused_since"] is not None, paused_at=stats["paused_since"], pending=stats["pending"],
        pending_by_priority=_by_priority(stats.get("pending_by_priority") or {}), in_flight=stats["in_flight"],
        done=stats["done"], failed=stats["failed"], seen=stats["seen"],
        seen_exact=stats.get("seen_layout") != "bloom", delayed=stats["delayed"], dropped=stats["dropped"],
        hosts=stats["hosts"], hosts_ready=stats["ready_hosts"], next_ready_at=ready, next_due_at=None,
        settings={"delay": stats["delay"], "per_host": stats["per_host"] or None,
                  "prefer": stats.get("prefer", "priority")},
        storage=None, run=None, failing_hosts=failing, inbox=None, revisits=_revisits(counted))
