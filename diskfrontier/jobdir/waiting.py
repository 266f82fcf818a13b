"""``Waiting``: the ``pop(timeout=...)`` calls that wait for a request, and the calls that wake them.

A waiting pop sleeps on the frontier's condition (its lock) until the next time a request may
become ready (``Dispatch.next_event``), its own deadline, or a wake: a push, a done, a retry, a
host change or a resumed pause. It then looks again; it gives up at once when nothing could
become ready by waiting.
"""

from __future__ import annotations

import time

from ..request.model import Request
from .dispatch import Dispatch
from .guard import Guard
from .shared import Shared

_LONGEST_SLEEP = 3600.0  # a wait for a time further off looks again after this long: the clock may be set


class Waiting:
    """The pops waiting for a request, and how many there are."""

    def __init__(self, state: Shared, dispatch: Dispatch, guard: Guard) -> None:
        self.state = state
        self.dispatch = dispatch
        self.guard = guard
        self.waiters = 0

    def wake(self) -> None:
        """Something changed: the waiting pops look again (the caller holds the lock)."""
        if self.waiters:
            self.guard.cond.notify_all()

    def pop(self, timeout: float | None) -> Request | None:
        """Wait up to ``timeout`` seconds (None: as long as waiting can help) for a request to pop.

        The caller holds the lock and found nothing ready; this raises once the frontier is
        closed or broken while it waited.
        """
        state, dispatch = self.state, self.dispatch
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            paused = state.paused_since is not None
            wake = None if paused else dispatch.next_event()
            if timeout is None and wake is None and not state.inflight and not paused:
                return None  # finished, or stalled: nothing can become ready by waiting
            wait = None if wake is None else max(0.0, wake - time.time()) + 0.001
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                wait = left if wait is None else min(wait, left)
            self.waiters += 1
            try:
                self.guard.cond.wait(None if wait is None else min(wait, _LONGEST_SLEEP))
            finally:
                self.waiters -= 1
            self.guard.check()
            request = dispatch.pop() if state.paused_since is None else None
            if request is not None:
                return request
