"""``Waiting``: a pop that waits for a request, and when the next one may be handed out.

Other clients' pushes and dones are not signalled: a waiting pop looks again every few milliseconds, twice
as long each time up to a quarter second (``POLL_MAX``), and wakes at once when something held back by time
is due (as its last short pop saw it). While the crawl is paused, a quarter second is the soonest a caller
is told to look again: a ``resume`` by any client is not signalled either.
"""

from __future__ import annotations

import time

from ..request.model import Request
from .fanout import Fanout
from .guard import Guard

POLL_MIN, POLL_MAX = 0.005, 0.25  # how often a waiting pop looks again (other clients push too)


class Waiting:
    """Pops that wait, over ``fanout`` (``prefetch``: how many a pop leases ahead)."""

    def __init__(self, fanout: Fanout, guard: Guard, prefetch: int) -> None:
        self.fanout, self.guard, self.prefetch = fanout, guard, prefetch
        self.drain = fanout.count > 1  # a pop across shards reads on other connections than its acknowledgements'

    def pop(self, timeout: float | None) -> Request | None:
        """The next ready request; with ``timeout`` (None: no limit) the pop waits for one, as ``pop`` says."""
        got = self.fanout.pop_one(self.prefetch)
        if got or timeout == 0:
            return got[0] if got else None
        deadline = None if timeout is None else time.monotonic() + timeout
        poll = POLL_MIN
        while True:
            state = self.fanout.state
            if timeout is None and state is not None and state.in_flight == 0 and (
                    state.pending == 0 or (state.event is None and not state.paused)):
                return None  # finished, or (not paused) only what nothing but another call could free
            wait = poll
            if state is not None and state.event is not None and not state.paused:
                wait = min(wait, max(0.0, state.event - state.now) + 0.001)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                wait = min(wait, left)
            time.sleep(wait)
            poll = min(poll * 2, POLL_MAX)
            self.guard.check(drain=self.drain)
            got = self.fanout.pop_one(self.prefetch)
            if got:
                return got[0]

    def next_ready(self) -> float | None:
        """When the next pending request may be handed out (``time.time()`` terms), or None (``next_ready``)."""
        look = self.fanout.look()
        local = time.time()
        when: float | None
        if look.ready:
            when = local
        elif look.pending == 0 and look.event is None:
            return None
        else:
            when = None if look.event is None else local + max(0.0, look.event - look.now)
        if when is not None and look.paused:
            when = max(when, local + POLL_MAX)
        return when

    def next_event_seen(self) -> float | None:
        """When something held back by time becomes ready, as the last short pop saw it (no round trip)."""
        state = self.fanout.state
        if state is None or state.event is None or state.paused:
            return None
        return time.time() + max(0.0, state.event - state.now)
