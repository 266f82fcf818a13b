"""The dashboard's source and control on a crawl a server keeps (Redis or PostgreSQL), the same steps for each:
a crawl read through its frontier while a client holds one of its requests, and the push, block and pause a
page sends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from popkit import take

from diskfrontier import Request
from diskfrontier.live.server import TOKEN_HEADER
from diskfrontier.live.sources import FrontierSource, open_source


def read_while_held(open_crawl: Callable[[], Any], url: str, crawl: str) -> Any:
    """What the dashboard's source reads of crawl ``crawl`` at ``url`` (opened by ``open_crawl()``) made of 30
    requests of 3 hosts, 4 done, one failed ("timeout"), one held by the client that made it."""
    with open_crawl() as frontier:
        frontier.push_many([Request(f"https://h{i % 3}.example/{i}") for i in range(30)])
        for _ in range(4):
            frontier.done(take(frontier))
        frontier.fail(take(frontier), "timeout")
        held = frontier.pop()
        assert held is not None
        source = open_source(url, crawl)
        assert isinstance(source, FrontierSource)
        try:
            reading = source.read()
        finally:
            source.close()
        frontier.done(held)
    return reading


def check_read_while_held(reading: Any, origin: str, crawl: str) -> None:
    """The reading of ``read_while_held``: its origin, counts (the held one in flight), failure and hosts."""
    shot = reading.snapshot
    assert reading.origin == origin and crawl in shot["source"]
    assert (shot["stats"]["pending"], shot["stats"]["in_flight"], shot["stats"]["done"]) == (24, 1, 4)
    assert "leased_here" not in shot["stats"] and [f["error"] for f in shot["failures"]] == ["timeout"]
    assert shot["hosts_total"] == 3


async def push_block_pause(client: Any, token: str, known: str) -> dict:
    """Through the page's API: push a new URL and ``known`` (queued: the new one only), block b.example for
    ever, pause the crawl; what /api/stats says then (refreshed)."""
    answer = await client.post("/api/push", json={"urls": ["https://b.example/", known]},
                               headers={TOKEN_HEADER: token})
    assert answer.status == 200 and (await answer.json())["queued"] == 1
    answer = await client.post("/api/host", json={"host": "b.example", "action": "block"},
                               headers={TOKEN_HEADER: token})
    assert answer.status == 200 and (await answer.json())["host"]["blocked_until"] == "forever"
    answer = await client.post("/api/pause", headers={TOKEN_HEADER: token})
    assert answer.status == 200, await answer.text()
    return await (await client.get("/api/stats", params={"refresh": "1"})).json()
