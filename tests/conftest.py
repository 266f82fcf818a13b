import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def pytest_report_header(config):
    # Which diskfrontier is under test: the source tree, or an installed wheel (.ci/run).
    try:
        import diskfrontier
    except Exception as exc:  # reported again, in full, by the tests that import it
        return f"diskfrontier: not importable ({exc!r})"
    return f"diskfrontier: {os.path.dirname(os.path.realpath(diskfrontier.__file__))}"


if os.environ.get("DISKFRONTIER_TEST_POLITE"):
    # The behaviour suite again with the host layer on (per_host set, so pop goes through the
    # per-host buffers and heaps) but holding nothing back: every promise must still hold.
    import diskfrontier.jobdir.frontier as _frontier

    _plain_init = _frontier.Frontier.__init__

    def _polite_init(self, *args, **kwargs):
        kwargs.setdefault("per_host", 1 << 30)
        _plain_init(self, *args, **kwargs)

    _frontier.Frontier.__init__ = _polite_init


# ------------------------------------------------------------------ a real redis-server
import itertools as _itertools  # noqa: E402

import pytest  # noqa: E402

_crawls = _itertools.count()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """One redis-server for the session (AOF on, fsync every second), stopped at the end."""
    from redisserver import RedisServer

    server = RedisServer(str(tmp_path_factory.mktemp("redis")))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server):
    """The session server's URL, with its data flushed before the test."""
    redis_server.client().flushall()
    return redis_server.url


@pytest.fixture
def crawl_name():
    """A crawl name no other test uses."""
    return f"t{next(_crawls)}"
