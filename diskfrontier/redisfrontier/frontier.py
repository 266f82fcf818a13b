"""RedisFrontier: the job directory's contract on a Redis server, for many processes on many machines."""

from __future__ import annotations

import collections
import math
import os
import re
import struct
import time
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import msgpack

from ..contract.checks import MAX_ATTEMPTS, MAX_ERROR, MAX_ROBOTS, check_drop, check_host_failed, check_robots
from ..contract.checks import check_attempts as _attempts
from ..contract.checks import check_host as _host
from ..contract.checks import check_seconds as _seconds
from ..contract.checks import check_time as _time
from ..contract.values import Dropped, FailedRequest, HostInfo, RobotsEntry
from ..core.errors import FrontierClosed, FrontierError
from ..request.model import Request
from .connection import (
    LeaseExpired,
    NotReplicated,
    RedisMisconfigured,
    check_crawl_name,
    connect,
    is_cluster,
    log,
    node_client,
    shown_url,
    talking,
)
from .leases import Leases, Renewal
from .merged import MergedReader
from .opening import COPY_MARK, Settings, open_crawl
from .pipelined import AckTally, ScriptChannel
from .reading import FOREVER, CrawlReader
from .records import encode, pack_body, push_args
from .shards import Router, check_shards
from .values import Values

_State = tuple[float | None, float, int, int, bool]  # a short pop's view: next event, now, pending, in flight, paused
_CLOSE_WAIT = 30.0  # seconds close() waits for pops under way in other threads
BATCH = 500  # requests per script call in push_many / done_many: keeps each script short
DROP_BATCH = 1000  # requests a drop step looks at (and drops at most)
_POLL_MIN, _POLL_MAX = 0.005, 0.25  # how often a waiting pop looks again (other clients push too)


class RedisFrontier:
    """A crawl frontier kept in Redis and shared by any number of processes on any number of machines.

    ``RedisFrontier("redis://host:6379/0", crawl="news")`` opens the crawl ``news`` (made on
    first use). Every client of one crawl sees one frontier: one seen set, one set of queues,
    one politeness schedule (a host's delay holds across all of them). The calls are the job
    directory's (``push``, ``push_many``, ``pop``, ``done``, ``retry``, ``len``, ``stats``,
    ``finished``, ``next_ready``, ``hosts``, ``set_delay``, ``block``/``unblock``,
    ``set_budget``, ``close``), each one atomic Lua script; ``pause``/``resume`` and ``drop``
    steer a running crawl for every client at once.

    Leases: ``pop`` leases the request to this client for ``lease`` seconds (default 30). A
    thread of this client renews every lease it holds every ``lease / 3`` seconds, in one
    script call, so a request is kept however long it is worked on; ``done`` or ``retry``
    acknowledge it (``renew=False``: only ``extend`` renews a lease). When a lease runs out (the
    process was killed, frozen or cut off from Redis) any client takes the request back as
    pending (``stats()['reclaimed']``), and a late ``done`` of the old copy raises
    ``LeaseExpired`` without touching the new one.
    ``close()`` gives back this client's leased requests at once.

    Crawl settings (``order``, ``delay``, ``per_host``, ``prefer``) belong to the crawl:
    ``None`` keeps what the crawl has (the job directory's defaults for a new one); a value
    sets it for every client. ``per_host=0`` means no limit. ``new_order`` is the order of a crawl
    made here when ``order`` is None.

    Dedupe (``dedupe``, fixed when the crawl is made; None keeps the crawl's, ``"exact"`` for a new
    one): ``"exact"`` keeps each fingerprint's 64-bit key in Redis sets whose number grows with the
    crawl (about 10 bytes a URL, nothing to size in advance; two URLs share a key with odds of about
    n**2 / 2**65). ``"bloom"`` keeps a series of Bloom filters that grows with the crawl (6.5 to 8
    bytes a URL at ``error_rate=1e-7``): a new URL is taken for a duplicate, and never queued, with
    probability about ``error_rate``, and ``has_seen`` means "maybe". ``"hash"`` makes a crawl in the
    layout of earlier versions, whose bucket count ``expected_urls`` fixes (for comparison; crawls
    made before keep working in it whatever is asked).
    A crawl that ``diskfrontier copy`` is making (or was making when it was stopped) is refused
    with ``IncompleteCopy``. ``copy_of`` is for the copy itself: it opens such a crawl, and a crawl
    made by this open is marked as a copy of ``copy_of`` in the same step (``copy_mark``,
    ``made``); ``set_copy_mark(None)`` removes the mark at the end.
    Absolute times (``not_before``, ``block(until)``) are ``time.time()``
    values compared with the Redis server's clock; delays and leases are measured on it.

    Shards and clusters: ``shards=N`` makes a new crawl of N shards (its hosts spread over N hash tags,
    each host's requests, state and leases on one of them; fixed when the crawl is made: None opens a
    crawl whatever its number, any other number must be the crawl's). ``cluster``: True, talk to a Redis
    Cluster (``url`` names any of its nodes) through redis-py's ``RedisCluster``; False, a plain server;
    None (the default), whichever ``url`` is. ``wait_replicas=k``: each step waits (Redis ``WAIT``) until
    k replicas have it, up to ``wait_timeout`` seconds, and raises ``NotReplicated`` if fewer did (the
    step was applied on the master). ``pop`` across shards: see its docstring.

    Fewer round trips, weaker promises (docs/guide/redis.md, "Prefetch and pipelined acknowledgements"):
    ``prefetch=k`` (default 1: off): a ``pop`` that finds none leased ahead leases up to k ready
    requests in one step and keeps the extras, leased to this client (renewed, given back at close,
    counted in the crawl's ``in_flight`` and this client's ``stats()['prefetched']``; ``holds`` is
    False for them), for the next pops. A pop may then return a request that was the best ready when
    it was leased ahead: at most k - 1 pops behind a better one pushed since; requests leased ahead
    are handed out during a pause; a host's delay counts from when its request was leased.
    ``ack="pipelined"`` (default ``"wait"``): ``done`` and ``done_many`` send their step and return
    without waiting for its reply, which the next step of this client reads (a pop's in the same round
    trip). A done returns once the kernel has transmitted it, so a killed process still delivers
    it; but a lease found lost is only known then: it is logged and counted in
    ``stats()['acks_lost']`` (a done of a request a renewal already found lost raises
    ``LeaseExpired``). Not with ``cluster`` or ``wait_replicas``.
    """

    def __init__(
        self,
        url: str,
        *,
        crawl: str,
        lease: float = 30.0,
        renew: bool = True,
        delay: float | None = None,
        per_host: int | None = None,
        order: str | None = None,
        prefer: str | None = None,
        expected_urls: int = 10_000_000,
        create: bool = True,
        new_order: str = "lifo",
        copy_of: str | None = None,
        shards: int | None = None,
        cluster: bool | None = None,
        wait_replicas: int = 0,
        wait_timeout: float = 5.0,
        dedupe: str | None = None,
        error_rate: float = 1e-7,
        prefetch: int = 1,
        ack: str = "wait",
    ) -> None:
        self.crawl = check_crawl_name(crawl)
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or not 1 <= prefetch <= BATCH:
            raise ValueError(f"prefetch must be a whole number from 1 to {BATCH}, got {prefetch!r}")
        if prefetch > 1 and not renew:
            raise ValueError("prefetch needs renew=True: requests leased ahead wait in this client, and only the "
                             "background renewal keeps their leases")
        if ack not in ("wait", "pipelined"):
            raise ValueError(f"ack must be 'wait' or 'pipelined', got {ack!r}")
        if ack == "pipelined" and (wait_replicas or cluster):
            raise ValueError("ack='pipelined' does not go with wait_replicas or a Redis Cluster (each step is waited "
                             "for there)")
        self.prefetch, self.ack = prefetch, ack
        check_shards(shards)
        if isinstance(wait_replicas, bool) or not isinstance(wait_replicas, int) or wait_replicas < 0:
            raise ValueError(f"wait_replicas must be a whole number of at least 0, got {wait_replicas!r}")
        if cluster not in (None, True, False):
            raise ValueError(f"cluster must be True, False or None (whichever the server is), got {cluster!r}")
        self.wait_replicas = wait_replicas
        self.wait_timeout = _seconds("wait_timeout", wait_timeout)
        self.lease = _seconds("lease", lease)
        if self.lease <= 0:
            raise ValueError("lease must be more than 0 seconds")
        asked = Settings(delay, per_host, order, prefer, expected_urls, create, new_order, copy_of, dedupe,
                         error_rate).checked()
        self.url = url
        self._closed = True
        self._pid = os.getpid()
        owner = weakref.proxy(self)  # not self: a frontier dropped unclosed is freed (and disconnected) at once
        self._leases = Leases(lambda: owner._check_open(drain=False), lambda *call: owner._run(*call), BATCH,
                              self.lease, beat_on_calls=not renew)
        self._channel: ScriptChannel | None = None
        self._acks = AckTally()
        self._redis = connect(url, cluster)
        self.cluster = is_cluster(self._redis)
        self._meta = f"df:{{{self.crawl}}}:meta"
        self._values = Values(url)
        try:
            opened = open_crawl(self._redis, url, self.crawl, self._values, asked, shards)
        except BaseException:
            self._closed = True
            self._redis.close()  # the caller never gets this object to close
            raise
        self._scripts = opened.scripts
        self.order, self.delay, self.per_host, self.prefer = opened.order, opened.delay, opened.per_host, opened.prefer
        self.made, self.copy_mark = opened.made, opened.copy_mark  # made here (with copy_of: marked as a copy)
        self._seen_keys = opened.seen_keys
        self._shards = opened.shards
        self.shards = len(self._shards)
        self._router = Router(self._shards)
        self._readers = [CrawlReader(self._redis, self.url, self.crawl, self._values, self._seen_keys, shard.tag)
                         for shard in self._shards]
        self._reader = MergedReader(self._readers, self._router)
        self.shards_looked_at: tuple[int, ...] = ()  # the shards the last pop_many looked at, in that order
        self._closed = False
        try:
            if ack == "pipelined":
                if self.cluster:
                    raise ValueError("ack='pipelined' does not go with a Redis Cluster (each step is waited for there)")
                with talking(url, "open"):
                    self._channel = ScriptChannel(self._redis, self._scripts)
            self._leases.register()
        except BaseException:
            self._closed = True
            self._redis.close()
            raise
        self._renewal = Renewal(self._leases, self.lease, f"diskfrontier-leases {self.crawl}") if renew else None

    # ------------------------------------------------------------------ plumbing
    @property
    def client_id(self) -> str:
        """This client's id in the crawl (``<hex>-<pid>``): what ``diskfrontier clients`` lists and
        ``diskfrontier release --client`` takes."""
        return self._leases.client_id

    @property
    def _shown_url(self) -> str:
        return shown_url(self.url)

    def set_copy_mark(self, source: str | None) -> None:
        """Mark the crawl as being made by a copy of ``source`` (None: remove the mark, the copy's last
        step). A marked crawl is refused by every open but ``copying=True`` (``IncompleteCopy``)."""
        self._check_open()
        with talking(self.url, "copy mark"):
            if source is None:
                self._redis.hdel(self._meta, COPY_MARK)
            else:
                self._redis.hset(self._meta, COPY_MARK, source)
        self.copy_mark = source

    def _run(self, what: str, name: str, args: list[Any], shard: int = 0) -> Any:
        meta = self._shards[shard].meta
        # the client's entry written at open and removed at close is bookkeeping a failover may lose
        bookkeeping = name == "LEAVE" or (name == "BEAT" and what == "open")
        if self.wait_replicas and not bookkeeping:
            return self._run_replicated(what, name, args, meta)
        with talking(self.url, what):
            if self._channel is not None:
                return self._channel.call(name, meta, args)
            return self._scripts[name](keys=[meta], args=args)

    def _run_replicated(self, what: str, name: str, args: list[Any], meta: str) -> Any:
        """``_run`` followed by ``WAIT`` on the same connection (WAIT counts only its own connection's
        writes): one pipeline to the master that holds ``meta``. A redirect (the slot moved: the step did
        not run) is followed after the cluster's layout is read again."""
        import redis.exceptions as rx

        for attempt in range(3):
            try:
                with talking(self.url, what):
                    try:
                        pipe = node_client(self._redis, meta).pipeline(transaction=False)
                        self._scripts[name](keys=[meta], args=args, client=pipe)
                        pipe.execute_command("WAIT", self.wait_replicas, max(1, int(self.wait_timeout * 1000)))
                        answer, acked = pipe.execute()
                    except (rx.ConnectionError, rx.TimeoutError):
                        self._reread_layout()
                        raise
            except FrontierError as exc:
                if self.cluster and attempt < 2 and ("MOVED" in str(exc) or "ASK" in str(exc)):
                    self._reread_layout()
                    continue
                raise
            if int(acked) < self.wait_replicas:
                raise NotReplicated(f"{what}: applied on the master of {meta} at {self._shown_url}, but only "
                                    f"{acked} of the {self.wait_replicas} replicas asked for (wait_replicas) had it "
                                    f"after {self.wait_timeout:g}s: a failover now could lose it")
            return answer
        raise AssertionError("unreachable")

    def _reread_layout(self) -> None:
        """Have a ``RedisCluster`` read which node holds which slots again (after a failover)."""
        if self.cluster:
            try:
                self._redis.nodes_manager.initialize()
            except Exception as exc:  # the cluster may still be electing a new master: the next call tries again
                log.debug("the cluster's layout could not be read yet: %s", exc)

    def _check_open(self, drain: bool = True) -> None:
        """Raise unless this frontier may be used; ``drain``: first read the replies of acknowledgements sent
        and not read yet (``ack="pipelined"``), so that a read on another connection sees them applied."""
        if self._closed:
            raise FrontierClosed(f"crawl {self.crawl!r} at {self._shown_url} was closed; open it again")
        if os.getpid() != self._pid:
            raise FrontierError(f"this RedisFrontier was opened by pid {self._pid}: a forked child must open "
                                f"its own (its leases are the parent's)")
        if drain and self._channel is not None and self._channel.pending:
            with talking(self.url, "reading acknowledgements"):
                self._channel.drain()

    def __enter__(self) -> RedisFrontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RedisFrontier {self.crawl!r} at {self._shown_url}>"

    # ------------------------------------------------------------------ push
    def push_record(self, request: Request, record: bytes) -> bool:
        """``push`` for a request already encoded as ``record`` (a msgpack request record)."""
        args = push_args(request, self._seen_keys, None, record)
        self._check_open()
        return bool(self._run("push", "PUSH", [1, *args], self._router.of_slot(request.slot))[0])

    def push(self, request: Request, *, not_before: float | None = None) -> bool:
        """Queue ``request``; False if its fingerprint was seen before (or True if ``dont_filter``).

        Dedupe, store and enqueue are one script: once this returns True the request is in
        Redis (durable as its ``appendfsync`` makes it). ``not_before``: a ``time.time()``
        value before which it is not handed out.
        """
        if not isinstance(request, Request):
            raise TypeError(f"push() takes a diskfrontier.Request, got {type(request).__name__}")
        args = push_args(request, self._seen_keys, None if not_before is None else _time("not_before", not_before))
        self._check_open()
        return bool(self._run("push", "PUSH", [1, *args], self._router.of_slot(request.slot))[0])

    def push_many(self, requests: Iterable[Request]) -> int:
        """Push many requests, ``BATCH`` to a script call; return how many were queued.

        Every request is checked and encoded first: a bad one raises before anything is sent.
        """
        by_shard: dict[int, list[Any]] = {}
        for request in requests:
            if not isinstance(request, Request):
                raise TypeError(f"push_many() takes diskfrontier.Request objects, got {type(request).__name__}")
            by_shard.setdefault(self._router.of_slot(request.slot), []).extend(
                push_args(request, self._seen_keys, None))
        self._check_open()
        queued = 0
        step = BATCH * 6
        for shard, args in by_shard.items():
            for at in range(0, len(args), step):
                chunk = args[at:at + step]
                queued += sum(self._run("push_many", "PUSH", [len(chunk) // 6, *chunk], shard))
        return queued

    def push_each(self, requests: Iterable[Request], records: Iterable[bytes] | None = None) -> list[bool]:
        """``push_many`` that answers for each request: True if it was queued, False if a duplicate.

        ``records``: the requests' msgpack records, one per request, if they are already encoded.
        """
        requests = list(requests)
        encoded: list[bytes | None] = [None] * len(requests) if records is None else list(records)
        if len(encoded) != len(requests):
            raise ValueError(f"push_each() got {len(requests)} requests and {len(encoded)} records")
        by_shard: dict[int, tuple[list[int], list[Any]]] = {}
        for index, (request, record) in enumerate(zip(requests, encoded, strict=True)):
            if not isinstance(request, Request):
                raise TypeError(f"push_each() takes diskfrontier.Request objects, got {type(request).__name__}")
            places, args = by_shard.setdefault(self._router.of_slot(request.slot), ([], []))
            places.append(index)
            args.extend(push_args(request, self._seen_keys, None, record))
        self._check_open()
        answers = [False] * len(requests)
        for shard, (places, args) in by_shard.items():
            for at in range(0, len(places), BATCH):
                chunk = args[at * 6:(at + BATCH) * 6]
                replies = self._run("push_many", "PUSH", [len(chunk) // 6, *chunk], shard)
                for index, reply in zip(places[at:at + BATCH], replies, strict=True):
                    answers[index] = bool(reply)
        return answers

    def has_seen(self, fingerprint: bytes) -> bool:
        """True if ``fingerprint`` is in the crawl's seen set (with ``dedupe="bloom"``: maybe, as a
        Bloom filter answers; False is always sure)."""
        self._check_open()
        pair = list(self._seen_keys.of(fingerprint))
        # a fingerprint is kept on its host's shard, and the host is not known here: any shard may have it
        return any(self._run("has_seen", "HAS_SEEN", pair, shard)[0] for shard in range(len(self._shards)))

    @property
    def dedupe(self) -> str:
        """How the crawl dedupes: ``"exact"`` or ``"bloom"`` (fixed when it was made)."""
        return "exact" if self._seen_keys.exact else "bloom"

    def mark_seen(self, fingerprints: Iterable[bytes]) -> int:
        """Add fingerprints to the seen set without queuing anything; return how many were new.

        With shards, a fingerprint without its request has no host to place it by: it is marked on
        every shard (so that a push of its request is a duplicate on whichever shard its host is). It
        is counted once in ``stats()['seen']``: the shards count the copies they hold of fingerprints
        another shard has as ``seen_copies`` (clients pushing meanwhile may make that count a little high).
        """
        self._check_open()
        args: list[Any] = []
        for fingerprint in fingerprints:
            args.extend(self._seen_keys.of(fingerprint))
        fresh = 0
        for at in range(0, len(args), BATCH * 2):
            chunk = args[at:at + BATCH * 2]
            if len(self._shards) == 1:
                fresh += self._run("mark_seen", "MARK_SEEN", [len(chunk) // 2, *chunk])
            else:
                fresh += self._mark_on_every_shard(chunk)
        return fresh

    def _mark_on_every_shard(self, chunk: list[Any]) -> int:
        pairs = [(chunk[k], chunk[k + 1]) for k in range(0, len(chunk), 2)]
        count = len(self._shards)
        found = [self._run("mark_seen", "HAS_SEEN", chunk, shard) for shard in range(count)]  # one list per shard
        new = [pair for k, pair in enumerate(pairs) if not any(answer[k] for answer in found)]
        known = [pair for k, pair in enumerate(pairs) if any(answer[k] for answer in found)]
        fresh = 0
        for shard in range(count):
            for group in (new, known):
                if not group:
                    continue
                marked = int(self._run("mark_seen", "MARK_SEEN", [len(group), *(x for pair in group for x in pair)],
                                       shard))
                if shard == 0 and group is new:
                    fresh = marked
                elif marked:  # a copy of a fingerprint another shard holds
                    with talking(self.url, "mark_seen"):
                        self._redis.hincrby(self._shards[shard].meta, "seen_copies", marked)
        return fresh

    def _seen_stats(self) -> dict[str, Any]:
        """The seen set's layout, and its buckets or filters summed over the shards."""
        parts = [reader.seen_layout_stats() for reader in self._readers]
        out = dict(parts[0])
        for name in ("seen_buckets", "bloom_filters"):
            if name in out:
                out[name] = sum(part[name] for part in parts)
        return out

    # ------------------------------------------------------------------ pop
    def pop(self, timeout: float | None = 0.0) -> Request | None:
        """The next ready request, leased to this client; None if none is ready.

        ``timeout=0`` does not wait; ``timeout=t`` waits up to t seconds; ``timeout=None``
        waits until one is ready, and returns None once the crawl is ``finished`` (nothing
        pending, nothing leased by any client) or when nothing could become ready by waiting.
        A waiting pop looks again every few milliseconds up to a quarter second (other
        clients' pushes and dones are not signalled), and wakes at once when something
        held back by time is due. While the crawl is paused (``pause``) nothing is handed out:
        a pop waits out its timeout (``None``: until a ``resume``, unless the crawl is finished),
        and returns a request if the crawl is resumed meanwhile.
        """
        if timeout is not None and timeout != 0.0:
            timeout = _seconds("timeout", timeout)
        self._check_open(drain=len(self._shards) > 1)
        got = self._pop_one()
        if got or timeout == 0:
            return got[0] if got else None
        deadline = None if timeout is None else time.monotonic() + timeout
        poll = _POLL_MIN
        while True:
            state = self._state
            if timeout is None and state is not None and state[3] == 0 and (
                    state[2] == 0 or (state[0] is None and not state[4])):
                return None  # finished, or (not paused) only what nothing but another call could free
            wait = poll
            if state is not None and state[0] is not None and not state[4]:
                wait = min(wait, max(0.0, state[0] - state[1]) + 0.001)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                wait = min(wait, left)
            time.sleep(wait)
            poll = min(poll * 2, _POLL_MAX)
            self._check_open(drain=len(self._shards) > 1)
            got = self._pop_one()
            if got:
                return got[0]

    def _pop_one(self) -> list[Request]:
        """One request leased ahead, or else (``prefetch`` > 1) up to ``prefetch`` leased now and all but the
        first kept for the next pops; an empty list if none is ready."""
        if self.prefetch == 1:
            return self.pop_many(1)
        ahead = self._leases.hand_out(1)
        return ahead or self._lease(self.prefetch, 1)

    def pop_many(self, count: int) -> list[Request]:
        """Up to ``count`` ready requests in one script call (one per shard looked at), each leased (``pop`` order).

        With shards, a pop first reads the best ready request of every shard in one round trip (a shard
        with a lease run out, or a request or host due by this client's clock, is brought up to date by
        one ``LOOK`` first), then pops from the shard whose request comes first in the crawl's order
        (priority; with ``prefer="idle"``, the host's leases first), then, if that shard had fewer than
        ``count`` ready, from the next, and so on: it comes back short only when every shard had fewer.
        Among shards whose best requests are equal, this client's rotation decides, and it starts one
        shard further at each pop: a shard holding a request as good as any other shard's best is served
        at least once in every N consecutive pops of a client (no shard starves). What a pop looked at is
        in ``shards_looked_at``. A push or done by another client between the read and the pop may change
        what is best; within one shard the order is the crawl's (LIFO or FIFO within a priority), between
        shards of equal priority it is the rotation's. Requests leased ahead by ``prefetch`` come first.
        """
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be a whole number of at least 1, got {count!r}")
        self._check_open(drain=len(self._shards) > 1)
        ahead = self._leases.hand_out(count) if self._leases.stashed else []
        if len(ahead) == count:
            return ahead
        return ahead + self._lease(count - len(ahead), count - len(ahead))

    def _lease(self, count: int, hand: int) -> list[Request]:
        """Lease up to ``count`` ready requests (``pop_many``'s step); the first ``hand`` are returned, the rest
        kept for later pops (``prefetch``)."""
        self._check_open(drain=len(self._shards) > 1)
        leases = self._leases
        if not leases.begin_pop():
            raise FrontierClosed(f"crawl {self.crawl!r} at {self._shown_url} is being closed")
        try:
            leases.touch()
            if len(self._shards) == 1:
                self.shards_looked_at = (0,)
                out, self._state = self._pop_shard(0, count)
                leases.stash(out[hand:])
                return out[:hand]
            out, states, looked = [], [], []
            for shard in self._router.order(self._peek()):
                looked.append(shard)
                got, state = self._pop_shard(shard, count - len(out))
                out += got
                if len(out) == count:
                    break
                states.append(state)
            self.shards_looked_at = tuple(looked)
            self._state = None if len(out) == count else _merged_state(states)
            leases.stash(out[hand:])
            return out[:hand]
        finally:
            leases.end_pop()

    def _peek(self) -> list[float | None]:
        """The score of the best ready request of each shard (None: nothing ready), in one round trip; a
        shard where something is due (a lease, a request or host waiting for a time) is brought up to
        date by a ``LOOK`` and read again first."""
        now = time.time()
        due: list[int] = []
        with talking(self.url, "pop"):
            pipe = self._redis.pipeline(transaction=False)
            for shard in self._shards:
                for key in ("ready", "delayed", "wait", "lease"):
                    pipe.zrange(shard.prefix + key, 0, 0, withscores=True)
            answers = pipe.execute()
        heads: list[float | None] = []
        for index in range(len(self._shards)):
            ready, *timed = answers[4 * index:4 * index + 4]
            heads.append(float(ready[0][1]) if ready else None)
            if any(first and first[0][1] <= now for first in timed):
                due.append(index)
        for index in due:
            self._run("pop", "LOOK", [], index)
        if due:
            with talking(self.url, "pop"):
                pipe = self._redis.pipeline(transaction=False)
                for index in due:
                    pipe.zrange(self._shards[index].prefix + "ready", 0, 0, withscores=True)
                for index, ready in zip(due, pipe.execute(), strict=True):
                    heads[index] = float(ready[0][1]) if ready else None
        return heads

    def _pop_shard(self, shard: int, count: int) -> tuple[list[Request], _State | None]:
        """One POP of up to ``count`` requests on ``shard``: the requests, and its state if it came back short."""
        answer = self._run("pop", "POP", [count, repr(self.lease), self._leases.client_id], shard)
        got = int(answer[0])
        state: _State | None = None
        if got < count:
            event, now, pending, inflight, paused = answer[1].decode().split(" ")
            state = (float(event) if event else None, float(now), int(pending), int(inflight), paused == "1")
        out = []
        reader = self._readers[shard]
        for k in range(got):
            rid, body, token, _expiry = answer[2 + 4 * k: 6 + 4 * k]
            out.append(self._leases.add(reader.body("req", rid, body), rid, token, shard))
        return out, state

    # what the last short pop_many saw: next event, the server's now, pending, in flight, paused
    _state: _State | None = None

    def next_event_seen(self) -> float | None:
        """When something held back by time becomes ready (``time.time()`` terms), as the last
        ``pop_many`` that came back short saw it (no round trip); None if it saw nothing waiting, none
        came back short, or it found the crawl paused (nothing becomes ready by time then)."""
        state = self._state
        if state is None or state[0] is None or state[4]:
            return None
        return time.time() + max(0.0, state[0] - state[1])

    # ------------------------------------------------------------------ done, retry, extend
    def _one(self, what: str, request: Request, seconds: float, body: bytes | None) -> None:
        ok = self._leases.finish(what, [request], seconds, None if body is None else [body])
        if not ok[0]:
            raise LeaseExpired(f"{what}() of {request!r}: its lease ran out and it was taken back (another client "
                               f"may hold it now); nothing was changed. Renew long work with extend()")

    def done(self, request: Request, *, refetch_after: float | None = None) -> None:
        """Acknowledge ``request`` (as ``pop`` returned it): it will never be handed out again.

        ``refetch_after=s``: finished now, and the same request comes back as pending after
        s seconds (its attempts from 0). Raises ``LeaseExpired`` if its lease was taken back.
        With ``ack="pipelined"`` (and no ``refetch_after``) the step is sent and not waited for: a lease
        found lost is then logged and counted in ``stats()['acks_lost']``, unless a renewal had found it
        lost already (then this raises ``LeaseExpired`` and sends nothing).
        """
        if refetch_after is None:
            if self._channel is not None:
                if self._send_done([request]):
                    raise LeaseExpired(f"done() of {request!r}: its lease ran out and it was taken back (another "
                                       f"client may hold it now); nothing was changed. Renew long work with extend()")
                return
            self._one("done", request, 0.0, None)
            return
        after = _seconds("refetch_after", refetch_after)
        self._one("refetch", request, after, pack_body(request, encode(request), 0, 0.0))
        request.attempts = 0
        request.not_before = time.time() + after if after else None

    def done_many(self, requests: Iterable[Request]) -> None:
        """``done`` for many requests in one script call; ``LeaseExpired`` names those that were
        taken back (the others are done). With ``ack="pipelined"``, as ``done`` is."""
        if self._channel is not None:
            lost = self._send_done(list(requests))
        else:
            lost = self._leases.finish_many("done", list(requests), 0.0)
        if lost:
            raise LeaseExpired(f"done_many(): the leases of {len(lost)} requests ran out and they were taken back "
                               f"(the first: {lost[0]!r}); the others are done")

    def _send_done(self, requests: list[Request]) -> list[Request]:
        """Send the done steps of ``requests`` without waiting for their replies (``ack="pipelined"``); return
        those a renewal had found lost (not sent, no longer held)."""
        assert self._channel is not None
        self._check_open(drain=False)
        lost = [request for request in requests if self._leases.is_lost(request)]
        rest = [request for request in requests if not self._leases.is_lost(request)] if lost else requests
        for at in range(0, len(rest), BATCH):
            chunk = rest[at:at + BATCH]
            for shard, positions, args in self._leases.finish_args("done", chunk, 0.0):
                sent = [chunk[k] for k in positions]
                with talking(self.url, "done"):
                    self._channel.send("FINISH", self._shards[shard].meta, args, self._acks.on_reply("done", sent))
                self._leases.forget(sent)
        self._leases.forget(lost)
        return lost

    def retry(self, request: Request, *, delay: float = 0.0) -> None:
        """Give a leased request back, ready after ``delay`` seconds, with ``attempts`` one higher.

        One script: the lease ends and the request is pending again, stored as it is now.
        """
        seconds = _seconds("delay", delay)
        attempts = min(request.attempts + 1, MAX_ATTEMPTS)
        self._one("retry", request, seconds, pack_body(request, encode(request), attempts, 0.0))
        request.attempts = attempts
        request.not_before = time.time() + seconds if seconds else None

    def fail(self, request: Request, error: str) -> None:
        """Finish a leased request as failed, with ``error`` (its text kept, up to 4,000 bytes) and
        the time: it is not handed out again until ``requeue_failed``. Counted in its host's done."""
        if not isinstance(error, str):
            raise TypeError(f"fail(): error must be a str, got {type(error).__name__}")
        text = error.encode("utf-8", "replace")[:MAX_ERROR].decode("utf-8", "ignore").encode()
        self._one("fail", request, 0.0, struct.pack(">d", time.time()) + text)

    def failed(self) -> list[FailedRequest]:
        """Every failed request of the crawl (not requeued), oldest failure first."""
        self._check_open()
        return self._reader.failed()

    def requeue_failed(self, limit: int | None = None) -> int:
        """Put failed requests back as pending (attempts 0), oldest failure first; returns how many."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"requeue_failed(): limit must be None or a whole number of at least 1, got {limit!r}")
        self._check_open()
        if len(self._shards) == 1:
            return int(self._run("requeue_failed", "REQUEUE_FAILED", [limit or 0]))
        if limit is None:
            return sum(int(self._run("requeue_failed", "REQUEUE_FAILED", [0], shard))
                       for shard in range(len(self._shards)))
        oldest = sorted((entry.failed_at, shard) for shard, reader in enumerate(self._readers)
                        for entry in reader.failed())[:limit]
        share = collections.Counter(shard for _at, shard in oldest)  # how many of the oldest each shard has
        return sum(int(self._run("requeue_failed", "REQUEUE_FAILED", [n], shard)) for shard, n in share.items())

    def record_failed(self, failed: Iterable[FailedRequest]) -> int:
        """Store requests as failed, each with its error text, ``failed_at`` time and ``request.attempts``
        as given (for a crawl copied in from elsewhere); returns how many. As ``fail`` leaves them:
        ``failed()`` lists them, each counts as done for its host, and its fingerprint is marked seen
        (no dedupe: each is stored even if it was seen)."""
        by_shard: dict[int, list[Any]] = {}
        for entry in failed:
            if not isinstance(entry, FailedRequest):
                raise TypeError(f"record_failed() takes FailedRequest objects, got {type(entry).__name__}")
            if not isinstance(entry.error, str):
                raise TypeError(f"record_failed(): error must be a str, got {type(entry.error).__name__}")
            request = entry.request
            at = _time("record_failed(): failed_at", entry.failed_at)
            key, field = ("", b"") if request.dont_filter else self._seen_keys.of(request.fingerprint)
            text = entry.error.encode("utf-8", "replace")[:MAX_ERROR].decode("utf-8", "ignore").encode()
            by_shard.setdefault(self._router.of_slot(request.slot), []).extend(
                [key, field, pack_body(request, encode(request), _attempts(request.attempts), 0.0),
                 struct.pack(">d", at) + text])
        self._check_open()
        stored = 0
        step = BATCH * 4
        for shard, args in by_shard.items():
            for at in range(0, len(args), step):
                chunk = args[at:at + step]
                stored += int(self._run("record_failed", "RECORD_FAILED", [len(chunk) // 4, *chunk], shard))
        return stored

    def shard_of(self, request: Request) -> int:
        """The shard (0 to ``shards - 1``) that holds ``request``: the one its slot (its host) hashes to."""
        return self._router.of_slot(request.slot)

    def holds(self, request: Request) -> bool:
        """True if ``request`` is leased to this client (what ``done`` would take)."""
        return self._leases.holds(request)

    def extend(self, request: Request, seconds: float | None = None) -> None:
        """Renew the lease of ``request``: it runs out ``seconds`` (default: ``lease``) from now."""
        renew = self.lease if seconds is None else _seconds("seconds", seconds)
        self._one("extend", request, renew, None)

    def extend_many(self, requests: Iterable[Request], seconds: float | None = None) -> list[Request]:
        """``extend`` for many requests in one script call; returns those whose leases were already lost."""
        renew = self.lease if seconds is None else _seconds("seconds", seconds)
        lost = self._leases.finish_many("extend", list(requests), renew)
        self._leases.forget(lost)  # unlike a single extend(), which leaves it to the done() that follows
        return lost

    # ------------------------------------------------------------------ reading the whole crawl
    def pending_requests(self, *, leased: bool = True) -> Iterator[Request]:
        """Every request of the crawl not done, in no particular order (``leased=False``: not those
        leased to a client now). Reads with HSCAN: safe beside running clients, though a request
        moved meanwhile may be seen twice or not at all."""
        self._check_open()
        return self._reader.pending_requests(leased=leased)

    def seen_fingerprints(self) -> Iterator[bytes]:
        """Every fingerprint in the crawl's seen set (SCAN over its buckets, then HSCAN of each)."""
        self._check_open()
        return self._reader.seen_fingerprints()

    # ------------------------------------------------------------------ state
    def _look(self) -> tuple[int, int, int, float | None, float, bool]:
        self._check_open()
        looks = [self._run("look", "LOOK", [], shard) for shard in range(len(self._shards))]
        now = float(looks[0][4])
        waits = [float(look[3]) - float(look[4]) for look in looks if look[3]]
        return (sum(int(look[0]) for look in looks), sum(int(look[1]) for look in looks),
                sum(int(look[2]) for look in looks), now + min(waits) if waits else None, now,
                any(bool(look[5]) for look in looks))

    def __len__(self) -> int:
        """Requests pending in the crawl (not counting those leased to any client)."""
        self._check_open()
        return self._reader.pending()

    @property
    def finished(self) -> bool:
        """True when nothing is pending and nothing is leased, by any client."""
        pending, inflight, _, _, _, _ = self._look()
        return pending == 0 and inflight == 0

    def next_ready(self) -> float | None:
        """When the next pending request may be handed out (``time.time()`` terms; now if one
        may be now), or None if none can become ready by waiting alone. A lease running out is such
        a time: its request is pending again then (a job directory has no leases, and says None).
        While the crawl is paused, a quarter second from now at the soonest: a ``resume`` by any client
        is not signalled, so a caller waiting on this looks again then."""
        pending, _, ready, event, now, paused = self._look()
        local = time.time()
        when: float | None
        if ready:
            when = local
        elif pending == 0 and event is None:
            return None
        else:
            when = None if event is None else local + max(0.0, event - now)
        if when is not None and paused:
            when = max(when, local + _POLL_MAX)
        return when

    @property
    def in_flight(self) -> list[Request]:
        """The requests this client holds leases on."""
        return self._leases.requests()

    def stats(self) -> dict[str, Any]:
        """The crawl's counters (all clients) and this client's own: ``leased_here`` (its leases, those
        ``prefetched`` and not handed out yet included), ``acks_lost`` (pipelined dones whose leases had run
        out) and ``acks_failed`` (pipelined dones answered with an error, or whose replies a lost connection
        took: they come back when their leases run out). The replies of pipelined dones are read first."""
        self._check_open()
        crawl = self._reader.stats()
        head = ("pending", "in_flight")
        tail = ("done", "seen", "pushed", "duplicates", "retried", "refetch_scheduled", "reclaimed", "failed",
                "dropped", "delayed", "hosts", "ready_hosts", "paused_since")
        return {
            "backend": "redis", "crawl": self.crawl, **{name: crawl[name] for name in head},
            "leased_here": len(self._leases), "prefetched": self._leases.stashed, "acks_lost": self._acks.lost,
            "acks_failed": self._acks.failed, **{name: crawl[name] for name in tail},
            "order": self.order, "delay": crawl["delay"], "per_host": crawl["per_host"], "prefer": crawl["prefer"],
            "lease": self.lease, "dedupe": self.dedupe, **self._seen_stats(), "shards": len(self._shards),
        }

    # ------------------------------------------------------------------ hosts
    def _set_host(self, host: str, field: str, value: str) -> None:
        self._check_open()
        self._run("host setting", "SET_HOST", [host, field, value], self._router.of_slot(host))

    def set_delay(self, host: str, seconds: float | None) -> None:
        """Wait at least ``seconds`` between hand-outs of ``host`` by any client (None: the crawl's delay)."""
        name = _host(host)
        self._set_host(name, "dl", "" if seconds is None else repr(_seconds("seconds", seconds)))

    def block(self, host: str, until: float) -> None:
        """Hand out nothing of ``host`` before ``until`` (``time.time()``; ``math.inf``: until ``unblock``)."""
        name = _host(host)
        value = FOREVER if until == math.inf else _time("block(): until", until)
        self._set_host(name, "b", repr(value))

    def unblock(self, host: str) -> None:
        """Undo ``block``."""
        self._set_host(_host(host), "b", "")

    def set_budget(self, host: str, budget: int | None) -> None:
        """At most ``budget`` requests of ``host`` done or leased, ever (None: no limit; at most
        2**53 - 1, the largest whole number the scripts' numbers hold exactly)."""
        name = _host(host)
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or not 0 <= budget < 2**53):
            raise ValueError(f"set_budget(): budget must be None or a whole number from 0 to 2**53 - 1, got {budget!r}")
        self._set_host(name, "bu", "" if budget is None else str(budget))

    def set_done_count(self, host: str, done: int) -> None:
        """Set the done count of ``host`` (for a crawl copied in from elsewhere)."""
        name = _host(host)
        if isinstance(done, bool) or not isinstance(done, int) or not 0 <= done < 2**53:
            raise ValueError(f"set_done_count(): done must be a whole number from 0 to 2**53 - 1, got {done!r}")
        self._check_open()
        self._run("set_done_count", "SET_DONE", [name, done], self._router.of_slot(name))

    def host_failed(self, host: str, *, block_after: int = 5, backoff: float = 60.0,
                    backoff_max: float = 3600.0) -> float | None:
        """Count one more consecutive failure of ``host`` (its hash's field ``f``), and from
        ``block_after`` on block it for ``backoff`` seconds doubled for each failure past
        ``block_after``, at most ``backoff_max``, in one script call. A ``done`` of any of its
        requests ends the streak. Returns the time it is blocked until (the server's clock), or None."""
        name = _host(host)
        block_after, backoff, backoff_max = check_host_failed(block_after, backoff, backoff_max)
        self._check_open()
        _, until = self._run("host_failed", "HOST_FAILED", [name, block_after, repr(backoff), repr(backoff_max)],
                             self._router.of_slot(name))
        if not until:
            return None
        value = float(until)
        return math.inf if value >= FOREVER else value

    @property
    def _robots_key(self) -> str:
        return self._shards[0].prefix + "robots"  # one hash for the crawl, on shard 0 (no step needs it with a host)

    def robots(self, host: str) -> RobotsEntry | None:
        """The robots.txt kept for ``host`` (the crawl's ``robots`` hash); None if none is kept."""
        name = _host(host)
        self._check_open()
        with talking(self.url, "robots"):
            raw = self._redis.hget(self._robots_key, name)
        if raw is None:
            return None
        try:
            status, fetched_at, body = msgpack.unpackb(raw, raw=False, max_bin_len=MAX_ROBOTS)
            return check_robots(RobotsEntry(status, body, fetched_at))
        except Exception:  # msgpack and the checks raise several types: a value diskfrontier did not write
            raise self._values.bad(f"{self._robots_key} field {name}",
                                   "is not a robots.txt entry diskfrontier stored") from None

    def set_robots(self, host: str, entry: RobotsEntry) -> None:
        """Keep ``entry`` as the robots.txt of ``host``, for every client (the crawl's ``robots`` hash)."""
        name = _host(host)
        checked = check_robots(entry)
        self._check_open()
        value = msgpack.packb([checked.status, checked.fetched_at, checked.body], use_bin_type=True)
        with talking(self.url, "set_robots"):
            self._redis.hset(self._robots_key, name, value)

    def hosts(self) -> list[HostInfo]:
        """Every host of the crawl: pending, leased and done counts, delay, ready time, block and budget."""
        self._check_open()
        return self._reader.hosts()

    def host(self, name: str) -> HostInfo | None:
        """One host as ``hosts()`` tells of it (one round trip); None if the crawl has nothing of it."""
        name = _host(name)
        self._check_open()
        return self._reader.host(name)

    # ------------------------------------------------------------------ steering: pause and drop
    def pause(self) -> None:
        """Hand out nothing until ``resume()``: ``pop`` returns None (waiting out its timeout).

        A pause is stored with the crawl (the ``meta`` field ``paused``): every client sees it at its
        next pop, and it holds across restarts until ``resume``. Requests in flight (leased) are not
        affected: they are finished, given back and taken back as ever. Pausing a paused crawl keeps
        the time of the first pause."""
        self._check_open()
        for shard in range(len(self._shards)):
            self._run("pause", "SET_PAUSE", ["1"], shard)

    def resume(self) -> None:
        """End a pause (nothing happens if the crawl is not paused); every client hands out again."""
        self._check_open()
        for shard in range(len(self._shards)):
            self._run("resume", "SET_PAUSE", ["0"], shard)

    @property
    def paused_since(self) -> float | None:
        """When the crawl was paused (``time.time()`` terms, the Redis server's clock); None if it is not paused."""
        self._check_open()
        return self._reader.paused_since()

    def drop(self, *, host: str | None = None, match: str | None = None, dry_run: bool = False,
             show: int = 0) -> Dropped:
        """Remove the pending requests of ``host`` (its slot, exactly) or whose URL ``match`` (a regular
        expression, ``re.search``) finds; exactly one of the two.

        Pending requests are those ready in their host's queue and those waiting for a time
        (``not_before``, a retry's delay, a re-fetch). Dropped requests are never handed out and
        their fingerprints stay seen (a push of the same URL is a duplicate); they are counted in
        ``stats()['dropped']``. Requests in flight (leased by any client) or failed are left alone.
        ``dry_run``: count them, change nothing. ``show``: also return up to that many of their URLs.

        The work goes in steps of ``DROP_BATCH`` requests, each one script: a host's requests waiting
        for a time (read with ZSCAN) and then those of its queue; for ``match``, the stored requests
        are read with HSCAN, matched here, and each step drops those of a batch still pending then
        (not leased meanwhile). Clients may pop and push meanwhile: a request pushed during a drop may
        or may not be dropped, and one leased before its step is left alone.
        """
        pattern = check_drop(host, match, show)
        if not isinstance(dry_run, bool):
            raise ValueError(f"dry_run must be True or False, got {dry_run!r}")
        self._check_open()
        if pattern is None:
            assert host is not None
            return self._drop_host(host, dry_run, show)
        return self._drop_matching(pattern, dry_run, show)

    def _drop_host(self, host: str, dry_run: bool, show: int) -> Dropped:
        # what waits for a time first: a request released meanwhile into the queue is dropped from there
        count = 0
        shard = self._router.of_slot(host)
        urls: dict[str, list[str]] = {"d": [], "q": []}
        for phase in ("d", "q"):
            cursor = "0"
            while True:
                answer = self._run("drop", "DROP_HOST", [host, phase, cursor, DROP_BATCH, "1" if dry_run else "0",
                                                         max(0, show - len(urls[phase]))], shard)
                count += int(answer[0])
                shown = answer[2:]
                for at in range(0, len(shown), 2):
                    urls[phase].append(self._readers[shard].body("req", shown[at], shown[at + 1]).url)
                cursor = answer[1].decode()
                if cursor == "0":
                    break
        return Dropped(count, (urls["q"] + urls["d"])[:show])

    def _drop_matching(self, pattern: re.Pattern[str], dry_run: bool, show: int) -> Dropped:
        count = 0
        urls: list[str] = []
        counted: set[tuple[int, bytes]] = set()  # HSCAN may return an id twice
        batch: list[tuple[bytes, str]] = []
        at_shard = 0

        def flush(shard: int) -> None:
            nonlocal count
            answer = self._run("drop", "DROP_IDS", ["1" if dry_run else "0", *(rid for rid, _ in batch)], shard)
            for (rid, url), hit in zip(batch, answer, strict=True):
                if hit and (shard, rid) not in counted:
                    counted.add((shard, rid))
                    count += 1
                    if len(urls) < show:
                        urls.append(url)
            batch.clear()

        for shard in range(len(self._shards)):
            flush(shard)  # no ids: the shard's checks, before the scan (a crawl that is gone is named, not scanned)
        for shard, rid, request in self._reader.stored_requests(DROP_BATCH):
            if shard != at_shard and batch:
                flush(at_shard)
            at_shard = shard
            if (shard, rid) not in counted and pattern.search(request.url):
                batch.append((rid, request.url))
                if len(batch) >= DROP_BATCH:
                    flush(shard)
        if batch:
            flush(at_shard)
        return Dropped(count, urls)

    def drop_crawl(self) -> int:
        """Delete every key of the crawl (its requests, leases, seen set and hosts) and close;
        returns how many keys were deleted. Other clients of the crawl get errors from then on.
        The ``meta`` key goes last (SCAN and UNLINK in batches, never KEYS): a deletion stopped
        half-way leaves a crawl that is still there to be deleted again."""
        self._check_open()
        if self._renewal is not None:
            self._renewal.stop()  # its next beat would write this client's entry again
        deleted = self._reader.delete_keys()
        self._leases.clear()
        self.close()
        return deleted

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        """Give back this client's leased requests (pending again at once) and disconnect."""
        if self._closed:
            return
        if os.getpid() != self._pid:
            self._closed = True
            return
        if self._renewal is not None:
            self._renewal.stop()
        held = self._leases.closing(_CLOSE_WAIT)  # what a pop under way in another thread leases is given back too
        try:
            self._leases.finish_many("release", held, 0.0)
            self._leases.leave()
        except FrontierError as exc:
            log.warning("close(): %d leased requests of crawl %r could not be given back (%s); they come back "
                        "when their leases run out", len(self._leases), self.crawl, exc)
        finally:
            self._closed = True
            if self._channel is not None:
                self._channel.close()
            self._redis.close()


def _merged_state(states: list[_State | None]) -> _State:
    """The view of the whole crawl from the states of every shard's short pop (times in shard 0's clock)."""
    known = [state for state in states if state is not None]
    now = known[0][1]
    waits = [state[0] - state[1] for state in known if state[0] is not None]
    return (now + min(waits) if waits else None, now, sum(state[2] for state in known),
            sum(state[3] for state in known), any(state[4] for state in known))


__all__ = ["LeaseExpired", "NotReplicated", "RedisFrontier", "RedisMisconfigured"]
