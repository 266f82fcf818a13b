"""Reading a sharded Redis crawl as one: each shard read by its own ``CrawlReader``, the answers summed
or merged (counters summed, lists merged in order, settings from shard 0, which every shard shares)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from typing import Any

from ..contract.outcomes import OUTCOME_KEYS
from ..contract.values import FailedRequest, HostInfo
from ..request.model import Request
from ..request.revisit import REVISIT_COUNTERS
from .reading import CrawlReader
from .shards import Router

_SUMMED = ("pending", "in_flight", "done", "seen", "pushed", "duplicates", "retried", "refetch_scheduled",
           "reclaimed", "failed", "dropped", "delayed", "hosts", "ready_hosts", *REVISIT_COUNTERS,
           *OUTCOME_KEYS)


class MergedReader:
    """The reads of ``CrawlReader`` over every shard of a crawl (``readers[i]`` reads shard i)."""

    def __init__(self, readers: list[CrawlReader], router: Router) -> None:
        self.readers, self.router = readers, router

    def failed(self) -> list[FailedRequest]:
        """Every failed request of the crawl (not requeued), oldest failure first."""
        return list(heapq.merge(*(reader.failed() for reader in self.readers), key=lambda f: f.failed_at))

    def pending_requests(self, *, leased: bool = True) -> Iterator[Request]:
        """Every request of the crawl not done, shard after shard (see ``CrawlReader.pending_requests``)."""
        return itertools.chain.from_iterable(reader.pending_requests(leased=leased) for reader in self.readers)

    def stored_requests(self, count: int) -> Iterator[tuple[int, bytes, Request]]:
        """(shard, id, request) of every request stored in the crawl (pending or leased), shard after shard."""
        for index, reader in enumerate(self.readers):
            for rid, request in reader.stored_requests(count):
                yield index, rid, request

    def seen_fingerprints(self) -> Iterator[bytes]:
        """Every fingerprint of the crawl's seen sets, shard after shard (one marked by ``mark_seen``, which
        has no host to place it by, is kept on every shard and comes once from each)."""
        return itertools.chain.from_iterable(reader.seen_fingerprints() for reader in self.readers)

    def pending(self) -> int:
        """Requests pending in the crawl (not counting those leased to any client)."""
        return sum(reader.pending() for reader in self.readers)

    def paused_since(self) -> float | None:
        """When the crawl was paused (shard 0's time; a pause is written to every shard); None if it is not."""
        return self.readers[0].paused_since()

    def stats(self) -> dict[str, Any]:
        """The counters of every shard summed; the settings as shard 0 has them."""
        each = [reader.stats() for reader in self.readers]
        out = dict(each[0])
        for name in _SUMMED:
            out[name] = sum(stats[name] for stats in each)
        out["seen"] -= sum(stats["seen_copies"] for stats in each)  # fingerprints mark_seen put on every shard
        return out

    def seen_layout_stats(self) -> dict[str, Any]:
        """The seen set's layout (every shard's is the same), its buckets or filters summed over the shards."""
        parts = [reader.seen_layout_stats() for reader in self.readers]
        out = dict(parts[0])
        for name in ("seen_buckets", "bloom_filters"):
            if name in out:
                out[name] = sum(part[name] for part in parts)
        return out

    def hosts(self) -> list[HostInfo]:
        """Every host of the crawl (each lives on one shard), by name."""
        return list(heapq.merge(*(reader.hosts() for reader in self.readers), key=lambda info: info.host))

    def host(self, name: str) -> HostInfo | None:
        """One host, read from its shard."""
        return self.readers[self.router.of_slot(name)].host(name)

    def delete_keys(self) -> int:
        """Delete every key of the crawl, shard 0 (whose meta names the others) last, after its sentinel, so
        that shards deleted by a deletion stopped part-way read as shards not made yet, not as lost ones."""
        unsealed = self.readers[0].unseal()
        return unsealed + sum(reader.delete_keys() for reader in reversed(self.readers))
