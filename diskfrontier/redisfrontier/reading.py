"""Reading a Redis crawl as a whole: its requests, seen set, failed requests, counters and hosts.

``CrawlReader`` holds what these reads need (the connection, the crawl's key prefix, the value
checks and the seen-bucket layout) and nothing of a client's leases; ``RedisFrontier`` answers
``failed``, ``pending_requests``, ``seen_fingerprints``, ``len``, ``stats``, ``paused_since``,
``hosts`` and ``host`` through it (one a shard, merged by ``merged.py``), ``drop(match=...)`` reads
the stored requests with it (``steering.py``), and ``drop_crawl`` deletes the crawl's keys with it.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator
from typing import Any

from ..contract.outcomes import outcome_counts
from ..contract.values import FailedRequest, HostInfo
from ..core.errors import FrontierError
from ..request.model import Request
from ..request.revisit import REVISIT_COUNTERS
from .connection import repair_hint, shown_url, talking
from .records import SeenKeys, unpack_body
from .seen import SeenLayout, SeenSets
from .values import Values

FOREVER = 1e18  # a block "until unblock" (math.inf) as the scripts store it
_HOST_FIELDS = ("p", "i", "d", "dl", "b", "bu", "t", "f")  # a host hash's fields, in the order host_info reads them
_COUNTERS = ("pending", "inflight", "done", "seen", "pushed", "duplicates", "retried", "refetch_scheduled",
             "reclaimed", "failed", "dropped", *REVISIT_COUNTERS)


def glob_escape(text: str) -> str:
    """``text`` as a literal in a SCAN pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class CrawlReader:
    """The reads of one crawl's keys that no script needs (several round trips, pipelined)."""

    def __init__(self, redis: Any, url: str, crawl: str, values: Values, seen_keys: SeenLayout | SeenKeys,
                 tag: str | None = None) -> None:
        self.redis, self.url, self.crawl = redis, url, crawl
        self.values, self.seen_keys = values, seen_keys
        self.prefix = f"df:{{{tag or crawl}}}:"  # tag: the hash tag of one of the crawl's shards
        self.meta = self.prefix + "meta"

    def gone(self) -> FrontierError:
        """The error of this shard's ``meta`` found gone: a shard i > 0 lost while the crawl is there is damage
        (``CrawlDamaged``); shard 0's, the crawl deleted (or evicted) while it was open."""
        if self.prefix != f"df:{{{self.crawl}}}:":
            return self.values.bad(self.meta, "is gone: this shard of the crawl was deleted or evicted, with the "
                                              "requests of its hosts")
        return FrontierError(f"the crawl's keys are gone from Redis at {shown_url(self.url)} (deleted or evicted "
                             f"while this client had it open)")

    def check_there(self) -> None:
        """Raise ``gone()`` unless this shard's ``meta`` is there (before a read that would find nothing)."""
        with talking(self.url, "read"):
            there = self.redis.exists(self.meta)
        if not there:
            raise self.gone()

    def body(self, key: str, rid: bytes, body: Any) -> Request:
        """The request stored as ``rid`` in hash ``key`` of the crawl (``CrawlDamaged`` if it is not one)."""
        where = f"{self.prefix}{key} field {rid.decode(errors='replace')}"
        return unpack_body(body, where, hint=repair_hint(self.url, self.crawl))

    def failed(self) -> list[FailedRequest]:
        """Every failed request of the crawl (not requeued), oldest failure first."""
        p = self.prefix
        self.check_there()
        with talking(self.url, "failed"):
            pipe = self.redis.pipeline(transaction=False)
            pipe.hgetall(p + "failed")
            pipe.hgetall(p + "failinfo")
            bodies, infos = pipe.execute()
        out = []
        for rid, body in bodies.items():
            info = infos.get(rid, b"\0" * 8)
            if len(info) < 8:
                raise self.values.bad(f"{p}failinfo field {rid.decode(errors='replace')}",
                                      "does not hold a failure diskfrontier stored")
            (at,) = struct.unpack_from(">d", info)
            request = self.body("failed", rid, body)
            out.append(FailedRequest(request, info[8:].decode("utf-8", "replace"), at))
        return sorted(out, key=lambda failed: failed.failed_at)

    def pending_requests(self, *, leased: bool = True) -> Iterator[Request]:
        """Every request of the crawl not done, in no particular order (``leased=False``: not those
        leased to a client now), read with HSCAN."""
        p = self.prefix
        self.check_there()
        with talking(self.url, "pending_requests"):
            owners = set() if leased else set(self.redis.hkeys(p + "owner"))
            for rid, body in self.redis.hscan_iter(p + "req", count=1000):
                if rid not in owners:
                    yield self.body("req", rid, body)

    def stored_requests(self, count: int) -> Iterator[tuple[bytes, Request]]:
        """(id, request) of every request in the crawl's ``req`` hash (pending or leased), read with HSCAN
        about ``count`` at a time: a request moved meanwhile may be seen twice or not at all."""
        self.check_there()
        with talking(self.url, "drop"):
            for rid, body in self.redis.hscan_iter(self.prefix + "req", count=count):
                yield rid, self.body("req", rid, body)

    def seen_fingerprints(self) -> Iterator[bytes]:
        """Every fingerprint in the crawl's seen set (SCAN over its buckets, then the members of each).
        A ``set64`` crawl keeps 64 bits of each: its fingerprints come as those 8 bytes and 12 zero bytes,
        which both backends key as they key the whole fingerprint. A Bloom filter cannot be listed:
        ``FrontierError``."""
        seen = self.seen_keys
        if not seen.exact:
            raise FrontierError(f"crawl {self.crawl!r} at {shown_url(self.url)} dedupes with a Bloom filter, whose "
                                f"fingerprints cannot be listed: its seen set cannot be copied or exported (export "
                                f"its pending requests without --seen)")
        self.check_there()
        if isinstance(seen, SeenSets):
            yield from self._set_fingerprints(seen)
            return
        assert isinstance(seen, SeenKeys)
        p = self.prefix
        with talking(self.url, "seen_fingerprints"):
            for pattern in ("s:*", "x:*"):
                for key in self.redis.scan_iter(match=glob_escape(p) + pattern, count=1000):
                    suffix = key.decode(errors="replace")[len(p):]
                    for field in self.redis.hkeys(key):
                        try:
                            yield seen.fingerprint(suffix, field)
                        except ValueError:
                            raise self.values.bad(key.decode(errors="replace"), "is not a seen bucket "
                                                  "diskfrontier made") from None

    def _set_fingerprints(self, seen: SeenSets) -> Iterator[bytes]:
        with talking(self.url, "seen_fingerprints"):
            for key in self.redis.scan_iter(match=glob_escape(self.prefix) + "k:*", count=1000):
                try:
                    yield from seen.fingerprints_of(self.redis.sscan_iter(key, count=1000))
                except ValueError:
                    raise self.values.bad(key.decode(errors="replace"), "holds a member that is not a 64-bit key "
                                          "(not a seen bucket diskfrontier made)") from None

    def seen_layout_stats(self) -> dict[str, Any]:
        """The seen set's layout and size as ``stats()`` tells them: ``seen_layout``, and ``seen_buckets``
        (the bucket count: fixed for ``hash``, grown for ``set64``) or ``bloom_filters``."""
        seen = self.seen_keys
        if isinstance(seen, SeenKeys):
            return {"seen_layout": "hash", "seen_buckets": 2 ** seen.bits}
        with talking(self.url, "stats"):
            level, split, filters = self.redis.hmget(self.meta, "seen_level", "seen_split", "bloom_filters")
        where = f"{self.meta} field "
        if seen.name == "bloom":
            return {"seen_layout": "bloom", "bloom_filters": self.values.whole(filters, where + "bloom_filters", 0)}
        whole = self.values.whole
        buckets = 2 ** whole(level, where + "seen_level", 0) + whole(split, where + "seen_split", 0)
        return {"seen_layout": seen.name, "seen_buckets": buckets}

    def pending(self) -> int:
        """Requests pending in the crawl (not counting those leased to any client)."""
        with talking(self.url, "len"):
            pipe = self.redis.pipeline(transaction=False)
            pipe.hget(self.meta, "pending")
            pipe.exists(self.meta)
            pending, there = pipe.execute()
        if not there:
            raise self.gone()
        return self.values.whole(pending, f"{self.meta} field pending")

    def paused_since(self) -> float | None:
        """When the crawl was paused (the ``meta`` field ``paused``); None if it is not paused."""
        with talking(self.url, "paused_since"):
            paused = self.redis.hget(self.meta, "paused")
        return self._paused(paused)

    def _paused(self, value: Any) -> float | None:
        return None if value is None else self.values.real(value, f"{self.meta} field paused")

    def stats(self) -> dict[str, Any]:
        """The crawl's counters and settings (all clients), as ``RedisFrontier.stats`` names them."""
        p = self.prefix
        with talking(self.url, "stats"):
            pipe = self.redis.pipeline(transaction=False)
            pipe.hgetall(self.meta)
            pipe.zcard(p + "delayed")
            pipe.scard(p + "hosts")
            pipe.zcard(p + "ready")
            meta, delayed, hosts, ready = pipe.execute()
        if not meta:
            raise self.gone()
        v, key = self.values, self.meta
        meta = {k.decode(errors="replace"): value for k, value in meta.items()}
        count = {name: v.whole(meta.get(name), f"{key} field {name}", 0) for name in _COUNTERS}
        return {
            "pending": count["pending"], "in_flight": count["inflight"], "done": count["done"],
            "seen": count["seen"], "pushed": count["pushed"], "duplicates": count["duplicates"],
            "retried": count["retried"], "refetch_scheduled": count["refetch_scheduled"],
            "reclaimed": count["reclaimed"], "failed": count["failed"], "dropped": count["dropped"],
            **{name: count[name] for name in REVISIT_COUNTERS},
            **outcome_counts(meta),
            "delayed": delayed, "hosts": hosts, "ready_hosts": ready, "paused_since": self._paused(meta.get("paused")),
            "seen_copies": v.whole(meta.get("seen_copies"), f"{key} field seen_copies", 0),  # see mark_seen
            "delay": v.real(meta.get("delay"), f"{key} field delay", 0.0),  # as any client last set them
            "per_host": v.whole(meta.get("per_host"), f"{key} field per_host", 0) or None,
            "prefer": v.text(meta.get("prefer", b"priority"), f"{key} field prefer"),
        }

    def hosts(self) -> list[HostInfo]:
        """Every host of the crawl: pending, leased and done counts, delay, ready time, block and budget."""
        p = self.prefix
        self.check_there()
        with talking(self.url, "hosts"):
            default_delay = self.values.real(self.redis.hget(self.meta, "delay"), f"{self.meta} field delay", 0.0)
            names = sorted(self.values.text(name, f"{p}hosts member {name!r}")
                           for name in self.redis.sscan_iter(p + "hosts", count=1000))
            rows: list[Any] = []
            for at in range(0, len(names), 1000):
                pipe = self.redis.pipeline(transaction=False)
                for name in names[at:at + 1000]:
                    pipe.hmget(p + "h:" + name, *_HOST_FIELDS)
                rows += pipe.execute()
        bad = self.values.bad
        infos = (host_info(name, row, default_delay, bad, p) for name, row in zip(names, rows, strict=True))
        return [info for info in infos if info is not None]

    def host(self, name: str) -> HostInfo | None:
        """One host as ``hosts()`` tells of it (one round trip); None if the crawl has nothing of it."""
        with talking(self.url, "host"):
            pipe = self.redis.pipeline(transaction=False)
            pipe.hget(self.meta, "delay")
            pipe.hmget(self.prefix + "h:" + name, *_HOST_FIELDS)
            delay, row = pipe.execute()
        default_delay = self.values.real(delay, f"{self.meta} field delay", 0.0)
        return host_info(name, row, default_delay, self.values.bad, self.prefix)

    def unseal(self) -> int:
        """Remove this shard's sentinel (key and field): a crawl whose shard 0 has none reads as one whose
        shards are not all made yet, so that a deletion stopped part-way leaves a crawl the next open takes
        as it is (``drop_crawl`` does this first). Returns the keys deleted (1, or 0 if it had none)."""
        with talking(self.url, "drop_crawl"):
            pipe = self.redis.pipeline(transaction=True)
            pipe.hdel(self.meta, "sentinel")
            pipe.delete(self.prefix + "sentinel")
            return int(pipe.execute()[1])

    def delete_keys(self) -> int:
        """Delete every key of the crawl, ``meta`` last (SCAN and UNLINK in batches, never KEYS), so that
        a deletion stopped half-way leaves a crawl that is still there to be deleted again; how many."""
        deleted = 0
        meta = self.meta.encode()
        with talking(self.url, "drop_crawl"):
            batch: list[bytes] = []
            for key in self.redis.scan_iter(match=glob_escape(self.prefix) + "*", count=1000):
                if key == meta:
                    continue
                batch.append(key)
                if len(batch) >= 1000:
                    deleted += self.redis.unlink(*batch)
                    batch = []
            if batch:
                deleted += self.redis.unlink(*batch)
            deleted += self.redis.unlink(meta)
        return deleted


def host_info(name: str, row: list[Any], default_delay: float, bad: Callable[[str, str], Exception],
              prefix: str) -> HostInfo | None:
    """The ``HostInfo`` of a host hash's fields; None if it holds nothing worth showing. A field that
    is not a number is ``bad(where, problem)``."""
    numbers: list[float | None] = []
    for field, value in zip(_HOST_FIELDS, row, strict=True):
        try:
            number = None if value is None else float(value)
        except ValueError:
            number = math.nan
        if number is not None and not math.isfinite(number):
            raise bad(f"{prefix}h:{name} field {field}", f"is {value[:60]!r}, not a finite number")
        numbers.append(number)
    pending, inflight, done = (int(n or 0) for n in numbers[:3])
    delay = default_delay if numbers[3] is None else numbers[3]
    blocked = numbers[4]
    if blocked is not None and blocked >= FOREVER:
        blocked = math.inf
    budget = int(numbers[5]) if numbers[5] is not None else None
    ready_at = None
    if pending:
        last = numbers[6] if numbers[6] is not None and delay > 0 else 0.0
        ready_at = max(last + delay if last else 0.0, blocked or 0.0)
    failures = int(numbers[7] or 0)
    if pending or inflight or done or row[3] is not None or blocked is not None or budget is not None or failures:
        return HostInfo(name, pending, inflight, done, delay, ready_at, blocked, budget, failures)
    return None
