"""``DeferredAcks``: the dones of a client not sent yet (``ack="deferred"``, the default), each riding on the
client's next step.

A ``done`` hands its request in here (no longer held by the client) and returns without a round trip. The
client's next ``POP`` on the request's shard carries the dones of that shard, and the script applies them
before it leases (one round trip for a pop and the done before it); any other step of the client sends the
dones of its shard first (a ``FINISH``), and so do the renewal thread, a read of the crawl, and the close.
A done no step follows is sent by the renewal thread ``GRACE`` seconds after it at the latest.

What a reply says is only known then (``AckTally``): a lease found lost is logged and counted; so is an error
or a connection lost before the reply (the outcome is unknown). In each case the request is still leased in
Redis (or was done): it comes back when its lease runs out, never lost. A process killed between a ``done``
and its next step loses the done the same way: its request is handed out once more after its lease.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..request.model import Request
from .pipelined import AckTally

GRACE = 0.05  # seconds: a done that no step follows is sent by the renewal thread this long after, at the latest
Ack = tuple[Request, bytes, bytes]  # a done not sent yet: the request, its id in the crawl, its lease token


class DeferredAcks:
    """The dones not sent yet, by shard; ``tally`` counts what their replies say. ``nudge`` (set by the
    client) is called when the first done waits, so that a done no step follows is sent all the same."""

    def __init__(self, tally: AckTally) -> None:
        self.tally = tally
        self._lock = threading.Lock()
        self._by_shard: dict[int, list[Ack]] = {}
        self.waiting = 0  # how many dones wait (read without the lock: a hint, taken again under it)
        self.nudge: Callable[[], None] | None = None
        self.sending = threading.Lock()  # held by whoever sends dones taken from here, until their replies are seen to

    @property
    def unsettled(self) -> bool:
        """True while dones wait, or are being sent (by another thread): a read waits for them."""
        return bool(self.waiting) or self.sending.locked()

    def add(self, shard: int, request: Request, rid: bytes, token: bytes) -> None:
        """Keep the done of ``request`` (leased as ``rid`` with ``token`` on ``shard``) for the next step."""
        with self._lock:
            self._by_shard.setdefault(shard, []).append((request, rid, token))
            first = self.waiting == 0
            self.waiting += 1
        if first and self.nudge is not None:
            self.nudge()

    def take(self, shard: int) -> list[Ack]:
        """The dones of ``shard``, no longer kept here (the caller sends them and settles them)."""
        if not self.waiting:
            return []
        with self._lock:
            taken = self._by_shard.pop(shard, [])
            self.waiting -= len(taken)
            return taken

    def take_all(self) -> dict[int, list[Ack]]:
        """Every done kept, by shard, no longer kept here."""
        with self._lock:
            taken, self._by_shard = self._by_shard, {}
            self.waiting = 0
            return taken

    def settle(self, taken: list[Ack], reply: Any) -> None:
        """What the step that carried ``taken`` answered for them: a 1 or 0 each (in order), an error, or None
        (the reply was lost with the connection: the outcome is unknown)."""
        if taken:
            self.tally.on_reply("done", [request for request, _rid, _token in taken])(reply)


def finish_args(taken: list[Ack]) -> list[Any]:
    """The ``FINISH`` arguments that send the dones ``taken``."""
    args: list[Any] = ["done", "0.0", len(taken)]
    for _request, rid, token in taken:
        args += [rid, token, b""]
    return args


def pop_args(taken: list[Ack]) -> list[Any]:
    """What a ``POP`` takes after its own arguments to apply the dones ``taken`` first."""
    args: list[Any] = [len(taken)]
    for _request, rid, token in taken:
        args += [rid, token]
    return args
