"""Many processes on one Redis crawl: real SIGKILLs of a worker holding leases, and of Redis itself."""

from __future__ import annotations

import time

import pytest
from killcampaign import polite_campaign, start_worker
from redisserver import RedisServer
from serverload import Load

from diskfrontier import RedisFrontier, RedisUnavailable

pytestmark = pytest.mark.crash


@pytest.mark.slow
def test_four_workers_one_killed_twice_lose_nothing_and_keep_politeness(redis_url, crawl_name, tmp_path):
    total = 12_000
    campaign, _ = polite_campaign(
        lambda **settings: RedisFrontier(redis_url, crawl=crawl_name, **settings),
        lambda log, hold: start_worker("redis", redis_url, crawl_name, log, hold), str(tmp_path),
        total=total, hosts=100, delay=0.02, victim_dones=300, patience=60, wait=180)

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
