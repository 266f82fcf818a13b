"""Open a frontier of any backend for the contract suite: ``FrontierFactory`` opens a job directory, a crawl in
the session's redis-server (``redis-sharded``: a crawl of 4 shards) or a crawl in the session's PostgreSQL
server, the same one again on every call, so that reopening is part of what is tested."""

from __future__ import annotations

from diskfrontier import Request
from diskfrontier.access.targets import open_target

BACKENDS = ("jobdir", "redis", "redis-sharded", "postgres")
SHARDS = 4  # of a redis-sharded crawl


class FrontierFactory:
    """Opens one frontier of a kind, again and again: ``factory(**settings)``."""

    def __init__(self, kind: str, path: str, redis_url: str | None, crawl: str) -> None:
        self.kind, self.path, self.url, self.crawl = kind, path, redis_url, crawl
        self.opened: list = []

    def __call__(self, **settings):
        if self.kind == "jobdir":
            frontier = open_target(self.path, **settings)
        elif self.kind == "redis-sharded":
            assert self.url is not None
            frontier = open_target(self.url, self.crawl, shards=SHARDS, **settings)
        else:
            assert self.url is not None
            frontier = open_target(self.url, self.crawl, **settings)
        self.opened.append(frontier)
        return frontier

    def close_all(self) -> None:
        for frontier in self.opened:
            frontier.close()


def make_factory(kind: str, tmp_path, request, crawl: str) -> FrontierFactory:
    if kind.startswith("redis"):
        url = request.getfixturevalue("redis_url")
    elif kind == "postgres":
        url = request.getfixturevalue("postgres_url")
    else:
        url = None
    return FrontierFactory(kind, str(tmp_path / "job"), url, crawl)


def urls(host: str, n: int, start: int = 0) -> list[Request]:
    """``n`` requests of ``host``, numbered from ``start``."""
    return [Request(f"https://{host}/p/{i}") for i in range(start, start + n)]


def drain(frontier) -> list[Request]:
    """Pop everything that is ready now, done-ing each; what was popped, in order."""
    out = []
    while (r := frontier.pop()) is not None:
        out.append(r)
        frontier.done(r)
    return out


def assert_queue_order(kind: str, got: list[str], want: list[str], priority: dict[str, int]) -> None:
    """``got`` (URLs as popped) is ``want`` (the order of one queue). A sharded crawl keeps the order of
    priorities, and within each host the order of its queue (a host lives on one shard), but not the
    order of one priority between hosts of different shards (docs/guide/redis.md, "Order across shards")."""
    if kind != "redis-sharded":
        assert got == want
        return
    assert [priority[url] for url in got] == [priority[url] for url in want]
    for host in {url.split("/")[2] for url in want}:
        assert [u for u in got if u.split("/")[2] == host] == [u for u in want if u.split("/")[2] == host]
