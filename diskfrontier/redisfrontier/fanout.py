"""``Fanout``: the steps that take a crawl of several shards as one (with one shard, the same steps, direct).

A pop reads the best ready request of every shard in one round trip (``peek``; a shard with a lease run
out, or a request or host due by this client's clock, is brought up to date by one ``LOOK`` first), then
pops from the shard whose request comes first in the crawl's order (priority; with ``prefer="idle"``, the
host's leases first), then, if that shard had fewer than asked ready, from the next, and so on: it comes
back short only when every shard had fewer. Among shards whose best requests are equal, the client's
rotation decides (``Router.order``), and it starts one shard further at each pop: a shard holding a request
as good as any other shard's best is served at least once in every N consecutive pops of a client. A push
or done by another client between the read and the pop may change what is best; within one shard the order
is the crawl's (LIFO or FIFO within a priority), between shards of equal priority it is the rotation's. The
state of the shards that came back short is merged into the crawl's (the next event, pending and in flight
summed, paused if any is); the crawl's state for ``finished`` and ``next_ready`` is every shard's ``LOOK``
merged the same way. A fingerprint without a request has no host to place it by: ``mark_seen`` marks it on
every shard, and ``has_seen`` asks every shard. ``requeue_failed`` with a limit takes the oldest failures
across the shards.
"""

from __future__ import annotations

import collections
import time
from typing import Any, NamedTuple

from ..request.model import Request
from .connection import talking
from .deferred import pop_args
from .guard import Guard
from .leases import Leases
from .reading import CrawlReader
from .settings import BATCH
from .shards import Router
from .transport import Transport


class State(NamedTuple):
    """What a pop that came back short saw (times in shard 0's clock)."""

    event: float | None  # when something held back by time is next due
    now: float
    pending: int
    in_flight: int
    paused: bool


class Look(NamedTuple):
    """The crawl's state after every shard was brought up to date (``LOOK``; times in shard 0's clock)."""

    pending: int
    in_flight: int
    ready: int  # requests ready now (each shard's count, summed)
    event: float | None
    now: float
    paused: bool


class Fanout:
    """The steps of one client over every shard of a crawl: ``transport`` runs them, ``readers[i]`` reads shard i,
    ``router`` orders the shards of a pop, ``leases`` holds what this client leased for ``lease`` seconds."""

    def __init__(self, transport: Transport, readers: list[CrawlReader], router: Router, leases: Leases,
                 lease: float, guard: Guard) -> None:
        self.transport, self.readers, self.router, self.leases = transport, readers, router, leases
        self.lease_seconds, self.guard = lease, guard
        self.count = len(readers)
        self.shards_looked_at: tuple[int, ...] = ()  # the shards the last pop looked at, in that order
        self.state: State | None = None  # what the last pop that came back short saw

    # ------------------------------------------------------------------ popping
    def pop_many(self, count: int) -> list[Request]:
        """Up to ``count`` requests: those leased ahead first, then leased now."""
        ahead = self.leases.hand_out(count) if self.leases.stashed else []
        if len(ahead) == count:
            return ahead
        return ahead + self.lease(count - len(ahead), count - len(ahead))

    def pop_one(self, prefetch: int) -> list[Request]:
        """One request leased ahead, or else up to ``prefetch`` leased now and all but the first kept for the next
        pops; an empty list if none is ready."""
        if prefetch == 1:
            return self.pop_many(1)
        return self.leases.hand_out(1) or self.lease(prefetch, 1)

    def lease(self, count: int, hand: int) -> list[Request]:
        """Lease up to ``count`` ready requests; the first ``hand`` are returned, the rest kept for later pops."""
        self.guard.check(drain=self.count > 1)
        leases = self.leases
        if not leases.begin_pop():
            raise self.guard.closed_error("is being closed")
        try:
            leases.touch()
            if self.count == 1:
                self.shards_looked_at = (0,)
                out, self.state = self._pop_shard(0, count)
                leases.stash(out[hand:])
                return out[:hand]
            out, states, looked = [], [], []
            for shard in self.router.order(self.peek()):
                looked.append(shard)
                got, state = self._pop_shard(shard, count - len(out))
                out += got
                if len(out) == count:
                    break
                states.append(state)
            self.shards_looked_at = tuple(looked)
            self.state = None if len(out) == count else merged_state(states)
            leases.stash(out[hand:])
            return out[:hand]
        finally:
            leases.end_pop()

    def peek(self) -> list[float | None]:
        """The score of the best ready request of each shard (None: nothing ready), in one round trip; a
        shard where something is due (a lease, a request or host waiting for a time) is brought up to
        date by a ``LOOK`` and read again first."""
        now = time.time()
        due: list[int] = []
        transport = self.transport
        with talking(transport.url, "pop"):
            pipe = transport.redis.pipeline(transaction=False)
            for shard in transport.shards:
                for key in ("ready", "delayed", "wait", "lease"):
                    pipe.zrange(shard.prefix + key, 0, 0, withscores=True)
            answers = pipe.execute()
        heads: list[float | None] = []
        for index in range(self.count):
            ready, *timed = answers[4 * index:4 * index + 4]
            heads.append(float(ready[0][1]) if ready else None)
            if any(first and first[0][1] <= now for first in timed):
                due.append(index)
        for index in due:
            transport.run("pop", "LOOK", [], index)
        if due:
            with talking(transport.url, "pop"):
                pipe = transport.redis.pipeline(transaction=False)
                for index in due:
                    pipe.zrange(transport.shards[index].prefix + "ready", 0, 0, withscores=True)
                for index, ready in zip(due, pipe.execute(), strict=True):
                    heads[index] = float(ready[0][1]) if ready else None
        return heads

    def _pop_shard(self, shard: int, count: int) -> tuple[list[Request], State | None]:
        """One POP of up to ``count`` requests on ``shard``, which applies the dones of ``shard`` not sent yet
        first: the requests, and its state if it came back short."""
        args: list[Any] = [count, repr(self.lease_seconds), self.leases.client_id]
        deferred = self.transport.deferred
        acks = deferred.take(shard) if deferred is not None else []
        if acks:
            args += pop_args(acks)
        try:
            answer = self.transport.run("pop", "POP", args, shard)
        except BaseException:
            if deferred is not None:
                deferred.settle(acks, None)
            raise
        got = int(answer[0])
        if deferred is not None:
            deferred.settle(acks, answer[2 + 4 * got:])
        state: State | None = None
        if got < count:
            event, now, pending, inflight, paused = answer[1].decode().split(" ")
            state = State(float(event) if event else None, float(now), int(pending), int(inflight), paused == "1")
        out = []
        reader = self.readers[shard]
        for k in range(got):
            rid, body, token, _expiry = answer[2 + 4 * k: 6 + 4 * k]
            out.append(self.leases.add(reader.body("req", rid, body), rid, token, shard))
        return out, state

    # ------------------------------------------------------------------ the crawl's state
    def look(self) -> Look:
        """Every shard brought up to date (leases run out taken back, what is due released), its state merged."""
        looks = self.transport.run_everywhere("look", "LOOK", [])
        now = float(looks[0][4])
        waits = [float(look[3]) - float(look[4]) for look in looks if look[3]]
        return Look(sum(int(look[0]) for look in looks), sum(int(look[1]) for look in looks),
                    sum(int(look[2]) for look in looks), now + min(waits) if waits else None, now,
                    any(bool(look[5]) for look in looks))

    # ------------------------------------------------------------------ the seen set
    def has_seen(self, pair: list[Any]) -> bool:
        """True if any shard has the fingerprint whose two seen values are ``pair`` (its host is not known)."""
        return any(self.transport.run("has_seen", "HAS_SEEN", pair, shard)[0] for shard in range(self.count))

    def mark_seen(self, args: list[Any]) -> int:
        """Mark fingerprints seen (two seen values each in ``args``), ``BATCH`` a script call; how many were new."""
        fresh = 0
        for at in range(0, len(args), BATCH * 2):
            chunk = args[at:at + BATCH * 2]
            if self.count == 1:
                fresh += self.transport.run("mark_seen", "MARK_SEEN", [len(chunk) // 2, *chunk])
            else:
                fresh += self._mark_on_every_shard(chunk)
        return fresh

    def _mark_on_every_shard(self, chunk: list[Any]) -> int:
        transport = self.transport
        pairs = [(chunk[k], chunk[k + 1]) for k in range(0, len(chunk), 2)]
        found = transport.run_everywhere("mark_seen", "HAS_SEEN", chunk)  # one list per shard
        new = [pair for k, pair in enumerate(pairs) if not any(answer[k] for answer in found)]
        known = [pair for k, pair in enumerate(pairs) if any(answer[k] for answer in found)]
        fresh = 0
        for shard in range(self.count):
            for group in (new, known):
                if not group:
                    continue
                marked = int(transport.run("mark_seen", "MARK_SEEN",
                                           [len(group), *(x for pair in group for x in pair)], shard))
                if shard == 0 and group is new:
                    fresh = marked
                elif marked:  # a copy of a fingerprint another shard holds
                    with talking(transport.url, "mark_seen"):
                        transport.redis.hincrby(transport.shards[shard].meta, "seen_copies", marked)
        return fresh

    # ------------------------------------------------------------------ failed requests
    def requeue_failed(self, limit: int | None) -> int:
        """Failed requests pending again, oldest failure first, at most ``limit`` (None: all); how many."""
        run = self.transport.run
        if self.count == 1:
            return int(run("requeue_failed", "REQUEUE_FAILED", [limit or 0]))
        if limit is None:
            return sum(int(answer) for answer in self.transport.run_everywhere("requeue_failed", "REQUEUE_FAILED",
                                                                               [0]))
        oldest = sorted((entry.failed_at, shard) for shard, reader in enumerate(self.readers)
                        for entry in reader.failed())[:limit]
        share = collections.Counter(shard for _at, shard in oldest)  # how many of the oldest each shard has
        return sum(int(run("requeue_failed", "REQUEUE_FAILED", [n], shard)) for shard, n in share.items())


def merged_state(states: list[State | None]) -> State:
    """The view of the whole crawl from the states of every shard's short pop (times in shard 0's clock)."""
    known = [state for state in states if state is not None]
    now = known[0].now
    waits = [state.event - state.now for state in known if state.event is not None]
    return State(now + min(waits) if waits else None, now, sum(state.pending for state in known),
                 sum(state.in_flight for state in known), any(state.paused for state in known))
