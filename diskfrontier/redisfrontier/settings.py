"""The options a ``RedisFrontier`` is opened with, checked before anything is sent to Redis: what the client
asks of the crawl (``Settings``: its order, delay, per-host limit, preference and dedupe, which belong to the
crawl) and the client's own (``ClientOptions``: its lease, prefetch, acknowledgements, replicas, cluster and
number of shards). Each check raises ``ValueError`` naming the option, the first wrong one in the order given."""

from __future__ import annotations

from dataclasses import dataclass

from ..contract.checks import check_seconds
from .seen import DEFAULT_ERROR_RATE, check_dedupe
from .shards import check_shards

BATCH = 500  # requests a script call takes at most (push_many, done_many, a renewal, a prefetch)
ACKS = ("deferred", "wait", "pipelined")  # how a done is acknowledged (RedisFrontier's ack)


@dataclass(frozen=True)
class ClientOptions:
    """What a client is opened with that is its own, not the crawl's."""

    lease: float = 30.0
    renew: bool = True
    prefetch: int = 1
    ack: str = "deferred"
    shards: int | None = None
    cluster: bool | None = None
    wait_replicas: int = 0
    wait_timeout: float = 5.0

    def checked(self) -> ClientOptions:
        """These options, each checked; numbers of seconds as floats."""
        prefetch, ack, wait_replicas, cluster = self.prefetch, self.ack, self.wait_replicas, self.cluster
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or not 1 <= prefetch <= BATCH:
            raise ValueError(f"prefetch must be a whole number from 1 to {BATCH}, got {prefetch!r}")
        if prefetch > 1 and not self.renew:
            raise ValueError("prefetch needs renew=True: requests leased ahead wait in this client, and only the "
                             "background renewal keeps their leases")
        if ack not in ACKS:
            raise ValueError(f"ack must be 'deferred', 'wait' or 'pipelined', got {ack!r}")
        if ack == "pipelined" and (wait_replicas or cluster):
            raise ValueError("ack='pipelined' does not go with wait_replicas or a Redis Cluster (each step is waited "
                             "for there)")
        check_shards(self.shards)
        if isinstance(wait_replicas, bool) or not isinstance(wait_replicas, int) or wait_replicas < 0:
            raise ValueError(f"wait_replicas must be a whole number of at least 0, got {wait_replicas!r}")
        if cluster not in (None, True, False):
            raise ValueError(f"cluster must be True, False or None (whichever the server is), got {cluster!r}")
        wait_timeout = check_seconds("wait_timeout", self.wait_timeout)
        lease = check_seconds("lease", self.lease)
        if lease <= 0:
            raise ValueError("lease must be more than 0 seconds")
        return ClientOptions(lease, self.renew, prefetch, ack, self.shards, cluster, wait_replicas, wait_timeout)


@dataclass(frozen=True)
class Settings:
    """What a client asks of a crawl when it opens it (``None``: keep what the crawl has)."""

    delay: float | None = None
    per_host: int | None = None
    order: str | None = None
    prefer: str | None = None
    expected_urls: int = 10_000_000
    create: bool = True
    new_order: str = "lifo"
    copy_of: str | None = None
    dedupe: str | None = None  # None: the crawl's ("exact" for a new one)
    error_rate: float = DEFAULT_ERROR_RATE

    def checked(self) -> Settings:
        """These settings, each checked (``ValueError`` naming the one that is wrong)."""
        delay = None if self.delay is None else check_seconds("delay", self.delay)
        per_host = self.per_host
        if per_host is not None and (isinstance(per_host, bool) or not isinstance(per_host, int) or per_host < 0):
            raise ValueError(f"per_host must be None, 0 (no limit) or a whole number, got {per_host!r}")
        if self.order not in (None, "lifo", "fifo") or self.new_order not in ("lifo", "fifo"):
            shown = self.order if self.order is not None else self.new_order
            raise ValueError(f"order must be 'lifo' or 'fifo', got {shown!r}")
        if self.prefer not in (None, "priority", "idle"):
            raise ValueError(f"prefer must be 'priority' or 'idle', got {self.prefer!r}")
        urls = self.expected_urls
        if isinstance(urls, bool) or not isinstance(urls, int) or urls < 1:
            raise ValueError(f"expected_urls must be a whole number of at least 1, got {urls!r}")
        check_dedupe(self.dedupe, self.error_rate)
        return Settings(delay, per_host, self.order, self.prefer, urls, self.create, self.new_order, self.copy_of,
                        self.dedupe, float(self.error_rate))
