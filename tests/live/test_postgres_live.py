"""``serve``, ``/api/stats``, ``/metrics`` and the page's control on a crawl in PostgreSQL, read through its
frontier as a Redis crawl is, against the session's real server."""

from __future__ import annotations

import pytest
from popkit import take
from prometheus_client.parser import text_string_to_metric_families
from servekit import with_client
from test_server import TOKEN, server_of

from diskfrontier import FrontierError, PostgresFrontier, Request
from diskfrontier.live.server import TOKEN_HEADER
from diskfrontier.live.sources import FrontierSource, open_source


def test_a_postgres_crawl_is_read_through_its_frontier(postgres_url, crawl_name):
    with PostgresFrontier(postgres_url, crawl=crawl_name) as frontier:
        frontier.push_many([Request(f"https://h{i % 3}.example/{i}") for i in range(30)])
        for _ in range(4):
            frontier.done(take(frontier))
        frontier.fail(take(frontier), "timeout")
        held = frontier.pop()
        assert held is not None
        source = open_source(postgres_url, crawl_name)
        assert isinstance(source, FrontierSource)
        try:
            reading = source.read()
        finally:
            source.close()
        frontier.done(held)
    shot = reading.snapshot
    assert reading.origin == "postgres" and crawl_name in shot["source"]
    assert (shot["stats"]["pending"], shot["stats"]["in_flight"], shot["stats"]["done"]) == (24, 1, 4)
    assert "leased_here" not in shot["stats"] and [f["error"] for f in shot["failures"]] == ["timeout"]
    assert shot["hosts_total"] == 3


def test_a_missing_postgres_crawl_is_an_error_and_makes_nothing(postgres_url, crawl_name):
    with pytest.raises(FrontierError, match="there is no crawl"):
        open_source(postgres_url, crawl_name)
    with pytest.raises(ValueError, match="PostgreSQL URL names a server"):
        open_source(postgres_url, None)


def test_metrics_and_control_of_a_postgres_crawl(postgres_url, crawl_name):
    with PostgresFrontier(postgres_url, crawl=crawl_name) as frontier:
        frontier.push_many([Request(f"https://a.example/{i}") for i in range(5)])
        frontier.done(take(frontier))

    async def check(client):
        metrics = await (await client.get("/metrics")).text()
        answer = await client.post("/api/push", json={"urls": ["https://b.example/", "https://a.example/0"]},
                                   headers={TOKEN_HEADER: TOKEN})
        assert answer.status == 200 and (await answer.json())["queued"] == 1
        answer = await client.post("/api/host", json={"host": "b.example", "action": "block"},
                                   headers={TOKEN_HEADER: TOKEN})
        assert answer.status == 200 and (await answer.json())["host"]["blocked_until"] == "forever"
        answer = await client.post("/api/pause", headers={TOKEN_HEADER: TOKEN})
        assert answer.status == 200, await answer.text()
        data = await (await client.get("/api/stats", params={"refresh": "1"})).json()
        return metrics, data

    metrics, data = with_client(server_of(postgres_url, crawl_name, token=TOKEN), check)
    values = {s.name: s.value for f in text_string_to_metric_families(metrics) for s in f.samples if not s.labels}
    assert values["diskfrontier_pending"] == 4 and values["diskfrontier_done_total"] == 1
    assert data["origin"] == "postgres" and data["snapshot"]["stats"]["pending"] == 5
    with PostgresFrontier(postgres_url, crawl=crawl_name, create=False) as frontier:
        assert frontier.paused_since is not None
        info = frontier.host("b.example")
        assert info is not None and info.blocked_until == float("inf")
