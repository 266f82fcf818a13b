"""A crawl's snapshot (``diskfrontier.contract.snapshot``) as Prometheus metric families.

``metric_families(snapshot)`` builds them from one snapshot dict; ``SnapshotCollector`` is a
custom collector (``collect()`` asks a callable for the latest snapshot each scrape) to register
in a registry of one's own, never the global one, so that a process can serve several crawls
(the Scrapy scheduler, ``serve``). A figure the snapshot does not have (a Redis crawl keeps no
per-priority counts; a job directory read from its files knows nothing in flight while it is
held) is left out, not reported as 0.

Every ``_total`` is a counter that only goes up, across restarts too: a job directory's
``done``, ``pushed``... are its ``<name>_total`` stats (summed over every run, ``outcomes.json``),
a Redis crawl's the ``meta`` counters. The requests failed now (which ``requeue-failed`` lowers) are
the gauge ``diskfrontier_failed_requests``; failures as they happen are ``diskfrontier_failures_total``.

Names (``docs/guide/metrics.md`` lists them with their meaning):

* gauges: ``diskfrontier_pending``, ``diskfrontier_in_flight``, ``diskfrontier_failed_requests``,
  ``diskfrontier_pending_by_priority{priority}``, ``diskfrontier_hosts_ready``, ``diskfrontier_hosts_waiting``,
  ``diskfrontier_hosts`` (known hosts), ``diskfrontier_paused`` (0 or 1), a job directory's
  ``diskfrontier_journal_bytes``, ``diskfrontier_live_bytes``, ``diskfrontier_disk_bytes`` (every file of
  the directory) and ``diskfrontier_last_checkpoint_timestamp_seconds``; the busiest hosts'
  ``diskfrontier_host_pending{host}``, ``diskfrontier_host_in_flight{host}`` (the others summed as
  ``host="other"``) and ``diskfrontier_host_done{host}``; ``diskfrontier_snapshot_timestamp_seconds``.
* counters: ``diskfrontier_done_total``, ``diskfrontier_pushed_total``, ``diskfrontier_duplicates_total``,
  ``diskfrontier_retried_total``, ``diskfrontier_compactions_total``, ``diskfrontier_revisits_total``,
  ``diskfrontier_revisit_changes_total``, ``diskfrontier_revisit_not_modified_total``; the outcomes the runners
  report (``contract/outcomes.py``): ``diskfrontier_responses_total{status_class}``,
  ``diskfrontier_received_bytes_total``, ``diskfrontier_retries_total``, ``diskfrontier_failures_total{kind}``.
* a histogram: ``diskfrontier_fetch_seconds`` (``_bucket{le}``, ``_sum``, ``_count``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ..contract.outcomes import FAILURE_KINDS, FETCH_BUCKETS, STATUS_CLASSES, bucket_key
from .sources import directory_bytes

PREFIX = "diskfrontier_"
TOP_HOSTS = 10
"""The hosts with series of their own by default (the busiest: most pending and in flight, then most done)."""
OTHER = "other"
"""The ``host`` label of the hosts without series of their own, summed."""

GAUGES = {
    "pending": ("pending", "Requests waiting to be handed out"),
    "in_flight": ("in_flight", "Requests handed out and not finished (Redis: leased by any client)"),
    "failed_requests": ("failed", "Requests recorded as failed now, not requeued (requeue-failed lowers it)"),
    "hosts": ("hosts", "Hosts the crawl knows"),
    "journal_bytes": ("journal_bytes", "Bytes of a job directory's journal"),
    "live_bytes": ("live_bytes",
                   "Bytes of a job directory's journal that a compaction keeps (pending and failed requests)"),
    "last_checkpoint_timestamp_seconds": ("last_checkpoint",
                                          "When a job directory's holder last checkpointed its journal (Unix time)"),
}
COUNTERS = {
    "done": "Requests done (every run)",
    "pushed": "Requests queued (every run; Redis: by every client)",
    "duplicates": "Pushes refused as seen before (every run)",
    "retried": "Requests given back to be tried again (every run)",
    "compactions": "Compactions of a job directory's journal since it was made",
    "revisits": "Fetches of pages fetched before, finished with their next visit scheduled",
    "revisit_changes": "Revisits that found the page changed",
    "revisit_not_modified": "Revisits answered 304 Not Modified",
}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _counter_value(stats: Mapping[str, Any], key: str) -> float | None:
    """A counter of every run: a job directory's ``<key>_total`` (``compactions_total`` is the only name it
    has), else ``<key>`` (a Redis crawl's counters are every run's)."""
    total = _number(stats.get(key + "_total"))
    return total if total is not None else _number(stats.get(key))


def disk_bytes(root: str) -> int | None:
    """The bytes of every file under the job directory ``root`` (None if ``root`` is not a job directory)."""
    if not root or not os.path.isfile(os.path.join(root, "frontier.json")):
        return None
    return directory_bytes(root)


def _outcome_families(stats: Mapping[str, Any]) -> list[Metric]:
    """The outcome counters the runners report (left out of a snapshot that has none: an older crawl)."""
    if _number(stats.get("fetch_seconds_count")) is None:
        return []
    out: list[Metric] = []
    responses = CounterMetricFamily(PREFIX + "responses", "Responses received, by HTTP status class",
                                    labels=["status_class"])
    for name in STATUS_CLASSES:
        responses.add_metric([name], _number(stats.get(f"responses_{name}")) or 0.0)
    out.append(responses)
    out.append(CounterMetricFamily(PREFIX + "received_bytes", "Bytes of the response bodies received",
                                   value=_number(stats.get("received_bytes")) or 0.0))
    count = _number(stats.get("fetch_seconds_count")) or 0.0
    buckets = [(f"{bound:g}", _number(stats.get(bucket_key(bound))) or 0.0) for bound in FETCH_BUCKETS]
    out.append(HistogramMetricFamily(PREFIX + "fetch_seconds", "How long the fetches took (the handler's time)",
                                     buckets=[*buckets, ("+Inf", count)],
                                     sum_value=_number(stats.get("fetch_seconds_sum")) or 0.0))
    out.append(CounterMetricFamily(PREFIX + "retries", "Fetches given back for another attempt",
                                   value=_number(stats.get("retries")) or 0.0))
    failures = CounterMetricFamily(PREFIX + "failures", "Failed fetches, by kind (retried or not)", labels=["kind"])
    for kind in FAILURE_KINDS:
        failures.add_metric([kind], _number(stats.get(f"failures_{kind}")) or 0.0)
    out.append(failures)
    return out


def _host_families(snapshot: Mapping[str, Any], stats: Mapping[str, Any], top: int) -> list[Metric]:
    """The ``top`` busiest hosts' series, and ``other`` for the rest (pending and in flight)."""
    hosts = snapshot.get("hosts")
    if not isinstance(hosts, list):
        return []
    listed = [h for h in hosts if isinstance(h, Mapping) and isinstance(h.get("host"), str)]
    # the snapshot lists blocked hosts first (for the page); the series are of the most pending and in flight
    listed.sort(key=lambda h: (-((_number(h.get("pending")) or 0) + (_number(h.get("in_flight")) or 0)),
                               -(_number(h.get("done")) or 0)))
    listed = listed[:top]
    pending = GaugeMetricFamily(PREFIX + "host_pending", "Requests waiting, of the busiest hosts and the others",
                                labels=["host"])
    in_flight = GaugeMetricFamily(PREFIX + "host_in_flight", "Requests in flight, of the busiest hosts and the "
                                  "others", labels=["host"])
    done = GaugeMetricFamily(PREFIX + "host_done", "Requests done (and failed) of each of the busiest hosts",
                             labels=["host"])
    for family, key in ((pending, "pending"), (in_flight, "in_flight"), (done, "done")):
        named = 0.0
        for host in listed:
            value = _number(host.get(key))
            if value is not None:
                family.add_metric([host["host"]], value)
                named += value
        whole = _number(stats.get(key))
        if key != "done" and whole is not None:
            family.add_metric([OTHER], max(0.0, whole - named))
    return [pending, in_flight, done]


def metric_families(snapshot: Mapping[str, Any] | None, *, top_hosts: int = TOP_HOSTS) -> list[Metric]:
    """The metric families of one snapshot (none for None: nothing read yet), with series of their own for
    the ``top_hosts`` busiest hosts the snapshot lists."""
    if snapshot is None:
        return []
    stats = snapshot.get("stats") or {}
    out: list[Metric] = []
    for name, (key, text) in GAUGES.items():
        value = _number(stats.get(key))
        if value is not None:
            out.append(GaugeMetricFamily(PREFIX + name, text, value=value))
    for key, text in COUNTERS.items():
        value = _counter_value(stats, key)
        if value is not None:
            out.append(CounterMetricFamily(PREFIX + key, text, value=value))
    source = snapshot.get("source")
    size = disk_bytes(source) if isinstance(source, str) else None
    if size is not None:
        out.append(GaugeMetricFamily(PREFIX + "disk_bytes", "Bytes of every file of the job directory", value=size))
    out += _outcome_families(stats)
    by_priority = stats.get("pending_by_priority")
    if isinstance(by_priority, Mapping):
        family = GaugeMetricFamily(PREFIX + "pending_by_priority", "Requests waiting, per priority",
                                   labels=["priority"])
        for priority, count in sorted(by_priority.items(), key=lambda item: -int(item[0])):
            value = _number(count)
            if value is not None:
                family.add_metric([str(priority)], value)
        out.append(family)
    if top_hosts > 0:
        out += _host_families(snapshot, stats, top_hosts)
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
    """A collector giving the metric families of ``latest()``'s snapshot at each scrape (``top_hosts``:
    the hosts with series of their own)."""

    def __init__(self, latest: Callable[[], Mapping[str, Any] | None], top_hosts: int = TOP_HOSTS) -> None:
        if isinstance(top_hosts, bool) or not isinstance(top_hosts, int) or top_hosts < 0:
            raise ValueError(f"top_hosts must be a whole number of at least 0, got {top_hosts!r}")
        self.latest = latest
        self.top_hosts = top_hosts

    def collect(self) -> Iterator[Metric]:
        yield from metric_families(self.latest(), top_hosts=self.top_hosts)


def registry_of(latest: Callable[[], Mapping[str, Any] | None], top_hosts: int = TOP_HOSTS) -> CollectorRegistry:
    """A registry of its own (not prometheus_client's global one) holding a ``SnapshotCollector``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(latest, top_hosts))
    return registry


def metrics_text(snapshot: Mapping[str, Any] | None, top_hosts: int = TOP_HOSTS) -> bytes:
    """The Prometheus text exposition of one snapshot."""
    return generate_latest(registry_of(lambda: snapshot, top_hosts))
