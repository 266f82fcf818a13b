"""A crawl's snapshot (``diskfrontier.contract.snapshot``) as Prometheus metric families.

``metric_families(snapshot)`` builds them from one snapshot dict; ``SnapshotCollector`` is a
custom collector (``collect()`` asks a callable for the latest snapshot each scrape) to register
in a registry of one's own, never the global one, so that a process can serve several crawls
(the Scrapy scheduler, ``serve``). A figure the snapshot does not have (a Redis crawl keeps no
per-priority counts; a job directory read from its files knows nothing in flight while it is
held) is left out, not reported as 0.

Names: ``diskfrontier_pending``, ``diskfrontier_in_flight``, ``diskfrontier_done_total``,
``diskfrontier_failed_total``, ``diskfrontier_pushed_total``, ``diskfrontier_duplicates_total``,
``diskfrontier_pending_by_priority{priority="..."}``, ``diskfrontier_hosts_ready``,
``diskfrontier_hosts_waiting``, ``diskfrontier_paused`` (0 or 1), a job directory's
``diskfrontier_journal_bytes``, ``diskfrontier_live_bytes``, ``diskfrontier_last_checkpoint`` (Unix time),
``diskfrontier_compactions_total`` and ``diskfrontier_checkpoints_total`` (its holder's run),
``diskfrontier_revisits_total``, ``diskfrontier_revisit_changes_total`` and
``diskfrontier_revisit_not_modified_total`` (revisits, those that found a change, those answered 304), and
``diskfrontier_snapshot_timestamp_seconds`` (when the snapshot was taken).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX = "diskfrontier_"

GAUGES = {
    "pending": "Requests waiting to be handed out",
    "in_flight": "Requests handed out and not finished (Redis: leased by any client)",
    "journal_bytes": "Bytes of a job directory's journal",
    "live_bytes": "Bytes of a job directory's journal that a compaction keeps (pending and failed requests)",
    "last_checkpoint": "When a job directory's holder last checkpointed its journal (Unix time)",
}
COUNTERS = {
    "done": "Requests done (a job directory's holder: by this run)",
    "failed": "Requests recorded as failed and not requeued",
    "pushed": "Requests queued (a job directory's holder: by this run; Redis: by every client)",
    "duplicates": "Pushes refused as seen before",
    "compactions": "Compactions of a job directory's journal by its holder's run",
    "checkpoints": "Checkpoints of a job directory's journal by its holder's run",
    "revisits": "Fetches of pages fetched before, finished with their next visit scheduled",
    "revisit_changes": "Revisits that found the page changed",
    "revisit_not_modified": "Revisits answered 304 Not Modified",
}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def metric_families(snapshot: Mapping[str, Any] | None) -> list[Metric]:
    """The metric families of one snapshot (none for None: nothing read yet)."""
    if snapshot is None:
        return []
    stats = snapshot.get("stats") or {}
    out: list[Metric] = []
    for key, text in GAUGES.items():
        value = _number(stats.get(key))
        if value is not None:
            out.append(GaugeMetricFamily(PREFIX + key, text, value=value))
    for key, text in COUNTERS.items():
        value = _number(stats.get(key))
        if value is not None:
            out.append(CounterMetricFamily(PREFIX + key + "_total", text, value=value))
    by_priority = stats.get("pending_by_priority")
    if isinstance(by_priority, Mapping):
        family = GaugeMetricFamily(PREFIX + "pending_by_priority", "Requests waiting, per priority",
                                   labels=["priority"])
        for priority, count in sorted(by_priority.items(), key=lambda item: -int(item[0])):
            value = _number(count)
            if value is not None:
                family.add_metric([str(priority)], value)
        out.append(family)
    for key, text in (("hosts_ready", "Hosts with a request that may be handed out now"),
                      ("hosts_waiting", "Hosts with pending requests held back by a delay, a block or a time")):
        value = _number(snapshot.get(key))
        if value is not None:
            out.append(GaugeMetricFamily(PREFIX + key, text, value=value))
    out.append(GaugeMetricFamily(PREFIX + "paused", "1 while the crawl is paused, else 0",
                                 value=0.0 if snapshot.get("paused_since") is None else 1.0))
    taken = _number(snapshot.get("taken"))
    if taken is not None:
        out.append(GaugeMetricFamily(PREFIX + "snapshot_timestamp_seconds", "When these figures were read (Unix time)",
                                     value=taken))
    return out


class SnapshotCollector(Collector):
    """A collector giving the metric families of ``latest()``'s snapshot at each scrape."""

    def __init__(self, latest: Callable[[], Mapping[str, Any] | None]) -> None:
        self.latest = latest

    def collect(self) -> Iterator[Metric]:
        yield from metric_families(self.latest())


def registry_of(latest: Callable[[], Mapping[str, Any] | None]) -> CollectorRegistry:
    """A registry of its own (not prometheus_client's global one) holding a ``SnapshotCollector``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(latest))
    return registry


def metrics_text(snapshot: Mapping[str, Any] | None) -> bytes:
    """The Prometheus text exposition of one snapshot."""
    return generate_latest(registry_of(lambda: snapshot))
