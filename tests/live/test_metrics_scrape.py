"""/metrics of a real ``diskfrontier serve`` watching a real crawl (crawl() fetching a loopback site over
HTTP into a job directory): every series is there, no counter goes down across a requeue-failed and a
second run (a restart of the crawl), and every series the Grafana board's queries name is one the
scrapes found (docs/grafana/diskfrontier.json)."""

from __future__ import annotations

import http.server
import json
import os
import re
import threading
import time
import urllib.error
import urllib.request

import pytest
from paths import REPO
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


@pytest.fixture(scope="module")
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


@pytest.fixture(scope="module")
def scrapes(tmp_path_factory, site):
    """The scrapes of serve: after a first run, after a requeue-failed, while a second run holds the
    directory (from its status.json), after it."""
    path = str(tmp_path_factory.mktemp("metrics") / "job")
    base = f"http://127.0.0.1:{site}"
    with Frontier(path) as frontier:
        # one loopback site, its pages in HOSTS slots (the frontier's hosts)
        frontier.push_many([Request(f"{base}/h{i % HOSTS}/p{i}", slot=f"h{i % HOSTS}.example") for i in range(60)])
        frontier.push_many([Request(f"{base}/gone/{i}") for i in range(3)] + [Request(f"{base}/broken/0")])
        crawl(frontier, fetch, workers=2, retries=1, backoff=0.01, max_requests=40, progress=False)
    out = {}
    with Served(path, "--interval", "1") as served:
        out["first"] = scrape(served, time.time())
        with Frontier(path) as frontier:
            failed = frontier.stats()["failed"]
            assert failed > 0 and frontier.requeue_failed() == failed
        out["requeued"] = scrape(served, time.time())
        with Frontier(path) as frontier:  # the crawl again: a second run of a new holder, read from status.json
            out["held"] = scrape(served, time.time())
            crawl(frontier, fetch, workers=2, retries=1, backoff=0.01, progress=False)
        out["last"] = scrape(served, time.time())
    return out


def test_every_series_is_exported(scrapes):
    first = scrapes["first"]
    names = {name for name, _ in first}
    assert names >= SERIES, f"missing: {sorted(SERIES - names)}"
    assert {name for name, _ in scrapes["held"]} >= SERIES | HELD
    assert {name for name, _ in scrapes["last"]} >= SERIES - {"diskfrontier_pending_by_priority"}  # none pending
    assert first["diskfrontier_responses_total", (("status_class", "2xx"),)] > 0
    assert first["diskfrontier_failures_total", (("kind", "fail"),)] == 3  # the three 404s
    assert first["diskfrontier_fetch_seconds_count", ()] > 0
    hosts = {dict(labels)["host"] for name, labels in first if name == "diskfrontier_host_pending"}
    assert "other" in hosts and len(hosts) == 11  # the top 10 and the others


def test_counters_only_go_up_across_a_requeue_failed_and_a_restart(scrapes):
    first, requeued, held, last = (scrapes[name] for name in ("first", "requeued", "held", "last"))
    assert first["diskfrontier_failed_requests", ()] > 0 and requeued["diskfrontier_failed_requests", ()] == 0
    not_lower(counters(first), counters(requeued))
    not_lower(counters(requeued), counters(held))
    not_lower(counters(held), counters(last))
    assert last["diskfrontier_done_total", ()] > requeued["diskfrontier_done_total", ()]
    assert last["diskfrontier_failures_total", (("kind", "fail"),)] == 6  # the 404s failed again once requeued
    assert last["diskfrontier_pending", ()] == 0


# ------------------------------------------------------------------ the Grafana board
BOARD = os.path.join(REPO, "docs", "grafana", "diskfrontier.json")
FUNCTIONS = {"sum", "max", "min", "avg", "count", "topk", "bottomk", "rate", "irate", "increase", "delta",
             "histogram_quantile", "label_values", "clamp_min", "abs", "time"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_:]*")
_MATCHERS = re.compile(r"([A-Za-z_][A-Za-z0-9_:]*)\{([^}]*)\}")


def queries(board: dict) -> list[str]:
    """Every PromQL query of the board: its panels' targets and its query variables."""
    out = [target["expr"] for panel in board["panels"] for target in panel.get("targets", [])]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            out.append(variable["definition"])
    return out


def balanced(expr: str) -> bool:
    depth: list[str] = []
    pairs = {")": "(", "]": "[", "}": "{"}
    for char in _STRING.sub('""', expr):
        if char in "([{":
            depth.append(char)
        elif char in pairs and (not depth or depth.pop() != pairs[char]):
            return False
    return not depth


def check_query(expr: str, exported: dict[str, set[str]]) -> list[str]:
    """What is wrong with one query: unbalanced, an unknown function, a series or label the exporter lacks."""
    problems = [] if balanced(expr) else ["unbalanced brackets"]
    bare = _STRING.sub('""', expr)
    bare = re.sub(r"\[[^\]]*\]", "", bare)  # ranges: [5m], [$__rate_interval]
    for match in _WORD.finditer(bare):
        word, after = match.group(), bare[match.end():].lstrip()[:1]
        if word.startswith("diskfrontier_"):
            if word not in exported:
                problems.append(f"{word} is not exported")
        elif after == "(" and word not in FUNCTIONS | KEYWORDS:
            problems.append(f"unknown function {word}")
    for name, inside in _MATCHERS.findall(_STRING.sub('""', expr)):
        for label in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", inside):
            if label != "instance" and name in exported and label not in exported[name]:
                problems.append(f"{name} has no label {label}")
    for grouped in re.findall(r"\bby\s*\(([^)]*)\)", bare):
        for label in (part.strip() for part in grouped.split(",")):
            if not any(label in labels for labels in exported.values()):
                problems.append(f"no series has the label {label}")
    return problems


def test_the_grafana_board_queries_only_what_a_scrape_exports(scrapes):
    with open(BOARD, encoding="utf-8") as f:
        board = json.load(f)
    exported: dict[str, set[str]] = {}
    for found in scrapes.values():
        for name, labels in found:
            exported.setdefault(name, set()).update(label for label, _ in labels)
    found_queries = queries(board)
    assert len(found_queries) >= 16
    problems = {expr: check_query(expr, exported) for expr in found_queries}
    assert not {expr: p for expr, p in problems.items() if p}
    named = {word for expr in found_queries for word in re.findall(r"diskfrontier_[a-z_]+", expr)}
    for must in ("diskfrontier_responses_total", "diskfrontier_received_bytes_total",
                 "diskfrontier_fetch_seconds_bucket", "diskfrontier_retries_total", "diskfrontier_failures_total",
                 "diskfrontier_pending", "diskfrontier_in_flight", "diskfrontier_disk_bytes",
                 "diskfrontier_journal_bytes", "diskfrontier_host_pending"):
        assert must in named, f"the board has no panel of {must}"


def test_the_query_check_finds_what_is_wrong():
    exported = {"diskfrontier_pending": set(), "diskfrontier_responses_total": {"status_class"}}
    assert check_query('sum by (status_class) (rate(diskfrontier_responses_total{instance=~"$i"}[5m]))',
                       exported) == []
    assert check_query("sum(rate(diskfrontier_pending[5m])", exported) == ["unbalanced brackets"]
    assert check_query("summ(diskfrontier_pending)", exported) == ["unknown function summ"]
    assert check_query("diskfrontier_pendings", exported) == ["diskfrontier_pendings is not exported"]
    assert check_query('diskfrontier_pending{host="a"}', exported) == ["diskfrontier_pending has no label host"]
