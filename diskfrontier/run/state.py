"""One run's shared state and its decisions of when to stop, whoever runs it: ``crawl()``'s threads and tasks
and ``acrawl()``'s tasks.

``RunState`` holds one run's counters and stop flags and decides when the run ends: after ``max_requests``,
when an idle worker finds the crawl finished or stalled, or at a stop asked for from outside (a duration, a
signal); and, once stopped, when the handlers still running have had their ``grace`` and are left behind
(``abandon``: their requests stay in flight, never acknowledged). What becomes of each request after its
handler is the ``RetryPolicy``'s (``policy.py``); what a run reports, ``RunStats`` (``stats.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ..contract.outcomes import Outcome
from ..contract.protocol import FrontierProtocol
from ..request.model import Request
from .outcomes import OutcomeBuffer, outcome_of
from .policy import RetryPolicy, apply, settle_robots
from .robots import RobotsRules, Verdict
from .stats import RunStats

log = logging.getLogger("diskfrontier")

__all__ = ["RunState"]


class RunState:
    """The shared state of one run over ``frontier``: counters, the stop flags, and the decisions
    of when to stop. Safe to use from many threads (and from an event loop's thread beside them).

    Once stopped, a run takes no new request; a worker waiting for a robots.txt fetch leaves its
    request at once (``release``), a handler under way has ``grace`` seconds (None: as long as it
    takes) to end, and then the run leaves it behind (``abandon``): the run returns, the handler's
    request stays in flight (it comes back, as after a second Ctrl-C) and is never acknowledged by
    the run. ``seal`` counts what was still in hand as ``abandoned`` when the run returns."""

    def __init__(self, frontier: FrontierProtocol, policy: RetryPolicy, duration: float | None,
                 max_requests: int | None, robots: RobotsRules | None = None, grace: float | None = None) -> None:
        self.frontier, self.policy, self.robots = frontier, policy, robots
        self.max_requests = max_requests
        self.grace = grace
        self.stats = RunStats(time.time())
        self.deadline = None if duration is None else time.monotonic() + duration
        self.lock = threading.Lock()
        self.stop = threading.Event()  # no new work
        self.hard = threading.Event()  # leave at once
        self.stopped_at: float | None = None  # time.monotonic() of the first stop
        self.sealed = False  # the run has returned: its counters are final
        self.taken = 0  # hand-outs reserved against max_requests
        self.busy = 0  # requests in hand (popped, not yet settled)
        self.outcomes = OutcomeBuffer(frontier)  # what each fetch came to, for the frontier's stats

    def _stopped_now(self) -> None:
        if self.stopped_at is None:
            self.stopped_at = time.monotonic()

    def halt(self, reason: str) -> None:
        """Take no new request; ``reason`` becomes ``stopped_by`` unless a stop came first."""
        with self.lock:
            if not self.stats.stopped_by:
                self.stats.stopped_by = reason
            self._stopped_now()
        self.stop.set()

    def leave(self) -> None:
        """Stop at once (a second Ctrl-C): the requests in hand stay in flight."""
        with self.lock:
            self.stats.stopped_by = "interrupted"
            self._stopped_now()
        self.hard.set()
        self.stop.set()

    def check_deadline(self) -> None:
        """Stop the run if its duration is over."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.halt("duration")

    def grace_over(self) -> bool:
        """True once the run has stopped and its handlers' grace has run out."""
        stopped_at = self.stopped_at
        return self.grace is not None and stopped_at is not None and time.monotonic() >= stopped_at + self.grace

    def abandon(self) -> None:
        """Leave the handlers still running behind, as a second Ctrl-C does (``stopped_by`` stays)."""
        with self.lock:
            busy = self.busy
        if not self.hard.is_set():
            log.warning("%d handlers still running %gs after the stop: left behind; their requests stay in flight "
                        "and come back", busy, self.grace)
        self.hard.set()
        self.stop.set()

    def watch(self) -> bool:
        """One look of whoever waits for the run's workers (a thread, or the task of the tasks): stop the run at
        its duration, leave the handlers behind once their grace after a stop is over; True when the waiting is
        over (left at once, or the handlers left behind), False to look again."""
        if self.hard.is_set():
            return True
        self.check_deadline()
        if self.grace_over():
            self.abandon()
            return True
        return False

    def release(self) -> None:
        """A request in hand is left in flight without being settled (the run stopped while its
        robots.txt was being fetched): it comes back, as a request abandoned does."""
        with self.lock:
            if self.sealed:
                return
            self.busy -= 1
            self.stats.abandoned += 1

    def seal(self) -> None:
        """The run returns: what is still in hand is counted as abandoned, and nothing counts after this."""
        with self.lock:
            if not self.sealed:
                self.sealed = True
                self.stats.abandoned += self.busy

    def end(self) -> None:
        """The run returns: ``seal`` it, send the outcomes kept, and note when it ended."""
        self.seal()
        self.outcomes.flush()
        self.stats.ended = time.time()

    def reserve(self) -> bool:
        """Count a hand-out against max_requests before popping; False if the run must stop."""
        with self.lock:
            if self.stop.is_set():
                return False
            if self.max_requests is not None and self.taken >= self.max_requests:
                return False
            self.taken += 1
            return True

    def unreserve(self) -> None:
        with self.lock:
            self.taken -= 1

    def took(self) -> None:
        with self.lock:
            self.busy += 1

    def settle(self, request: Request, error: BaseException | None, result: object = None,
               seconds: float | None = None) -> None:
        """Finish ``request`` after its handler (done, retry with backoff, or failed) and count it, and its
        outcome (the handler took ``seconds``).

        Blocking: makes the frontier's calls."""
        frontier = self.frontier
        try:
            held = frontier.holds(request)
        except Exception as exc:  # as in apply(): the request comes back
            log.warning("could not finish %s (%s: %s); it will be handed out again", request.url,
                        type(exc).__name__, exc)
            counters: tuple[str, ...] = ()
        else:
            action = self.policy.decide(request, error, held=held, result=result)
            counters = apply(frontier, request, action)
            self.outcomes.add(outcome_of(action, result, seconds))
        self.count(*counters)

    def settle_robots(self, request: Request, verdict: Verdict) -> None:
        """Finish ``request`` that robots.txt kept from its handler (disallowed, or held) and count it.

        Blocking: makes the frontier's calls."""
        counters = settle_robots(self.frontier, request, verdict)
        if "robots_disallowed" in counters:
            self.outcomes.add(Outcome(failure="robots"))
        self.count(*counters)

    def count(self, *counters: str) -> None:
        """One request in hand settled, adding to each of ``counters``; stop at max_requests, and
        look whether the crawl is over if it was the last one in hand."""
        with self.lock:
            if self.sealed:
                return  # settled after the run returned (it had left this one behind): not this run's any more
            self.busy -= 1
            idle = self.busy == 0
            self.stats.handled += 1
            reached = self.max_requests is not None and self.stats.handled >= self.max_requests
            for counter in counters:
                setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        if reached:
            self.halt("max_requests")
        elif idle:
            self.idle()  # the last request in hand: the crawl may be finished now

    def idle(self) -> None:
        """Nothing was ready: end the run if nothing can become ready. Blocking: reads the frontier."""
        with self.lock:
            busy = self.busy
        if busy:
            return
        frontier = self.frontier
        if frontier.finished:
            self.halt("finished")
            return
        if frontier.paused_since is not None:
            return  # paused: idle until resumed (from another process, through the inbox)
        # Stalled only if nothing is in flight and nothing can become ready, read as one moment: the
        # counters before and after the next ready time agree. Between two reads another worker (or
        # client) may pop the last pending request (nothing ready then, one in flight), or give one
        # back for later (none in flight, one delayed); either is seen as a change, and the next idle
        # looks again.
        before = _moment(frontier.stats())
        ready = frontier.next_ready()
        after = _moment(frontier.stats())
        if ready is None and before == after and after[1] == 0 and not frontier.finished:
            self.halt("stalled")  # only hosts blocked for ever or over their budget are left

    def signalled(self, name: str) -> None:
        """A first SIGINT or SIGTERM: take no new request, finish those in hand."""
        if self.stop.is_set():
            return
        with self.lock:
            busy = self.busy
        within = "" if self.grace is None else f" for at most {self.grace:g}s"
        log.warning("%s: stopping; finishing the %d requests in hand%s (Ctrl-C again to stop at once)", name, busy,
                    within)
        self.halt(name)

    def signalled_again(self) -> None:
        """A second Ctrl-C: leave at once."""
        log.warning("stopping at once: the requests in hand stay in flight and come back")
        self.leave()


_MOMENT = ("pending", "in_flight", "done", "failed", "pushed", "retried", "reclaimed", "dropped")


def _moment(stats: dict[str, Any]) -> tuple[Any, ...]:
    """What of a frontier's counters moves when a request is pushed, handed out, given back or finished
    (pending and in flight first), by any worker or client."""
    return tuple(stats.get(name) for name in _MOMENT)
