"""A Redis crawl whose records may hold a revisit state is marked so in its format ('1r', '2rs'...): every crawl
this version opens gets the mark, one made before it is marked at its next open (and verify takes it either
way), and a client from before revisits, which would take such a record for damage, refuses the crawl."""

from __future__ import annotations

import pytest
import redis

from diskfrontier import RedisFrontier, Request, RevisitState
from diskfrontier.core.errors import FrontierError
from diskfrontier.redisfrontier import opening
from diskfrontier.redisfrontier.verify import verify_crawl


@pytest.mark.parametrize(("shards", "old", "marked"), [(1, b"2", b"2r"), (3, b"2s", b"2rs")])
def test_a_crawl_from_before_revisits_is_marked_at_its_next_open(redis_url, crawl_name, shards, old, marked):
    client = redis.Redis.from_url(redis_url)
    with RedisFrontier(redis_url, crawl=crawl_name, shards=shards) as f:
        f.push(Request("https://a.example/"))
    metas = sorted(key for key in client.keys(f"df:{{{crawl_name}*:meta"))
    assert len(metas) == shards and {client.hget(meta, "v") for meta in metas} == {marked}
    for meta in metas:
        client.hset(meta, "v", old)  # as a version from before revisits made it
    assert verify_crawl(redis_url, crawl_name).sound  # not marked yet: still a whole crawl of its format
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        request = f.pop()
        assert request is not None
        request.revisit = RevisitState(60, 1.8e9, etag='"x"')
        f.done(request, refetch_after=60)
    assert {client.hget(meta, "v") for meta in metas} == {marked}
    assert verify_crawl(redis_url, crawl_name).sound


def test_a_client_from_before_revisits_refuses_a_marked_crawl(redis_url, crawl_name, monkeypatch):
    RedisFrontier(redis_url, crawl=crawl_name).close()
    monkeypatch.setattr(opening, "READABLE", ("1", "1s", "2", "2s"))  # what a version from before reads
    with pytest.raises(FrontierError, match="is of format"):
        RedisFrontier(redis_url, crawl=crawl_name)
