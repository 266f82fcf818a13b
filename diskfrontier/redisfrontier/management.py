"""The crawls of one Redis server, seen from outside any of them: what ``diskfrontier crawls`` lists.

A crawl is the keys ``df:{NAME}:*``; its ``meta`` hash names it. The crawls are found with SCAN
(never KEYS), and each is summed up from its ``meta`` counters, the clients that hold its leases
(the owners in its ``owner`` hash) and the memory of its keys (``MEMORY USAGE`` of each, found
with SCAN: the cost grows with the crawl's keys, as the command says).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .connection import connect, talking
from .reading import glob_escape

_META = b"df:{*}:meta"
_BATCH = 1000


@dataclass(frozen=True)
class CrawlSummary:
    """One crawl of a Redis server, as ``diskfrontier crawls`` lists it."""

    name: str
    pending: int
    in_flight: int
    done: int
    failed: int
    seen: int
    clients: int  # clients holding leases of it now
    memory: int | None  # bytes of its keys (None: not measured)
    paused: bool

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (JSON-ready)."""
        return dict(self.__dict__)


def crawl_names(url: str) -> list[str]:
    """The names of the crawls on the Redis server at ``url``, sorted."""
    redis = connect(url)
    try:
        with talking(url, "crawls"):
            keys = list(redis.scan_iter(match=_META, count=_BATCH))
    finally:
        redis.close()
    names = []
    for key in keys:
        text = key.decode("utf-8", "replace")
        if text.startswith("df:{") and text.endswith("}:meta"):
            names.append(text[len("df:{"):-len("}:meta")])
    return sorted(set(names))


def summaries(url: str, *, memory: bool = True) -> list[CrawlSummary]:
    """A ``CrawlSummary`` of every crawl on the Redis server at ``url`` (``memory=False``: not measured)."""
    redis = connect(url)
    try:
        return [_summary(redis, url, name, memory) for name in crawl_names(url)]
    finally:
        redis.close()


def _number(meta: dict[bytes, bytes], field: str) -> int:
    try:
        return int(float(meta.get(field.encode(), b"0")))
    except ValueError:
        return 0


def _summary(redis: Any, url: str, name: str, memory: bool) -> CrawlSummary:
    prefix = f"df:{{{name}}}:"
    with talking(url, f"crawl {name!r}"):
        meta = redis.hgetall(prefix + "meta")
        owners = {value.split(b":", 1)[0] for value in redis.hvals(prefix + "owner")}
        used: int | None = None
        if memory:
            used = 0
            for key in redis.scan_iter(match=glob_escape(prefix) + "*", count=_BATCH):
                used += redis.memory_usage(key, samples=0) or 0
    return CrawlSummary(
        name=name, pending=_number(meta, "pending"), in_flight=_number(meta, "inflight"),
        done=_number(meta, "done"), failed=_number(meta, "failed"), seen=_number(meta, "seen"),
        clients=len(owners), memory=used, paused=bool(meta.get(b"paused")))
