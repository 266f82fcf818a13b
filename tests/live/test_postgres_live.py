"""``serve``, ``/api/stats``, ``/metrics`` and the page's control on a crawl in PostgreSQL, read through its
frontier as a Redis crawl is, against the session's real server."""

from __future__ import annotations

import pytest
from popkit import take
from prometheus_client.parser import text_string_to_metric_families
from servekit import with_client
from sharedlive import check_read_while_held, push_block_pause, read_while_held
from test_server import TOKEN, server_of

from diskfrontier import FrontierError, PostgresFrontier, Request
from diskfrontier.live.sources import open_source


def test_a_postgres_crawl_is_read_through_its_frontier(postgres_url, crawl_name):
    reading = read_while_held(lambda: PostgresFrontier(postgres_url, crawl=crawl_name), postgres_url, crawl_name)
    check_read_while_held(reading, "postgres", crawl_name)


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
        return metrics, await push_block_pause(client, TOKEN, "https://a.example/0")

    metrics, data = with_client(server_of(postgres_url, crawl_name, token=TOKEN), check)
    values = {s.name: s.value for f in text_string_to_metric_families(metrics) for s in f.samples if not s.labels}
    assert values["diskfrontier_pending"] == 4 and values["diskfrontier_done_total"] == 1
    assert data["origin"] == "postgres" and data["snapshot"]["stats"]["pending"] == 5
    with PostgresFrontier(postgres_url, crawl=crawl_name, create=False) as frontier:
        assert frontier.paused_since is not None
        info = frontier.host("b.example")
        assert info is not None and info.blocked_until == float("inf")
