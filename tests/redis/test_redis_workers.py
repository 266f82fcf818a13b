"""Many processes on one Redis crawl: real SIGKILLs of a worker holding leases, and of Redis itself."""

from __future__ import annotations

import time

import pytest
from killcampaign import kill_campaign, start_worker
from redisserver import RedisServer
from serverload import Load

from diskfrontier import RedisFrontier, RedisUnavailable, Request

pytestmark = pytest.mark.crash


@pytest.mark.slow
def test_four_workers_one_killed_twice_lose_nothing_and_keep_politeness(redis_url, crawl_name, tmp_path):
    total, hosts, delay = 12_000, 100, 0.02
    with RedisFrontier(redis_url, crawl=crawl_name, delay=delay, lease=2.0, order="fifo") as seed:
        assert seed.push_many(Request(f"https://h{i % hosts}.example/{i}") for i in range(total)) == total
    campaign = kill_campaign(lambda log, hold: start_worker("redis", redis_url, crawl_name, log, hold),
                             str(tmp_path), victim_dones=300, patience=60, late=True, wait=180)
    campaign.check({f"https://h{i % hosts}.example/{i}" for i in range(total)})
    closest = campaign.closest_of_one_host()  # politeness across processes
    assert closest >= delay - 1e-4, f"two hand-outs of one host only {closest:.4f}s apart"

    with RedisFrontier(redis_url, crawl=crawl_name) as check:
        stats = check.stats()
        assert check.finished and stats["done"] == total
        # pops whose reply the victim got but had not logged when it was killed (up to 8 at once) are reclaimed too
        assert campaign.reclaimed <= stats["reclaimed"] <= campaign.reclaimed + 8 * len(campaign.dead)


def test_redis_killed_and_restarted_under_load_loses_nothing_acknowledged(tmp_path):
    server = RedisServer(str(tmp_path / "redis"), aof=True, fsync="always")
    server.start()
    url, crawl = server.url, "durable"
    with RedisFrontier(url, crawl=crawl, order="fifo"):
        pass
    # the workers' ack="wait": a done that returned is in Redis (by default it is sent with the next step)
    load = Load(lambda **settings: RedisFrontier(url, crawl=crawl, **settings), RedisUnavailable, ack="wait")
    load.start()
    try:
        for _ in range(2):
            time.sleep(0.7)
            server.kill()
            time.sleep(0.3)
            server.start()
        time.sleep(0.7)
    finally:
        load.end(30)
    assert not load.errors, load.errors[:3]
    assert load.outages["push"] > 0 and len(load.acked_done) > 50  # the kills fell under load
    with RedisFrontier(url, crawl=crawl) as f:
        load.check_nothing_lost(f)
    server.stop()
