"""/metrics: a snapshot as Prometheus text, parsed back with prometheus_client's own parser."""

from __future__ import annotations

from livecrawl import DONE, FAILED, PUSHED
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from diskfrontier.live.metrics import SnapshotCollector, metric_families, metrics_text
from diskfrontier.live.sources import open_source


def samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_the_metrics_of_a_job_directory(jobdir):
    shot = open_source(jobdir, None).read().snapshot
    found = samples(metrics_text(shot).decode())
    pending = PUSHED - DONE - FAILED
    assert found["diskfrontier_pending", ()] == pending
    assert found["diskfrontier_in_flight", ()] == 0
    assert found["diskfrontier_done_total", ()] == DONE
    assert found["diskfrontier_failed_requests", ()] == FAILED
    assert found["diskfrontier_hosts_ready", ()] == 6 and found["diskfrontier_hosts_waiting", ()] == 1
    assert found["diskfrontier_paused", ()] == 0
    by_priority = {dict(labels)["priority"]: v for (name, labels), v in found.items()
                   if name == "diskfrontier_pending_by_priority"}
    assert set(by_priority) == {"0", "1", "2"} and sum(by_priority.values()) == pending
    assert found["diskfrontier_snapshot_timestamp_seconds", ()] == shot["taken"]
    types = {f.name: f.type for f in text_string_to_metric_families(metrics_text(shot).decode())}
    assert types["diskfrontier_done"] == "counter" and types["diskfrontier_pending"] == "gauge"


def test_every_named_metric_and_the_figures_a_source_lacks_left_out():
    shot = {"taken": 5.0, "paused_since": 3.0, "hosts_ready": 2, "hosts_waiting": 0,
            "stats": {"pending": 7, "in_flight": None, "done": 3, "failed": 1, "pushed": 12, "duplicates": 2}}
    found = samples(metrics_text(shot).decode())
    assert {name for name, _ in found} == {
        "diskfrontier_pending", "diskfrontier_done_total", "diskfrontier_failed_requests", "diskfrontier_pushed_total",
        "diskfrontier_duplicates_total", "diskfrontier_hosts_ready", "diskfrontier_hosts_waiting",
        "diskfrontier_paused", "diskfrontier_snapshot_timestamp_seconds"}  # no in_flight, no per-priority counts
    assert found["diskfrontier_paused", ()] == 1 and found["diskfrontier_pushed_total", ()] == 12
    assert metric_families(None) == []


def test_the_collector_serves_the_latest_snapshot_from_a_registry_of_its_own():
    from prometheus_client import REGISTRY

    latest: dict[str, dict | None] = {"shot": None}
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: latest["shot"]))
    assert generate_latest(registry) == b""
    latest["shot"] = {"taken": 1.0, "stats": {"pending": 1}}
    assert samples(generate_latest(registry).decode())["diskfrontier_pending", ()] == 1
    latest["shot"] = {"taken": 2.0, "stats": {"pending": 9}}
    assert samples(generate_latest(registry).decode())["diskfrontier_pending", ()] == 9
    assert b"diskfrontier_" not in generate_latest(REGISTRY)  # nothing registered globally


def test_the_revisit_counters_are_exported_when_the_snapshot_has_them():
    shot = {"taken": 5.0, "stats": {"pending": 1, "revisits": 9, "revisit_changes": 2, "revisit_not_modified": 6}}
    found = samples(metrics_text(shot).decode())
    assert found["diskfrontier_revisits_total", ()] == 9
    assert found["diskfrontier_revisit_changes_total", ()] == 2
    assert found["diskfrontier_revisit_not_modified_total", ()] == 6
    assert ("diskfrontier_revisits_total", ()) not in samples(metrics_text({"taken": 5.0, "stats": {}}).decode())
