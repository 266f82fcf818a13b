"""Fixtures of the Redis backend's own tests."""

from __future__ import annotations

import contextlib

import pytest

from diskfrontier import FrontierError, RedisFrontier


@pytest.fixture
def open_crawl(redis_url, crawl_name):
    """Open the test's crawl (each call a new client; ``crawl``: another one of the test's, named by
    this suffix); every client is closed at the end (a crawl a test damaged may refuse the close's
    step: that is not the test's failure)."""
    opened = []

    def open_(*, crawl: str = "", **kwargs):
        frontier = RedisFrontier(redis_url, crawl=crawl_name + crawl, **kwargs)
        opened.append(frontier)
        return frontier

    yield open_
    for frontier in opened:
        with contextlib.suppress(FrontierError):
            frontier.close()


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
