"""Fixtures of the Redis backend's own tests."""

from __future__ import annotations

import pytest
from crawlclients import crawl_clients

from diskfrontier import RedisFrontier


@pytest.fixture
def open_crawl(redis_url, crawl_name):
    """Open the test's crawl (each call a new client; ``crawl``: another one of the test's, named by this
    suffix); every client is closed at the end (a crawl a test damaged may refuse the close's step)."""
    with crawl_clients(RedisFrontier, redis_url, crawl_name) as open_:
        yield open_


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory):
    """A real Redis Cluster of 3 masters and 3 replicas, made once for the test file, stopped at its end."""
    from rediscluster import RedisCluster

    cluster = RedisCluster(str(tmp_path_factory.mktemp("cluster")))
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()
