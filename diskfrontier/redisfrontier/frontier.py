"""``RedisFrontier``: the contract on a Redis server, for many processes on many machines; a façade over its parts.

Each call checks its arguments (``contract/checks.py``), refuses to run once the frontier is closed or in a
process that did not open it (``guard.py``), and delegates: the steps run as scripts on the crawl's shards
(``transport.py``, the scripts in ``lua/``), the stores of requests (``writes.py``), pops and the crawl's
state across shards (``fanout.py``), waiting pops (``waiting.py``), the ends of leases (``finishing.py``,
over this client's ``leases.py``), host settings (``hostrules.py``), robots.txt (``hostmeta.py``), pause and
drop (``steering.py``), reads of the whole crawl (``merged.py``), and the open (``settings.py``,
``opening.py``). The keys and what each holds: ``docs/format.md``, "Redis".
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from ..contract import checks
from ..contract.outcomes import OUTCOME_KEYS, Outcome
from ..contract.values import Dropped, FailedRequest, HostInfo, RobotsEntry
from ..core.errors import FrontierError
from ..request.model import Request
from ..request.revisit import REVISIT_COUNTERS
from .connection import check_crawl_name, connect, is_cluster, log, shown_url
from .deferred import GRACE, DeferredAcks
from .fanout import Fanout
from .finishing import Finishing
from .guard import Guard
from .hostmeta import RobotsStore
from .hostrules import HostRules
from .leases import Leases, Renewal
from .merged import MergedReader
from .opening import mark_copy, open_crawl
from .pipelined import AckTally
from .reading import CrawlReader
from .settings import BATCH, ClientOptions, Settings
from .shards import Router
from .steering import Steering
from .transport import Transport
from .values import Values
from .waiting import Waiting
from .writes import Writes

_CLOSE_WAIT = 30.0  # seconds close() waits for pops under way in other threads


class RedisFrontier:
    """A crawl frontier kept in Redis and shared by any number of processes on any number of machines.

    ``RedisFrontier("redis://host:6379/0", crawl="news")`` opens the crawl ``news`` (made on first use).
    Every client of one crawl sees one frontier: one seen set, one set of queues, one politeness schedule (a
    host's delay holds across all of them). Each call does what ``SharedFrontierProtocol`` (the contract)
    says, most of them in one atomic Lua script; its docstring here says what Redis adds. The guide
    (docs/guide/redis.md) tells each option at length; the keys: docs/format.md, "Redis".

    Leases: ``pop`` leases the request to this client for ``lease`` seconds (default 30). A thread of this
    client renews every lease it holds every ``lease / 3`` seconds, in one script call, so a request is kept
    however long it is worked on (``renew=False``: only ``extend`` renews a lease). When a lease runs out (the
    process was killed, frozen or cut off from Redis) any client takes the request back as pending
    (``stats()['reclaimed']``), and a late ``done`` of the old copy changes nothing (``LeaseExpired``, or with
    a deferred done, a warning and ``stats()['acks_lost']``). ``close()`` gives back this client's leased
    requests at once.

    ``ack="deferred"`` (the default, with the renewal thread): ``done`` returns at once and rides on this
    client's next step (the next ``pop`` applies it in its own script: one round trip a pop and done); every
    other step, read and the close send it first, the renewal thread 50 ms later at the latest. A kill before
    it is sent loses the done: its request is handed out once more after its lease. ``ack="wait"``: each
    ``done`` waits for its reply (and raises ``LeaseExpired`` itself).

    Crawl settings (``order``, ``delay``, ``per_host``, ``prefer``) belong to the crawl: ``None`` keeps what
    the crawl has (the job directory's defaults for a new one); a value sets it for every client.
    ``per_host=0`` means no limit; ``new_order`` is the order of a crawl made here when ``order`` is None.
    ``dedupe`` (fixed when the crawl is made; None: the crawl's, ``"exact"`` for a new one): ``"exact"`` keeps
    each fingerprint's 64-bit key in sets that grow with the crawl (about 10 bytes a URL; two URLs share a key
    with odds of about n**2 / 2**65); ``"bloom"``, Bloom filters that grow with it (6.5 to 8 bytes a URL at
    ``error_rate=1e-7``, about the odds that a new URL is taken for a duplicate; ``has_seen`` means "maybe");
    ``"hash"``, the layout of earlier versions, whose bucket count ``expected_urls`` fixes.
    A crawl that ``diskfrontier copy`` is making (or was, when it was stopped) is refused with
    ``IncompleteCopy``; ``copy_of`` is for the copy itself: it opens such a crawl, and one made by this open
    is marked as a copy of ``copy_of`` in the same step (``copy_mark``, ``made``; ``set_copy_mark(None)``
    removes the mark at the end). Absolute times (``not_before``, ``block(until)``) are ``time.time()``
    values compared with the Redis server's clock; delays and leases are measured on it.

    ``shards=N`` makes a new crawl of N shards (its hosts spread over N hash tags, each host's requests, state
    and leases on one; fixed when the crawl is made: None opens a crawl whatever its number). ``cluster``:
    True, a Redis Cluster (``url`` names any of its nodes); False, a plain server; None, whichever ``url``
    is. ``wait_replicas=k``: each step waits (Redis ``WAIT``) until k replicas have it, up to
    ``wait_timeout`` seconds, and raises ``NotReplicated`` if fewer did (it was applied on the master).
    Fewer round trips, weaker promises (the guide's "Prefetch and pipelined acknowledgements"):
    ``prefetch=k`` (default 1: off): a ``pop`` with none leased ahead leases up to k ready requests and keeps
    the extras for the next pops (leased to this client, renewed, given back at close, counted in
    ``stats()['prefetched']``; ``holds`` is False for them): a pop may then be up to k - 1 pops behind a
    better request pushed since, and hand one out during a pause. ``ack="pipelined"``: ``done`` and
    ``done_many`` return once the kernel has transmitted their step, without its reply (which the client's
    next step reads): a lease found lost is then logged and counted in ``stats()['acks_lost']``. Not with
    ``cluster`` or ``wait_replicas``.
    """

    def __init__(self, url: str, *, crawl: str, lease: float = 30.0, renew: bool = True,
                 delay: float | None = None, per_host: int | None = None, order: str | None = None,
                 prefer: str | None = None, expected_urls: int = 10_000_000, create: bool = True,
                 new_order: str = "lifo", copy_of: str | None = None, shards: int | None = None,
                 cluster: bool | None = None, wait_replicas: int = 0, wait_timeout: float = 5.0,
                 dedupe: str | None = None, error_rate: float = 1e-7, prefetch: int = 1,
                 ack: str = "deferred") -> None:
        self.crawl = check_crawl_name(crawl)
        options = ClientOptions(lease, renew, prefetch, ack, shards, cluster, wait_replicas, wait_timeout).checked()
        asked = Settings(delay, per_host, order, prefer, expected_urls, create, new_order, copy_of, dedupe,
                         error_rate).checked()
        self.url, self.lease, self.prefetch, self.ack = url, options.lease, options.prefetch, options.ack
        self.wait_replicas, self.wait_timeout = options.wait_replicas, options.wait_timeout
        self._guard = guard = Guard(self.crawl, url)
        owner = weakref.proxy(self)  # not self: a frontier dropped unclosed is freed (and disconnected) at once
        self._leases = Leases(lambda: owner._guard.check(drain=False), lambda *call: owner._transport.run(*call),
                              BATCH, self.lease, beat_on_calls=not renew)
        self._acks = AckTally()
        redis = connect(url, cluster)
        self.cluster = is_cluster(redis)
        values = Values(url)
        try:
            opened = open_crawl(redis, url, self.crawl, values, asked, shards)
        except BaseException:
            redis.close()  # the caller never gets this object to close
            raise
        self.order, self.delay, self.per_host, self.prefer = opened.order, opened.delay, opened.per_host, opened.prefer
        self.made, self.copy_mark = opened.made, opened.copy_mark  # made here (with copy_of: marked as a copy)
        self._seen_keys = opened.seen_keys
        self.shards = len(opened.shards)
        self._transport = transport = Transport(redis, url, opened.shards, opened.scripts, cluster=self.cluster,
                                                wait_replicas=self.wait_replicas, wait_timeout=self.wait_timeout)
        router = Router(opened.shards)
        readers = [CrawlReader(redis, url, self.crawl, values, self._seen_keys, shard.tag) for shard in opened.shards]
        self._reader = MergedReader(readers, router)
        self._writes = Writes(transport, router, self._seen_keys)
        self._fanout = Fanout(transport, readers, router, self._leases, self.lease, guard)
        self._waiting = Waiting(self._fanout, guard, self.prefetch)
        # a done waits for the next step only while a renewal thread runs to send it if no step comes
        deferred = DeferredAcks(self._acks) if self.ack == "deferred" and renew else None
        transport.deferred = guard.acks = self._deferred = deferred
        guard.send_acks = transport.send_acks
        self._leases.before_renewal = transport.send_acks
        self._finishing = Finishing(self._leases, transport, guard, self._acks, self.lease, deferred,
                                    lambda: owner._renewal is not None and owner._renewal.running)
        self._rules = HostRules(transport, router)
        self._robots = RobotsStore(redis, url, opened.shards[0].prefix, values)
        self._steering = Steering(transport, self._reader, router)
        guard.closed = False
        try:
            if not self.cluster and not self.wait_replicas:  # the client's scripts on a connection of its own
                channel = transport.open_channel()
                if self.ack == "pipelined":
                    guard.channel = channel  # whose replies a read of the crawl reads first
            self._leases.register()
        except BaseException:
            guard.closed = True
            redis.close()
            raise
        self._renewal = Renewal(self._leases, self.lease, f"diskfrontier-leases {self.crawl}", transport.send_acks,
                                GRACE) if renew else None
        if deferred is not None and self._renewal is not None:
            deferred.nudge = self._renewal.nudge

    # ------------------------------------------------------------------ the client
    @property
    def client_id(self) -> str:
        """This client's id in the crawl (``<hex>-<pid>``): what ``diskfrontier clients`` lists and
        ``diskfrontier release --client`` takes."""
        return self._leases.client_id

    @property
    def shards_looked_at(self) -> tuple[int, ...]:
        """The shards the last pop looked at, in that order (see ``pop_many``)."""
        return self._fanout.shards_looked_at

    def shard_of(self, request: Request) -> int:
        """The shard (0 to ``shards - 1``) that holds ``request``: the one its slot (its host) hashes to."""
        return self._reader.router.of_slot(request.slot)

    def set_copy_mark(self, source: str | None) -> None:
        """Mark the crawl as being made by a copy of ``source`` (None: remove the mark, the copy's last
        step). A marked crawl is refused by every open but ``copying=True`` (``IncompleteCopy``)."""
        self._guard.check()
        mark_copy(self._transport.redis, self.url, self.crawl, source)
        self.copy_mark = source

    def __enter__(self) -> RedisFrontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RedisFrontier {self.crawl!r} at {shown_url(self.url)}>"

    # ------------------------------------------------------------------ adding requests
    def push(self, request: Request, *, not_before: float | None = None) -> bool:
        """``FrontierProtocol.push``: dedupe, store and enqueue in one script, so a True is in Redis (durable
        as its ``appendfsync`` makes it). ``not_before`` is compared with the Redis server's clock."""
        checks.check_request("push", request)
        due = None if not_before is None else checks.check_time("not_before", not_before)
        args = self._writes.prepare(request, due)
        self._guard.check()
        return self._writes.push(request, args)

    def push_record(self, request: Request, record: bytes) -> bool:
        """``FrontierProtocol.push_record``: one ``PUSH`` script, as ``push``."""
        args = self._writes.prepare(request, record=record)
        self._guard.check()
        return self._writes.push(request, args)

    def push_many(self, requests: Iterable[Request]) -> int:
        """``FrontierProtocol.push_many``: ``BATCH`` requests a script call, each on its host's shard; every
        request is checked and encoded before anything is sent."""
        batch = list(requests)
        checks.check_requests("push_many", batch)
        prepared = self._writes.prepare_many(batch)
        self._guard.check()
        return self._writes.push_many(prepared)

    def push_each(self, requests: Iterable[Request], records: Iterable[bytes] | None = None) -> list[bool]:
        """``SharedFrontierProtocol.push_each``: as ``push_many``."""
        batch = list(requests)
        encoded: list[bytes | None] | None = None if records is None else list(records)
        if encoded is not None and len(encoded) != len(batch):
            raise ValueError(f"push_each() got {len(batch)} requests and {len(encoded)} records")
        checks.check_requests("push_each", batch)
        prepared = self._writes.prepare_many(batch, encoded)
        self._guard.check()
        return self._writes.push_each(prepared, len(batch))

    def has_seen(self, fingerprint: bytes) -> bool:
        """``FrontierProtocol.has_seen``, asking every shard; with ``dedupe="bloom"`` a True means "maybe"."""
        self._guard.check()
        return self._fanout.has_seen(list(self._seen_keys.of(fingerprint)))

    @property
    def dedupe(self) -> str:
        """How the crawl dedupes: ``"exact"`` or ``"bloom"`` (fixed when it was made)."""
        return "exact" if self._seen_keys.exact else "bloom"

    def mark_seen(self, fingerprints: Iterable[bytes]) -> int:
        """``FrontierProtocol.mark_seen``: on every shard (a fingerprint has no host to place it by), counted once
        in ``stats()['seen']``; each shard counts the copies it holds in ``seen_copies`` (a little high at most)."""
        batch = checks.check_fingerprints("mark_seen()", fingerprints)
        self._guard.check()
        return self._fanout.mark_seen([value for fingerprint in batch for value in self._seen_keys.of(fingerprint)])

    # ------------------------------------------------------------------ handing out and finishing
    def pop(self, timeout: float | None = 0.0) -> Request | None:
        """``FrontierProtocol.pop``: the request is leased to this client (``lease``). Other clients' pushes
        and dones are not signalled: a waiting pop looks again every few milliseconds, up to a quarter second
        apart, and at once when something held back by time is due; paused, it waits out its timeout (None:
        until a ``resume``, unless the crawl is finished). Across shards: see ``pop_many``."""
        if timeout is not None and timeout != 0.0:
            timeout = checks.check_seconds("timeout", timeout)
        self._guard.check(drain=self.shards > 1)
        return self._waiting.pop(timeout)

    def pop_many(self, count: int) -> list[Request]:
        """``SharedFrontierProtocol.pop_many``: one script call a shard looked at. With shards, from the shard
        whose best ready request comes first in the crawl's order, then the next, ...: short only when every
        shard had fewer (``fanout.py``). Among shards whose best are equal, this client's rotation decides,
        starting one shard further at each pop, so no shard starves; ``shards_looked_at`` says what the pop
        looked at. Requests leased ahead by ``prefetch`` come first."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be a whole number of at least 1, got {count!r}")
        self._guard.check(drain=self.shards > 1)
        return self._fanout.pop_many(count)

    def done(self, request: Request, *, refetch_after: float | None = None) -> None:
        """``FrontierProtocol.done``; ``LeaseExpired`` if its lease was taken back (nothing is changed). With
        ``ack="deferred"`` (the default) the step rides on this client's next one, and with ``ack="pipelined"``
        it is sent and not waited for (neither with ``refetch_after``): a lease found lost is then logged and
        counted in ``stats()['acks_lost']``, unless a renewal had found it lost already (then this raises
        ``LeaseExpired`` and sends nothing)."""
        if refetch_after is None:
            self._finishing.done(request)
            return
        self._finishing.refetch(request, checks.check_seconds("refetch_after", refetch_after))

    def done_many(self, requests: Iterable[Request]) -> None:
        """``FrontierProtocol.done_many`` in one script call a shard; ``LeaseExpired`` names those that were
        taken back (the others are done). With ``ack="pipelined"``, as ``done`` is."""
        self._finishing.done_many(list(requests))

    def retry(self, request: Request, *, delay: float = 0.0) -> None:
        """``FrontierProtocol.retry``: one script ends the lease and stores the request pending again;
        ``LeaseExpired`` if its lease was taken back."""
        self._finishing.retry(request, checks.check_seconds("delay", delay))

    def fail(self, request: Request, error: str) -> None:
        """``FrontierProtocol.fail``: one script; ``LeaseExpired`` if its lease was taken back."""
        self._finishing.fail(request, checks.check_error("fail()", error))

    def record_outcome(self, *outcomes: Outcome) -> None:
        """``FrontierProtocol.record_outcome``: one script adding to the ``meta`` counters of shard 0."""
        self._finishing.record_outcome(outcomes)

    def holds(self, request: Request) -> bool:
        """``FrontierProtocol.holds``: leased to this client and handed out (not one leased ahead)."""
        return self._leases.holds(request)

    def extend(self, request: Request, seconds: float | None = None) -> None:
        """``SharedFrontierProtocol.extend``: one script."""
        self._finishing.extend(request, None if seconds is None else checks.check_seconds("seconds", seconds))

    def extend_many(self, requests: Iterable[Request], seconds: float | None = None) -> list[Request]:
        """``SharedFrontierProtocol.extend_many`` in one script call a shard."""
        return self._finishing.extend_many(list(requests), None if seconds is None else checks.check_seconds(
            "seconds", seconds))

    def next_event_seen(self) -> float | None:
        """``SharedFrontierProtocol.next_event_seen``; None also when the last short pop found the crawl paused
        (nothing becomes ready by time then)."""
        return self._waiting.next_event_seen()

    @property
    def in_flight(self) -> list[Request]:
        """``FrontierProtocol.in_flight``: the requests this client holds leases on."""
        return self._leases.requests()

    # ------------------------------------------------------------------ failed requests
    def failed(self) -> list[FailedRequest]:
        """``FrontierProtocol.failed``, of every shard."""
        self._guard.check()
        return self._reader.failed()

    def requeue_failed(self, limit: int | None = None) -> int:
        """``FrontierProtocol.requeue_failed``: one script a shard."""
        limit = checks.check_limit("requeue_failed()", limit)
        self._guard.check()
        return self._fanout.requeue_failed(limit)

    def record_failed(self, failed: Iterable[FailedRequest]) -> int:
        """``FrontierProtocol.record_failed``: ``BATCH`` requests a script call, each on its host's shard."""
        prepared = self._writes.prepare_failed(checks.check_failed("record_failed()", failed))
        self._guard.check()
        return self._writes.record_failed(prepared)

    # ------------------------------------------------------------------ reading the whole crawl
    def pending_requests(self, *, leased: bool = True) -> Iterator[Request]:
        """Every request of the crawl not done, in no order (``leased=False``: not those leased now). Read with
        HSCAN beside running clients: a request moved meanwhile may be seen twice or not at all."""
        self._guard.check()
        return self._reader.pending_requests(leased=leased)

    def seen_fingerprints(self) -> Iterator[bytes]:
        """Every fingerprint in the crawl's seen set (SCAN over its buckets, then HSCAN of each)."""
        self._guard.check()
        return self._reader.seen_fingerprints()

    # ------------------------------------------------------------------ state
    def __len__(self) -> int:
        """``FrontierProtocol.__len__``: pending in the crawl, not counting those leased to any client."""
        self._guard.check()
        return self._reader.pending()

    @property
    def finished(self) -> bool:
        """``FrontierProtocol.finished``: for every client (nothing leased by any)."""
        self._guard.check()
        look = self._fanout.look()
        return look.pending == 0 and look.in_flight == 0

    def next_ready(self) -> float | None:
        """``FrontierProtocol.next_ready``. A lease running out is such a time too: its request is pending again
        then. While the crawl is paused, a quarter second from now at the soonest: a ``resume`` by any client is
        not signalled, so a caller waiting on this looks again then."""
        self._guard.check()
        return self._waiting.next_ready()

    def stats(self) -> dict[str, Any]:
        """``FrontierProtocol.stats``: the crawl's counters (all clients) and this client's own: ``leased_here``
        (``prefetched`` included), ``acks_lost`` (pipelined dones whose leases had run out), ``acks_failed``
        (pipelined dones refused, or whose replies a lost connection took: they come back when their leases
        run out)."""
        self._guard.check()
        crawl = self._reader.stats()
        head = ("pending", "in_flight")
        tail = ("done", "seen", "pushed", "duplicates", "retried", "refetch_scheduled", "reclaimed", "failed",
                "dropped", "delayed", "hosts", "ready_hosts", "paused_since", *REVISIT_COUNTERS, *OUTCOME_KEYS)
        return {
            "backend": "redis", "crawl": self.crawl, **{name: crawl[name] for name in head},
            "leased_here": len(self._leases), "prefetched": self._leases.stashed, "acks_lost": self._acks.lost,
            "acks_failed": self._acks.failed, **{name: crawl[name] for name in tail},
            "order": self.order, "delay": crawl["delay"], "per_host": crawl["per_host"], "prefer": crawl["prefer"],
            "lease": self.lease, "dedupe": self.dedupe, **self._reader.seen_layout_stats(), "shards": self.shards,
        }

    # ------------------------------------------------------------------ steering
    def pause(self) -> None:
        """``FrontierProtocol.pause``: the ``meta`` field ``paused`` of every shard, which every client sees at
        its next pop."""
        self._guard.check()
        self._steering.set_paused(True)

    def resume(self) -> None:
        """``FrontierProtocol.resume``: every client hands out again."""
        self._guard.check()
        self._steering.set_paused(False)

    @property
    def paused_since(self) -> float | None:
        """``FrontierProtocol.paused_since``, on the Redis server's clock."""
        self._guard.check()
        return self._reader.paused_since()

    def drop(self, *, host: str | None = None, match: str | None = None, dry_run: bool = False,
             show: int = 0) -> Dropped:
        """``FrontierProtocol.drop``, in steps of ``DROP_BATCH`` requests while clients may pop and push
        (``steering.py``): a request pushed meanwhile may or may not be dropped; leased ones never are."""
        pattern = checks.check_drop(host, match, show, dry_run)
        self._guard.check()
        return self._steering.drop(host, pattern, dry_run, show)

    def drop_crawl(self) -> int:
        """``SharedFrontierProtocol.drop_crawl``: other clients get errors from then on. SCAN and UNLINK in
        batches, shard 0's ``meta`` last: a deletion stopped half-way leaves a crawl to be deleted again."""
        self._guard.check()
        if self._renewal is not None:
            self._renewal.stop()  # its next beat would write this client's entry again
        if self._deferred is not None:
            self._deferred.take_all()  # their requests go with the crawl
        deleted = self._reader.delete_keys()
        self._leases.clear()
        self.close()
        return deleted

    # ------------------------------------------------------------------ hosts
    def set_delay(self, host: str, seconds: float | None) -> None:
        """``FrontierProtocol.set_delay``, for every client."""
        name = checks.check_host(host)
        seconds = None if seconds is None else checks.check_seconds("seconds", seconds)
        self._guard.check()
        self._rules.set_delay(name, seconds)

    def block(self, host: str, until: float) -> None:
        """``FrontierProtocol.block``: ``until`` is compared with the Redis server's clock."""
        name = checks.check_host(host)
        until = checks.check_until("block(): until", until)
        self._guard.check()
        self._rules.block(name, until)

    def unblock(self, host: str) -> None:
        """``FrontierProtocol.unblock``."""
        name = checks.check_host(host)
        self._guard.check()
        self._rules.unblock(name)

    def set_budget(self, host: str, budget: int | None) -> None:
        """``FrontierProtocol.set_budget``: at most 2**53 - 1, the largest whole number the scripts' numbers
        hold exactly."""
        name = checks.check_host(host)
        budget = checks.check_count("set_budget()", "budget", budget, 53, optional=True)
        self._guard.check()
        self._rules.set_budget(name, budget)

    def set_done_count(self, host: str, done: int) -> None:
        """``FrontierProtocol.set_done_count``: at most 2**53 - 1."""
        name = checks.check_host(host)
        count = checks.check_count("set_done_count()", "done", done, 53)
        assert count is not None
        self._guard.check()
        self._rules.set_done_count(name, count)

    def host_failed(self, host: str, *, block_after: int = 5, backoff: float = 60.0,
                    backoff_max: float = 3600.0) -> float | None:
        """``FrontierProtocol.host_failed``: the count (the host hash's field ``f``) and the block in one script;
        the time is the Redis server's."""
        name = checks.check_host(host)
        block_after, backoff, backoff_max = checks.check_host_failed(block_after, backoff, backoff_max)
        self._guard.check()
        return self._rules.failed(name, block_after, backoff, backoff_max)

    def robots(self, host: str) -> RobotsEntry | None:
        """``FrontierProtocol.robots``, kept in the crawl's ``robots`` hash."""
        name = checks.check_host(host)
        self._guard.check()
        return self._robots.get(name)

    def set_robots(self, host: str, entry: RobotsEntry) -> None:
        """``FrontierProtocol.set_robots``: for every client (the crawl's ``robots`` hash)."""
        name = checks.check_host(host)
        checked = checks.check_robots(entry)
        self._guard.check()
        self._robots.put(name, checked)

    def hosts(self) -> list[HostInfo]:
        """``FrontierProtocol.hosts``, of every shard."""
        self._guard.check()
        return self._reader.hosts()

    def host(self, name: str) -> HostInfo | None:
        """``FrontierProtocol.host``, in one round trip."""
        name = checks.check_host(name)
        self._guard.check()
        return self._reader.host(name)

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        """``FrontierProtocol.close``: this client's leased requests are pending again at once, its entry in the
        crawl's clients removed; in a forked child, nothing is sent (the leases are the parent's)."""
        guard = self._guard
        if guard.closed:
            return
        if not guard.owned():
            guard.closed = True
            return
        if self._renewal is not None:
            self._renewal.stop()
        held = self._leases.closing(_CLOSE_WAIT)  # what a pop under way in another thread leases is given back too
        try:
            self._transport.send_acks()
            self._leases.finish_many("release", held, 0.0)
            self._leases.leave()
        except FrontierError as exc:
            log.warning("close(): %d leased requests of crawl %r could not be given back (%s); they come back "
                        "when their leases run out", len(self._leases), self.crawl, exc)
        finally:
            guard.closed = True
            self._transport.close()


__all__ = ["RedisFrontier"]
