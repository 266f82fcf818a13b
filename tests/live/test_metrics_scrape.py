"""/metrics of a real ``diskfrontier serve`` watching a real crawl (crawl() fetching a loopback site over
HTTP into a job directory): every series is there, and no counter goes down across a requeue-failed
and a second run (a restart of the crawl)."""

from __future__ import annotations

import http.server
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from servekit import Served

from diskfrontier import Frontier, PermanentError, Request, crawl
from diskfrontier.run.revisit import Fetched

HOSTS = 12  # more than the metrics' top hosts: the others are summed as host="other"
SERIES = {
    "diskfrontier_pending", "diskfrontier_in_flight", "diskfrontier_failed_requests", "diskfrontier_hosts",
    "diskfrontier_journal_bytes", "diskfrontier_disk_bytes", "diskfrontier_done_total",
    "diskfrontier_pushed_total", "diskfrontier_duplicates_total", "diskfrontier_retried_total",
    "diskfrontier_revisits_total", "diskfrontier_revisit_changes_total",
    "diskfrontier_revisit_not_modified_total", "diskfrontier_responses_total", "diskfrontier_received_bytes_total",
    "diskfrontier_fetch_seconds_bucket", "diskfrontier_fetch_seconds_sum", "diskfrontier_fetch_seconds_count",
    "diskfrontier_retries_total", "diskfrontier_failures_total", "diskfrontier_pending_by_priority",
    "diskfrontier_host_pending", "diskfrontier_host_in_flight", "diskfrontier_host_done", "diskfrontier_hosts_ready",
    "diskfrontier_hosts_waiting", "diskfrontier_paused", "diskfrontier_snapshot_timestamp_seconds",
}
HELD = {"diskfrontier_live_bytes", "diskfrontier_compactions_total"}  # known while a holder publishes them


class _Site(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        code = 404 if "/gone/" in self.path else 500 if "/broken/" in self.path else 200
        body = b"<html>page</html>" if code == 200 else b"no"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def site():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_port
    server.shutdown()
    server.server_close()


def fetch(request: Request, _frontier: object) -> Fetched:
    try:
        with urllib.request.urlopen(request.url, timeout=10) as answer:  # noqa: S310 - a loopback test site
            return Fetched(answer.status, body=answer.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise PermanentError("HTTP 404") from None
        raise RuntimeError(f"HTTP {exc.code}") from None


def scrape(served: Served, after: float) -> dict[tuple[str, tuple], float]:
    """The samples of /metrics once serve has read the crawl after ``after`` (a time.time() value)."""
    deadline = time.monotonic() + 60
    while True:
        with urllib.request.urlopen(served.url + "metrics", timeout=10) as answer:  # noqa: S310 - serve on loopback
            text = answer.read().decode()
        found = {(s.name, tuple(sorted(s.labels.items()))): s.value
                 for family in text_string_to_metric_families(text) for s in family.samples}
        if found.get(("diskfrontier_snapshot_timestamp_seconds", ()), 0) > after:
            return found
        assert time.monotonic() < deadline, "serve did not read the crawl again within 60 s"
        time.sleep(0.2)


def counters(found: dict[tuple[str, tuple], float]) -> dict[tuple[str, tuple], float]:
    return {key: value for key, value in found.items()
            if key[0].endswith(("_total", "_bucket", "_count", "_sum")) and key[0].startswith("diskfrontier_")}


def not_lower(before: dict, after: dict) -> None:
    """No counter of ``before`` is lower in ``after`` (one only a holder publishes may be absent from it)."""
    lower = {key: (before[key], after.get(key)) for key in before
             if after.get(key, -1 if key[0] not in HELD else before[key]) < before[key]}
    assert not lower, f"counters went down: {lower}"


def test_every_series_and_counters_that_only_go_up(tmp_path, site):
    path = str(tmp_path / "job")
    base = f"http://127.0.0.1:{site}"
    with Frontier(path) as frontier:
        # one loopback site, its pages in HOSTS slots (the frontier's hosts)
        frontier.push_many([Request(f"{base}/h{i % HOSTS}/p{i}", slot=f"h{i % HOSTS}.example") for i in range(60)])
        frontier.push_many([Request(f"{base}/gone/{i}") for i in range(3)] + [Request(f"{base}/broken/0")])
        crawl(frontier, fetch, workers=2, retries=1, backoff=0.01, max_requests=40, progress=False)
    with Served(path, "--interval", "1") as served:
        first = scrape(served, time.time())
        names = {name for name, _ in first}
        assert names >= SERIES, f"missing: {sorted(SERIES - names)}"
        assert first["diskfrontier_responses_total", (("status_class", "2xx"),)] > 0
        assert first["diskfrontier_fetch_seconds_count", ()] > 0
        hosts = {dict(labels)["host"] for name, labels in first if name == "diskfrontier_host_pending"}
        assert "other" in hosts and len(hosts) <= 11

        with Frontier(path) as frontier:
            failed = frontier.stats()["failed"]
            assert failed > 0 and frontier.requeue_failed() == failed
        second = scrape(served, time.time())
        assert second["diskfrontier_failed_requests", ()] == 0
        not_lower(counters(first), counters(second))

        with Frontier(path) as frontier:  # the crawl again: a second run of a new holder, read from status.json
            held = scrape(served, time.time())
            assert {name for name, _ in held} >= SERIES | HELD
            not_lower(counters(second), counters(held))
            crawl(frontier, fetch, workers=2, retries=1, backoff=0.01, progress=False)
        third = scrape(served, time.time())
        assert SERIES - {"diskfrontier_pending_by_priority"} <= {name for name, _ in third}  # none pending
        not_lower(counters(held), counters(third))
        assert third["diskfrontier_done_total", ()] > second["diskfrontier_done_total", ()]
        assert third["diskfrontier_pending", ()] == 0
