"""``HostRules``: the per-host settings a caller changes, and the failure streak that blocks a host.

Each change is one HOST record written by the ledger (``ledger.py``): a host's delay, its block,
its budget and its done count hold across restarts and crashes. A failure streak is counted in
``hosts.health`` (``hostmeta.py``) before the block it leads to is written: a kill between the two
keeps the count and loses that one block, which the host's next failure sets again. The caller
(the façade) holds the lock and has checked its arguments.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from ..contract.backoff import host_backoff
from ..contract.checks import MAX_TIME
from ..request.model import Request
from .hostmeta import HostHealth
from .ledger import Ledger

KEEP = object()
"""For ``HostRules.change``: leave this setting as it is."""


class HostRules:
    """Changes to one host's settings, and its consecutive failures."""

    def __init__(self, ledger: Ledger, health: HostHealth) -> None:
        self.ledger = ledger
        self.health = health

    def change(self, name: str, *, delay: object = KEEP, blocked_until: object = KEEP, budget: object = KEEP) -> None:
        """Write host ``name``'s settings with the given ones changed (one HOST record)."""
        entry = self.ledger.host(name)
        self.ledger.set_host(
            entry,
            entry.delay if delay is KEEP else delay,  # type: ignore[arg-type]
            entry.blocked_until if blocked_until is KEEP else blocked_until,  # type: ignore[arg-type]
            entry.budget if budget is KEEP else budget,  # type: ignore[arg-type]
        )

    def set_done_count(self, name: str, done: int) -> None:
        """Set how many requests of host ``name`` are done (kept in its HOST record)."""
        self.ledger.set_done_count(self.ledger.host(name), done)

    def failed(self, name: str, block_after: int, backoff: float, backoff_max: float) -> float | None:
        """One more consecutive failure of ``name``: the time it is now blocked until, or None."""
        seconds = host_backoff(self.health.failed(name), block_after, backoff, backoff_max)
        if not seconds:
            return None
        entry = self.ledger.host(name)
        until = max(entry.blocked_until, min(time.time() + seconds, float(MAX_TIME)))
        if until != entry.blocked_until:
            self.ledger.set_host(entry, entry.delay, until, entry.budget)
        return until

    def succeeded(self, requests: Iterable[Request]) -> None:
        """End the failure streak of each request's host (nothing to do, and no write, without one)."""
        health = self.health
        if health.failures:
            for request in requests:
                health.succeeded(request.slot)
