"""``Guard``: whether a ``RedisFrontier`` may serve a call: it is open, and this process opened it (a forked
child holds none of its parent's leases, and must open the crawl itself)."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..core.errors import FrontierClosed, FrontierError
from .connection import shown_url, talking
from .deferred import DeferredAcks
from .pipelined import ScriptChannel


class Guard:
    """The state of one client's frontier: closed or not, the process that opened it, its channel of
    pipelined acknowledgements (``ack="pipelined"`` only), whose replies a call reads first, and its dones not sent
    yet (``ack="deferred"``: ``acks``, which ``send_acks`` sends), which a call sends first."""

    def __init__(self, crawl: str, url: str) -> None:
        self.crawl, self.url = crawl, url
        self.closed = True
        self.pid = os.getpid()
        self.channel: ScriptChannel | None = None
        self.acks: DeferredAcks | None = None
        self.send_acks: Callable[[], None] | None = None

    def owned(self) -> bool:
        """True in the process that opened the frontier."""
        return os.getpid() == self.pid

    def closed_error(self, doing: str = "was closed; open it again") -> FrontierClosed:
        """The error of a call to this frontier once it is closed (or, ``doing``, being closed)."""
        return FrontierClosed(f"crawl {self.crawl!r} at {shown_url(self.url)} {doing}")

    def check(self, drain: bool = True) -> None:
        """Raise unless the frontier may be used; ``drain``: first read the replies of acknowledgements sent
        and not read yet, and send the dones not sent yet, so that a read on another connection sees them
        applied."""
        if self.closed:
            raise self.closed_error()
        if not self.owned():
            raise FrontierError(f"this RedisFrontier was opened by pid {self.pid}: a forked child must open its "
                                f"own (its leases are the parent's)")
        if not drain:
            return
        channel = self.channel
        if channel is not None and channel.pending:
            with talking(self.url, "reading acknowledgements"):
                channel.drain()
        acks = self.acks
        if acks is not None and acks.unsettled and self.send_acks is not None:
            self.send_acks()
