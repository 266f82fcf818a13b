"""A done that rides on the next step (``ack="deferred"``), what Redis adds to contract/test_deferred_dones.py: a
pop and the done before it are one script call, a lease the renewal found lost raises at once, and a done frees
its host for the pop that carries it under ``prefer="idle"`` too."""

from __future__ import annotations

import time

import pytest
import redis
from deferredkit import done_frees_its_host

from diskfrontier import LeaseExpired, Request
from diskfrontier.redisfrontier.management import release

LEASE = 1.0


def evalsha_calls(url: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        stats = client.info("commandstats").get("cmdstat_evalsha", {})
        return int(stats.get("calls", 0))
    finally:
        client.close()


def test_a_pop_and_the_done_before_it_are_one_script_call(open_crawl, redis_url):
    f = open_crawl()
    f.push_many(Request(f"https://h{i % 3}.example/{i}") for i in range(20))
    first = f.pop()
    assert first is not None
    before = evalsha_calls(redis_url)
    request = first
    for _ in range(10):
        f.done(request)
        request = f.pop()
        assert request is not None
    assert evalsha_calls(redis_url) - before == 10  # ack="wait": 20 (a FINISH and a POP each)
    stats = f.stats()
    assert (stats["done"], stats["in_flight"], stats["acks_lost"]) == (10, 1, 0)


def test_a_lease_a_renewal_found_lost_raises_at_once(open_crawl, redis_url, crawl_name):
    worker = open_crawl(lease=LEASE)
    worker.push(Request("https://a.example/"))
    held = worker.pop()
    assert held is not None
    release(redis_url, crawl_name, client=worker.client_id, force=True)
    deadline = time.monotonic() + 30
    while not worker._leases.is_lost(held):  # the renewal's next beat finds it lost
        assert time.monotonic() < deadline
        time.sleep(LEASE / 10)
    with pytest.raises(LeaseExpired):
        worker.done(held)


def test_a_done_carried_by_a_pop_frees_its_host_for_that_pop_under_prefer_idle(open_crawl):
    done_frees_its_host(open_crawl(per_host=2, prefer="idle"), 2)  # per_host alone: contract/
