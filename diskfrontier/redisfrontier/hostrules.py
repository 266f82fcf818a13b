"""``HostRules``: a host's settings and failure streak, kept in its hash (``h:HOST``) on the shard its name
hashes to, each change one script that places the host again (ready, waiting, or neither) as its state
now calls for: ``SET_HOST`` (delay ``dl``, block ``b``, budget ``bu``), ``SET_DONE`` (``d``) and
``HOST_FAILED`` (the streak ``f`` and the block it causes, ``host_backoff``'s rule computed by the script).
"""

from __future__ import annotations

import math

from .reading import FOREVER
from .shards import Router
from .transport import Transport


class HostRules:
    """The host changes of the crawl that ``transport`` runs scripts on (``router``: which shard holds a host)."""

    def __init__(self, transport: Transport, router: Router) -> None:
        self.transport, self.router = transport, router

    def _set(self, host: str, field: str, value: str) -> None:
        self.transport.run("host setting", "SET_HOST", [host, field, value], self.router.of_slot(host))

    def set_delay(self, host: str, seconds: float | None) -> None:
        """``host``'s own delay (None: the crawl's)."""
        self._set(host, "dl", "" if seconds is None else repr(seconds))

    def block(self, host: str, until: float) -> None:
        """Hold ``host`` back until ``until`` (``math.inf``: until unblocked, stored as ``FOREVER``)."""
        self._set(host, "b", repr(FOREVER if until == math.inf else until))

    def unblock(self, host: str) -> None:
        """End ``host``'s block."""
        self._set(host, "b", "")

    def set_budget(self, host: str, budget: int | None) -> None:
        """``host``'s budget (None: none)."""
        self._set(host, "bu", "" if budget is None else str(budget))

    def set_done_count(self, host: str, done: int) -> None:
        """``host``'s done count (the crawl's is changed by as much)."""
        self.transport.run("set_done_count", "SET_DONE", [host, done], self.router.of_slot(host))

    def failed(self, host: str, block_after: int, backoff: float, backoff_max: float) -> float | None:
        """One more failure of ``host``: the time it is blocked until (the server's clock), or None."""
        _, until = self.transport.run("host_failed", "HOST_FAILED", [host, block_after, repr(backoff),
                                                                     repr(backoff_max)], self.router.of_slot(host))
        if not until:
            return None
        value = float(until)
        return math.inf if value >= FOREVER else value
