"""``Guard``: the lock every call of a ``Frontier`` holds, and the refusal of calls it may not serve.

``with guard:`` takes the lock (re-entrant: a ``compact()`` progress callback may read
``stats()``) and raises unless the frontier is open, this process owns the job directory
(a forked child's copy of the directory lock is closed right after the fork, ``lock.py``)
and nothing has broken it. Waiting pops sleep on ``cond``, the lock's condition.
"""

from __future__ import annotations

import threading
from typing import Any

from ..core.errors import FrontierClosed, FrontierError
from .lock import Lock
from .shared import Shared


class Guard:
    """The lock of one ``Frontier``, and whether it may serve a call."""

    def __init__(self, state: Shared) -> None:
        self.state = state
        self.closed = True
        self.dirlock: Lock | None = None  # the job directory's lock, once it is held
        self.renew()

    def renew(self) -> None:
        """A fresh lock and condition (in a forked child: a copy another thread held would never be released)."""
        self.mutex = threading.RLock()
        self.cond = threading.Condition(self.mutex)

    def __enter__(self) -> None:
        self.mutex.acquire()
        dirlock = self.dirlock  # ``check``, inline: every call of the frontier comes here
        if self.closed or self.state.broken or dirlock is None or dirlock.fd < 0:
            try:
                self.refuse()
            finally:
                self.mutex.release()

    def __exit__(self, *exc: Any) -> None:
        self.mutex.release()

    def check(self) -> None:
        """Raise unless a call may be served now (the caller holds the lock)."""
        dirlock = self.dirlock
        if self.closed or self.state.broken or dirlock is None or dirlock.fd < 0:
            self.refuse()

    def check_now(self) -> None:
        """``check``, taking the lock for it."""
        with self.mutex:
            self.check()

    def refuse(self) -> None:
        path = self.state.path
        if self.closed or self.dirlock is None:
            raise FrontierClosed(f"the frontier of {path} is closed; open it again with Frontier(path)")
        self.dirlock.check_owner()
        if self.state.broken:
            raise FrontierError(f"the frontier of {path} cannot go on ({self.state.broken}); close it and open it "
                                f"again: it is rebuilt from its journal")
        raise FrontierClosed(f"the frontier of {path} no longer holds its lock; open it again with Frontier(path)")
