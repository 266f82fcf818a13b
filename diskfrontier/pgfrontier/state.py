"""What the parts of one ``PostgresFrontier`` share: its connections, the crawl's settings as the open found
them, this client's leases, whether a call may run (``check``) and the condition its waiting pops sleep on."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from ..core.errors import FrontierClosed, FrontierError
from .connection import Database, shown_url
from .deferred import DeferredDones
from .leases import Leases

BATCH = 500
"""Requests sent in one call at most (a push, a finish)."""


@dataclass
class Shared:
    """One client's state of a crawl."""

    db: Database
    crawl: str
    fifo: bool
    delay: float
    per_host: int
    lease: float
    leases: Leases = field(default_factory=Leases)
    deferred: bool = False  # ack="deferred": a done rides on the client's next step (deferred.py)
    dones: DeferredDones = field(default_factory=DeferredDones)
    closed: bool = False
    pid: int = field(default_factory=os.getpid)
    wake: threading.Condition = field(default_factory=threading.Condition)
    bound: tuple[int, int] | None = None  # (priority, rank): where this client's next pop may look from

    def check(self) -> None:
        """Raise unless the frontier may be used: it is open, and this process opened it."""
        if self.closed:
            raise FrontierClosed(f"crawl {self.crawl!r} at {shown_url(self.db.url)} was closed; open it again")
        if os.getpid() != self.pid:
            raise FrontierError(f"this PostgresFrontier was opened by pid {self.pid}: a forked child must open its "
                                f"own (its connections and leases are the parent's)")

    def signal(self, *, frees: bool = True) -> None:
        """Wake this client's waiting pops (a push, a retry or a done here may have made something ready);
        ``frees``: the change may make a host better than the pops' bound ready (the bound is dropped)."""
        if frees:
            self.bound = None
        with self.wake:
            self.wake.notify_all()

    def pushed(self, best: tuple[int, int] | None) -> None:
        """Requests were queued here, the best of them ``best`` (priority, rank): the pops' bound is raised to
        it, so that they may be handed out first."""
        bound = self.bound
        if best is not None and bound is not None and best > bound:
            self.bound = best
