"""``RobotsStore``: the robots.txt kept for each host, for every client of a crawl: one hash (``robots``, on
shard 0: no step needs it with a host's other keys), host name -> a msgpack array ``[status, fetched_at,
body]`` (``body`` at most ``MAX_ROBOTS`` bytes). A value diskfrontier did not write is ``CrawlDamaged``.
(A host's failure streak is kept in its hash with its settings: ``hostrules.py``.)"""

from __future__ import annotations

from typing import Any

import msgpack

from ..contract.checks import MAX_ROBOTS, check_robots
from ..contract.values import RobotsEntry
from .connection import talking
from .values import Values


class RobotsStore:
    """The robots.txt entries of the crawl whose shard 0's keys begin with ``prefix``."""

    def __init__(self, redis: Any, url: str, prefix: str, values: Values) -> None:
        self.redis, self.url, self.values = redis, url, values
        self.key = prefix + "robots"

    def get(self, host: str) -> RobotsEntry | None:
        """The entry kept for ``host``; None if none is."""
        with talking(self.url, "robots"):
            raw = self.redis.hget(self.key, host)
        if raw is None:
            return None
        try:
            status, fetched_at, body = msgpack.unpackb(raw, raw=False, max_bin_len=MAX_ROBOTS)
            return check_robots(RobotsEntry(status, body, fetched_at))
        except Exception:  # msgpack and the checks raise several types: a value diskfrontier did not write
            raise self.values.bad(f"{self.key} field {host}", "is not a robots.txt entry diskfrontier stored") from None

    def put(self, host: str, entry: RobotsEntry) -> None:
        """Keep ``entry`` (checked) for ``host``, replacing any older one."""
        value = msgpack.packb([entry.status, entry.fetched_at, entry.body], use_bin_type=True)
        with talking(self.url, "set_robots"):
            self.redis.hset(self.key, host, value)
