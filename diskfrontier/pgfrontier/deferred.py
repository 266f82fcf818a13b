"""``DeferredDones``: the dones of a client not sent yet (``ack="deferred"``, the default), each riding on the
client's next step.

A ``done`` hands its request in here (the client no longer holds it) and returns without a round trip. The
client's next pop carries every done waiting, and the ``pop`` function ends those leases first, in its own
transaction (one round trip for a pop and the done before it); any other step of the client sends them first
(one ``finish`` call), and so do the renewal thread (``GRACE`` seconds after a done that no step follows, at
the latest), every read of the crawl and the close.

What the server answered is only known then: a lease found ended (it ran out, or was taken back) is logged and
counted (``lost``); an error, or a connection lost for good before the answer, is logged and counted
(``failed``). In each case the request is still leased in the crawl, or was done: it comes back when its lease
runs out, never lost. A process killed between a ``done`` and its next step loses the done the same way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..request.model import Request

log = logging.getLogger("diskfrontier")

GRACE = 0.05  # seconds: a done that no step follows is sent by the renewal thread this long after, at the latest
Done = tuple[Request, int, int]  # a done not sent yet: the request, its row id, its lease number


class DeferredDones:
    """The dones not sent yet; ``lost`` and ``failed`` count what the answers said. ``nudge`` (set by the client)
    is called when the first done waits, so that a done no step follows is sent all the same."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: list[Done] = []
        self.lost = 0
        self.failed = 0
        self.nudge: Callable[[], None] | None = None
        self.sending = threading.Lock()  # held while dones taken from here are sent and their answer seen to

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, request: Request, row_id: int, lease_no: int) -> None:
        """Keep the done of ``request`` (leased as row ``row_id`` with ``lease_no``) for the next step."""
        with self._lock:
            first = not self._waiting
            self._waiting.append((request, row_id, lease_no))
        if first and self.nudge is not None:
            self.nudge()

    def take(self) -> list[Done]:
        """Every done kept, no longer kept here (the caller sends them and settles them)."""
        if not self._waiting:
            return []
        with self._lock:
            taken, self._waiting = self._waiting, []
            return taken

    def settle(self, taken: list[Done], answer: list[int] | None, *, resent: bool = False,
               error: str = "") -> None:
        """What the step that carried ``taken`` answered: 1 or 0 for each (0: its lease had ended), or None with
        the ``error`` that kept it from being applied; ``resent``: the step was sent again after a lost
        connection (a 0 may be the first sending's own done)."""
        if not taken:
            return
        if answer is None:
            self.failed += len(taken)
            log.error("done() of %d requests (the first: %r) was not applied (%s); they stay leased and come back "
                      "when their leases run out", len(taken), taken[0][0], error)
            return
        for (request, _row_id, _lease_no), ok in zip(taken, answer, strict=True):
            if ok:
                continue
            if resent:
                log.info("done() of %r: its lease was gone when the call was sent again after a lost connection "
                         "(its first sending ended it, or it ran out)", request)
            else:
                self.lost += 1
                log.warning("done() of %r: its lease had run out and it was taken back (another client may hold it "
                            "now); nothing was changed. Renew long work with extend()", request)
