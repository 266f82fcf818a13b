"""``Finishing``: the end or renewal of a leased request: ``done``, a re-fetch, ``retry``, ``fail`` and
``extend``, each a ``FINISH`` of the lease tokens this client holds (``leases.py``), on the shard that leased
it. A lease found lost (it ran out and was taken back) changes nothing and raises ``LeaseExpired``.

With ``ack="deferred"`` (the default) and a renewal thread, ``done`` hands its request in to ``DeferredAcks``
and returns: the client's next step sends it (``deferred.py``). With ``ack="pipelined"``, ``done`` and
``done_many`` send their ``FINISH`` on the client's own connection and return once the kernel has transmitted
it, without its reply (``pipelined.py``). Either way a lease found lost is only known when a later call reads
the reply, and is logged and counted (``AckTally``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..contract.checks import MAX_ATTEMPTS
from ..contract.outcomes import Outcome, tally
from ..request.model import Request
from ..request.revisit import revisit_counters
from .connection import LeaseExpired, talking
from .deferred import DeferredAcks
from .guard import Guard
from .leases import Leases
from .pipelined import AckTally
from .records import encode, pack_body
from .settings import BATCH
from .transport import Transport
from .writes import failure

_FLAGS = {"revisits": "r", "revisit_changes": "c", "revisit_not_modified": "n"}  # FINISH's refetch+FLAGS


def expired(what: str, request: Request) -> LeaseExpired:
    """The error of ``what`` of ``request`` whose lease ran out."""
    return LeaseExpired(f"{what}() of {request!r}: its lease ran out and it was taken back (another client may hold "
                        f"it now); nothing was changed. Renew long work with extend()")


class Finishing:
    """The ends and renewals of the leases that ``leases`` holds, for leases of ``lease`` seconds. ``deferred``:
    where a ``done`` leaves its request for the next step, while ``renewing()`` says the renewal thread runs
    (without it nothing would send a done no step follows)."""

    def __init__(self, leases: Leases, transport: Transport, guard: Guard, acks: AckTally, lease: float,
                 deferred: DeferredAcks | None = None, renewing: Callable[[], bool] = lambda: False) -> None:
        self.leases, self.transport, self.guard, self.acks, self.lease = leases, transport, guard, acks, lease
        self.deferred, self.renewing = deferred, renewing

    def _one(self, what: str, request: Request, seconds: float, body: bytes | None) -> None:
        ok = self.leases.finish(what, [request], seconds, None if body is None else [body])
        if not ok[0]:
            raise expired(what, request)

    def done(self, request: Request) -> None:
        """Finish ``request``: never handed out again."""
        deferred = self.deferred
        if deferred is not None and self.renewing():
            self.guard.check(drain=False)
            held = self.leases.hand_in(request)
            if held is None:
                raise expired("done", request)
            deferred.add(held[2], request, held[0], held[1])
            return
        if self.guard.channel is not None:
            if self._send_done([request]):
                raise expired("done", request)
            return
        self._one("done", request, 0.0, None)

    def refetch(self, request: Request, after: float) -> None:
        """Finish ``request`` now and have it pending again ``after`` seconds from now, its attempts from 0; a
        page with a revisit state adds to the crawl's revisit counters in the same step."""
        counted = revisit_counters(request.revisit) if request.revisit is not None else ()
        what = "refetch" + ("+" + "".join(_FLAGS[name] for name in counted) if counted else "")
        self._one(what, request, after, pack_body(request, encode(request), 0, 0.0))
        request.attempts = 0
        request.not_before = time.time() + after if after else None

    def done_many(self, requests: list[Request]) -> None:
        """Finish ``requests``; ``LeaseExpired`` naming those whose leases were lost (the others are done)."""
        if self.guard.channel is not None:
            lost = self._send_done(requests)
        else:
            lost = self.leases.finish_many("done", requests, 0.0)
        if lost:
            raise LeaseExpired(f"done_many(): the leases of {len(lost)} requests ran out and they were taken back "
                               f"(the first: {lost[0]!r}); the others are done")

    def _send_done(self, requests: list[Request]) -> list[Request]:
        """Send the done steps of ``requests`` without waiting for their replies; return those a renewal had
        found lost (not sent, no longer held)."""
        channel = self.guard.channel
        assert channel is not None
        self.guard.check(drain=False)
        lost = [request for request in requests if self.leases.is_lost(request)]
        rest = [request for request in requests if not self.leases.is_lost(request)] if lost else requests
        for at in range(0, len(rest), BATCH):
            chunk = rest[at:at + BATCH]
            for shard, positions, args in self.leases.finish_args("done", chunk, 0.0):
                sent = [chunk[k] for k in positions]
                with talking(self.transport.url, "done"):
                    channel.send("FINISH", self.transport.shards[shard].meta, args, self.acks.on_reply("done", sent))
                self.leases.forget(sent)
        self.leases.forget(lost)
        return lost

    def retry(self, request: Request, seconds: float) -> None:
        """Give ``request`` back, pending after ``seconds``, stored as it is now with ``attempts`` one higher."""
        attempts = min(request.attempts + 1, MAX_ATTEMPTS)
        self._one("retry", request, seconds, pack_body(request, encode(request), attempts, 0.0))
        request.attempts = attempts
        request.not_before = time.time() + seconds if seconds else None

    def fail(self, request: Request, error: str) -> None:
        """Finish ``request`` as failed with ``error`` and the time (``failinfo``)."""
        self._one("fail", request, 0.0, failure(time.time(), error))

    def extend(self, request: Request, seconds: float | None) -> None:
        """Renew the lease of ``request`` for ``seconds`` (None: the client's lease) from now."""
        self._one("extend", request, self.lease if seconds is None else seconds, None)

    def extend_many(self, requests: list[Request], seconds: float | None) -> list[Request]:
        """``extend`` for many; those whose leases were already lost (no longer held)."""
        lost = self.leases.finish_many("extend", requests, self.lease if seconds is None else seconds)
        self.leases.forget(lost)  # unlike a single extend(), which leaves it to the done() that follows
        return lost

    def record_outcome(self, outcomes: tuple[Outcome, ...]) -> None:
        """Add what ``outcomes`` count (``contract.outcomes.tally``) to the ``meta`` counters of shard 0, in one
        script."""
        counts = tally(outcomes)
        self.guard.check()
        if counts:
            args: list[object] = []
            for key, value in counts.items():
                args += [key, repr(float(value)) if key == "fetch_seconds_sum" else int(value)]
            self.transport.run("record_outcome", "OUTCOMES", args)
