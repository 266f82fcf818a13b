"""``Taking``: pops (one call of the ``pop`` function leases up to ``count`` requests), pops that wait, and
``next_ready``.

Other clients' pushes and dones are not signalled: a waiting pop looks again every few milliseconds, up to a
quarter second apart, and at once when this client pushes, retries or finishes something, or when the time
``next_ready`` said comes.

A pop looks for a host from the client's bound (``Shared.bound``: the key its last pop took; see
``sql/pop.sql``), so that it passes over the dead entries a long transaction keeps in the hosts' order. The
bound is dropped, and one pop looks from the front, every ``REFRESH_EVERY`` seconds (what other clients
changed), when a host held back by time in front of it becomes ready (the pop said when), and when this
client changes something that may put a host in front of it (``Shared.signal``).
"""

from __future__ import annotations

import time

from ..request.model import Request
from .records import decode
from .state import Shared

_POP = "SELECT * FROM pop(%b, %b::integer, %b::float8, %b, %b, %b::integer, %b::bigint, %b::bigint[], %b::bigint[])"
_FIRST_LOOK, _LAST_LOOK = 0.005, 0.25  # seconds between looks of a waiting pop: from, up to
MAINTAIN_EVERY = 0.05  # seconds: how often a client's pops take back leases run out and wake requests due
REFRESH_EVERY = 0.25  # seconds: how often a client's pops look for hosts from the front (others' changes)


class Taking:
    """The pops of one client."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self._maintained = -float("inf")  # time.monotonic() of the last pop that took back and woke requests
        self._recheck: float | None = None  # server time: a host better than the bound is ready again then
        self._refreshed = -float("inf")  # time.monotonic() of the last pop that looked from the front

    def pop_many(self, count: int, *, maintain: bool = False) -> list[Request]:
        """Up to ``count`` ready requests, each leased to this client; ``maintain``: take back leases run out and
        wake requests due first (done anyway if this client's pops did not for ``MAINTAIN_EVERY`` seconds)."""
        shared = self.shared
        now = time.monotonic()
        if maintain or now - self._maintained >= MAINTAIN_EVERY:
            self._maintained, maintain = now, True
        recheck = self._recheck
        bound = shared.bound
        if now - self._refreshed >= REFRESH_EVERY or (recheck is not None and time.time() >= recheck):
            bound = None
        if bound is None:
            self._refreshed = now
        if not shared.leases.begin_pop():
            shared.check()  # closed meanwhile: the close's error
            return []
        # A flush under way in another thread ends first: this pop sees those dones applied (a host row they
        # lock would be passed over). A pop that carries dones holds the lock until they are settled, so that a
        # read in another thread that finds none waiting waits for them to be applied.
        shared.dones.sending.acquire()
        dones = shared.dones.take()
        if not dones:
            shared.dones.sending.release()
        try:
            try:
                rows = shared.db.rows("pop", _POP, [
                    shared.leases.client_id, count, shared.lease, shared.fifo, maintain,
                    *(bound if bound is not None else (None, None)),
                    *(([row_id for _, row_id, _ in dones], [lease_no for _, _, lease_no in dones]) if dones
                      else (None, None))])
            except BaseException as exc:
                shared.dones.settle(dones, None, error=str(exc) or type(exc).__name__)
                raise
            if dones:
                shared.dones.settle(dones, rows[0][12], resent=shared.db.retried)
                rows = rows[1:]
            if rows:
                shared.bound, self._recheck = (rows[-1][9], rows[-1][10]), rows[-1][11]
            out = []
            for row_id, lease_no, host, priority, attempts, dont_filter, fingerprint, not_before, record, *_ in rows:
                request = decode("leases", row_id, host, priority, attempts, dont_filter, fingerprint, not_before,
                                 record)
                out.append(shared.leases.add(request, row_id, lease_no))
            return out
        finally:
            if dones:
                shared.dones.sending.release()
            shared.leases.end_pop()

    def pop(self, timeout: float | None) -> Request | None:
        """``FrontierProtocol.pop``: ``timeout`` checked (None: until one is ready or none can become ready)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        look = _FIRST_LOOK
        waited = False
        while True:
            got = self.pop_many(1, maintain=waited)  # after a wait, what came due meanwhile is woken
            if got:
                return got[0]
            if timeout == 0:
                return None
            ready = self.next_ready()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if ready is None and timeout is None:
                return None
            wait = look if left is None else min(look, left)
            if ready is not None:
                wait = min(wait, max(ready - time.time(), 0.001))
            with self.shared.wake:
                self.shared.wake.wait(wait)
            self.shared.check()
            waited = True
            look = min(look * 2, _LAST_LOOK)

    def next_ready(self) -> float | None:
        """``FrontierProtocol.next_ready`` (server time)."""
        shared = self.shared
        value = shared.db.value("next_ready", "SELECT next_ready()")
        return None if value is None else float(value)
