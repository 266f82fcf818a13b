"""``Finishing``: the ends of leases (``done``, a re-fetch, ``retry``, ``fail``, the close's release), their
renewals (``extend`` and the background ``Renewal``'s beat) and the outcome counters, each one call of the
``finish`` function for up to ``BATCH`` requests.

A call sent again after a lost connection may find a lease gone that its first sending ended: then the
request is not reported as lost (it was finished, or its lease ran out and it is pending again: either way
nothing is lost), only logged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from ..contract.checks import MAX_ATTEMPTS, cap_error
from ..contract.outcomes import Outcome, tally
from ..redisfrontier.connection import LeaseExpired
from ..request.model import Request
from ..request.revisit import revisit_counters
from .records import encode
from .state import BATCH, Shared

log = logging.getLogger("diskfrontier")

_FINISH = ("SELECT finish(%b, %b::bigint[], %b::bigint[], %b::float8, %b::bytea[], %b::integer[], %b::text[], "
           "%b::text[], %b)")


class Finishing:
    """The ends and renewals of one client's leases."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def flush(self) -> None:
        """Send the dones waiting (``ack="deferred"``) in one call, and settle them."""
        shared = self.shared
        with shared.dones.sending:  # a step of another thread sending dones: this one waits for their answer
            dones = shared.dones.take()
            if not dones:
                return
            ids, nos = [row_id for _, row_id, _ in dones], [lease_no for _, _, lease_no in dones]
            try:
                answer = shared.db.value("done", _FINISH, ["done", ids, nos, 0.0, None, None, None, None,
                                                           shared.fifo])
            except BaseException as exc:
                shared.dones.settle(dones, None, error=str(exc) or type(exc).__name__)
                raise
            shared.dones.settle(dones, answer, resent=shared.db.retried)

    def finish(self, what: str, requests: list[Request], seconds: float = 0.0, *, call: str | None = None,
               errors: list[str] | None = None) -> list[Request]:
        """End (or with "extend", renew) the leases of ``requests``, all checked first (``NotInFlight``); those
        whose leases were lost. The dones waiting are sent first."""
        shared = self.shared
        shared.check()
        self.flush()
        taken = shared.leases.take(requests, call or what)
        lost: list[Request] = []
        for start in range(0, len(requests), BATCH):
            part = requests[start:start + BATCH]
            ids = [row_id for row_id, _ in taken[start:start + BATCH]]
            nos = [lease_no for _, lease_no in taken[start:start + BATCH]]
            records, attempts, counters = self._bodies(what, part)
            errs = None if errors is None else errors[start:start + BATCH]
            answer = shared.db.value(call or what, _FINISH, [what, ids, nos, seconds, records, attempts, errs,
                                                             counters, shared.fifo])
            resent = shared.db.retried
            for request, ok in zip(part, answer, strict=True):
                if not ok:
                    if resent:
                        log.info("%s(): the lease of %r was gone when the call was sent again after a lost "
                                 "connection (its first sending ended it, or it ran out)", what, request)
                    else:
                        lost.append(request)
            if what != "extend":
                shared.leases.forget(part)
        if what not in ("extend", "release"):  # a done or a failure frees a host only under a per-host limit
            shared.signal(frees=what not in ("done", "refetch", "fail") or shared.per_host > 0)
        return lost

    def _bodies(self, what: str, requests: list[Request]) -> tuple[Any, Any, Any]:
        """The records, attempts and counters the ``finish`` function takes for ``what``."""
        if what == "retry":
            attempts = [min(request.attempts + 1, MAX_ATTEMPTS) for request in requests]
            return [encode(request) for request in requests], attempts, None
        if what == "refetch":
            counters = [",".join(revisit_counters(request.revisit)) if request.revisit is not None else ""
                        for request in requests]
            return [encode(request) for request in requests], None, counters
        return None, None, None

    def done(self, request: Request, refetch_after: float | None) -> None:
        shared = self.shared
        if refetch_after is None and shared.deferred:
            shared.check()
            [(row_id, lease_no)] = shared.leases.take([request], "done")
            shared.leases.forget([request])
            shared.dones.add(request, row_id, lease_no)
            shared.signal(frees=shared.per_host > 0)  # a pop waiting in another thread carries it
            return
        self.flush()
        kind = "done" if refetch_after is None else "refetch"
        if self.finish(kind, [request], refetch_after or 0.0, call="done"):
            raise LeaseExpired(f"done() of {request!r}: its lease ran out and it was taken back (another client "
                               f"may be working on it); nothing was changed")

    def done_many(self, requests: list[Request]) -> None:
        lost = self.finish("done", requests, call="done_many")
        if lost:
            raise LeaseExpired(f"done_many(): the leases of {len(lost)} requests ran out and they were taken back "
                               f"(the others are done): {', '.join(r.url for r in lost[:5])}")

    def retry(self, request: Request, delay: float) -> None:
        if self.finish("retry", [request], delay):
            raise LeaseExpired(f"retry() of {request!r}: its lease ran out and it was taken back; nothing was "
                               f"changed")
        request.attempts = min(request.attempts + 1, MAX_ATTEMPTS)

    def fail(self, request: Request, error: str) -> None:
        if self.finish("fail", [request], errors=[cap_error(error).decode("utf-8")]):
            raise LeaseExpired(f"fail() of {request!r}: its lease ran out and it was taken back; nothing was "
                               f"changed")

    def extend(self, requests: list[Request], seconds: float | None) -> list[Request]:
        return self.finish("extend", requests, self.shared.lease if seconds is None else seconds)

    def renew_all(self) -> None:
        """Renew every lease held and say the client is there (``beat``), in one call."""
        shared = self.shared
        shared.check()
        self.flush()
        ids, nos = shared.leases.pairs()
        info = json.dumps({**shared.leases.info, "lease": shared.lease, "beat": shared.lease / 3})
        shared.db.value("renew", "SELECT beat(%s, %s::jsonb, %s::bigint[], %s::bigint[], %s::float8)",
                        [shared.leases.client_id, info, ids, nos, shared.lease])

    def leave(self) -> None:
        """Remove this client from the crawl's clients (a clean close)."""
        self.shared.db.value("close", "DELETE FROM clients WHERE id = %s RETURNING 1", [self.shared.leases.client_id],
                             retry=False)

    def record_outcome(self, outcomes: Iterable[Outcome]) -> None:
        counts = tally(outcomes)
        self.shared.check()
        if counts:
            self.shared.db.value("record_outcome", "SELECT bump(%s::text[], %s::float8[])",
                                 [list(counts), [float(v) for v in counts.values()]])
