"""What a run decides, whoever runs it: ``crawl()``'s threads and tasks and ``acrawl()``'s tasks.

``RetryPolicy.decide`` maps a request and its handler's error to an ``Action`` (done, retry after a
backoff, fail, or nothing: the handler finished it itself), by the error's kind (``failurekinds``: a
``PermanentError`` fails at once, a ``classify`` hook may decide) and with the blame its host takes
(a failure counted against it, or a block at once); ``apply`` carries the action out on the
frontier. A robots.txt verdict (``robots.py``) is settled here too: a disallowed request fails, a
held one is given back for when its site's hold ends. ``RunState`` holds one run's counters and stop
flags and decides when the run ends: after ``max_requests``, when an idle worker finds the crawl
finished or stalled, or at a stop asked for from outside (a duration, a signal); and, once stopped,
when the handlers still running have had their ``grace`` and are left behind (``abandon``: their
requests stay in flight, never acknowledged). ``RunStats`` and ``CrawlStats`` are what a run reports.

The frontier calls here are the blocking ones of the contract: ``crawl()`` makes them on its worker
threads, ``acrawl()`` on the thread pool of its ``AsyncFrontier``, so that both settle a request
through the same code.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from ..contract.checks import MAX_SECONDS
from ..contract.protocol import FrontierProtocol
from ..core.errors import FrontierError
from ..request.model import Request, retries_text
from .failurekinds import Classify, FailureKind, kind_of
from .robots import DEFAULT_TIMEOUT, Fetch, RobotsRules, Verdict, site_of

log = logging.getLogger("diskfrontier")

__all__ = ["Action", "CrawlStats", "HostBlame", "RetryPolicy", "RunState", "RunStats", "StatusLine", "apply",
           "check_argument", "robots_rules"]


# ------------------------------------------------------------------ what a run reports
@dataclass
class RunStats:
    """What one run did."""

    started: float  # time.time()
    ended: float = 0.0
    handled: int = 0  # requests taken from the frontier
    done: int = 0  # handler returned (acknowledged, by crawl() or by the handler itself)
    retried: int = 0  # handler raised, given back through the frontier's retry with backoff
    failed: int = 0  # recorded as failed: no retries left, a PermanentError, a "fail", or robots.txt
    failed_at_once: int = 0  # of failed: with no retry (a PermanentError, a "fail", robots.txt)
    host_blocks: int = 0  # times a host was blocked for its failures (host_errors in a row, a "backoff")
    robots_disallowed: int = 0  # requests robots.txt disallowed (recorded as failed, never fetched)
    robots_held: int = 0  # requests given back because their site's robots.txt could not be fetched
    abandoned: int = 0  # requests in hand when the run returned, left in flight (they come back): see RunState
    stopped_by: str = ""  # "finished", "stalled", "duration", "max_requests", "SIGINT", "SIGTERM", "interrupted"

    @property
    def seconds(self) -> float:
        return max(0.0, self.ended - self.started)

    @property
    def rate(self) -> float:
        """Requests handled a second."""
        return self.handled / self.seconds if self.seconds > 0 else 0.0


@dataclass
class CrawlStats:
    """What ``crawl()`` or ``acrawl()`` did: one ``RunStats`` a run, and their sums."""

    runs: list[RunStats] = field(default_factory=list)

    def _sum(self, name: str) -> int:
        return sum(getattr(run, name) for run in self.runs)

    @property
    def handled(self) -> int:
        return self._sum("handled")

    @property
    def done(self) -> int:
        return self._sum("done")

    @property
    def retried(self) -> int:
        return self._sum("retried")

    @property
    def failed(self) -> int:
        return self._sum("failed")

    @property
    def failed_at_once(self) -> int:
        return self._sum("failed_at_once")

    @property
    def host_blocks(self) -> int:
        return self._sum("host_blocks")

    @property
    def robots_disallowed(self) -> int:
        return self._sum("robots_disallowed")

    @property
    def robots_held(self) -> int:
        return self._sum("robots_held")

    @property
    def abandoned(self) -> int:
        return self._sum("abandoned")

    @property
    def stopped_by(self) -> str:
        return self.runs[-1].stopped_by if self.runs else ""


# ------------------------------------------------------------------ one request after its handler
@dataclass(frozen=True)
class HostBlame:
    """A failure counted against a request's host (``frontier.host_failed``): blocked from
    ``block_after`` failures in a row on, for ``backoff`` seconds doubled each further one, at most
    ``backoff_max``."""

    block_after: int
    backoff: float
    backoff_max: float


@dataclass(frozen=True)
class Action:
    """What becomes of a request after its handler.

    ``kind``: "done" (acknowledge it), "retry" (give it back, ready after ``delay`` seconds),
    "fail" (record it as failed with ``error``), or "none" (the handler already finished it
    itself, with ``done``, ``retry`` or ``fail``: counted as done). ``at_once``: a failure with no
    retry. ``blame``: a failure of the request's host to count (None: the host is not blamed).
    """

    kind: Literal["done", "retry", "fail", "none"]
    delay: float = 0.0
    error: str = ""
    at_once: bool = False
    blame: HostBlame | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """How a run treats a handler's error: ``retries`` retries, ``backoff`` seconds doubled each attempt;
    ``classify`` (see ``failurekinds``) may say what an error is; ``host_errors`` failures of a host in a
    row block it for ``host_backoff`` seconds, doubled each further failure, at most ``host_backoff_max``
    (``host_errors`` None: hosts are never blocked for their failures, but a "backoff" still blocks)."""

    retries: int = 3
    backoff: float = 1.0
    classify: Classify | None = None
    host_errors: int | None = 5
    host_backoff: float = 60.0
    host_backoff_max: float = 3600.0

    def decide(self, request: Request, error: BaseException | None, *, held: bool) -> Action:
        """The action for ``request`` after its handler returned (``error`` None) or raised ``error``;
        ``held``: the request is still in flight here (the handler did not finish it itself)."""
        if not held:
            if error is not None:
                log.warning("handler raised after it finished %s itself: %s", request.url, error_text(error))
            return Action("none")
        if error is None:
            return Action("done")
        try:
            kind = kind_of(request, error, self.classify)
        except Exception as exc:  # a classify hook that raised or answered wrongly: the error is retried
            log.error("classify() failed for %s (%s); the error is retried: %s", request.url, error_text(exc),
                      error_text(error))
            kind = FailureKind.RETRY
        text = error_text(error)
        if kind is FailureKind.FAIL:
            return Action("fail", error=text, at_once=True)
        blame = None
        if kind is FailureKind.BACKOFF:
            blame = HostBlame(1, self.host_backoff, self.host_backoff_max)
        elif self.host_errors is not None:
            blame = HostBlame(self.host_errors, self.host_backoff, self.host_backoff_max)
        if request.attempts < self.retries:
            return Action("retry", delay=min(self.backoff * 2 ** request.attempts, MAX_SECONDS), error=text,
                          blame=blame)
        return Action("fail", error=text, blame=blame)


_COUNTED = {"done": "done", "none": "done", "retry": "retried", "fail": "failed"}


def apply(frontier: FrontierProtocol, request: Request, action: Action) -> tuple[str, ...]:
    """Carry out ``action`` on ``frontier``; return the ``RunStats`` counters it adds to ("done",
    "retried", "failed", and "failed_at_once" and "host_blocks" beside them), none if the frontier
    refused (closed under us, a lease lost, a request changed: the request comes back, as one in
    flight does)."""
    counters: tuple[str, ...] = ()
    try:
        if action.blame is not None:  # first: a host blocked now holds back the request given back below
            blame = action.blame
            until = frontier.host_failed(request.slot, block_after=blame.block_after, backoff=blame.backoff,
                                         backoff_max=blame.backoff_max)
            if until is not None:
                counters = ("host_blocks",)
                log.warning("host %s blocked until %s after failures in a row: %s", request.slot,
                            time.strftime("%H:%M:%S", time.localtime(min(until, 2**31 - 1))), action.error)
        if action.kind == "done":
            frontier.done(request)
        elif action.kind == "retry":
            frontier.retry(request, delay=action.delay)
            log.info("retry %d of %s in %.1fs: %s", request.attempts, request.url, action.delay, action.error)
        elif action.kind == "fail":
            frontier.fail(request, action.error)
            if action.at_once:
                counters += ("failed_at_once",)
                log.warning("failed at once: %s: %s", request.url, action.error)
            else:
                log.warning("failed after %s: %s: %s", retries_text(request.attempts), request.url, action.error)
    except Exception as exc:
        log.warning("could not finish %s (%s: %s); it will be handed out again", request.url,
                    type(exc).__name__, exc)
        return ()
    return (_COUNTED[action.kind], *counters)


def settle_robots(frontier: FrontierProtocol, request: Request, verdict: Verdict) -> tuple[str, ...]:
    """Finish a request that robots.txt keeps from its handler: disallowed, failed with the error
    ``robots.txt``; held (the site's robots.txt could not be fetched), given back for when its host's
    hold ends. Returns the ``RunStats`` counters, as ``apply`` does."""
    try:
        if verdict.kind == "disallow":
            frontier.fail(request, "robots.txt")
            log.info("disallowed by robots.txt: %s", request.url)
            return ("failed", "failed_at_once", "robots_disallowed")
        frontier.retry(request, delay=min(max(0.0, verdict.until - time.time()), MAX_SECONDS))
        log.info("robots.txt of %s could not be fetched: %s waits until the site's hold ends", site_of(request.url)[0],
                 request.url)
        return ("robots_held",)
    except Exception as exc:
        log.warning("could not finish %s (%s: %s); it will be handed out again", request.url,
                    type(exc).__name__, exc)
        return ()


def robots_rules(function: str, frontier: FrontierProtocol, robots: bool, user_agent: str | None,
                 robots_ttl: float, fetch_robots: Fetch | None, policy: RetryPolicy,
                 robots_timeout: float = DEFAULT_TIMEOUT) -> RobotsRules | None:
    """The ``RobotsRules`` of a run asked for ``robots=True`` (None otherwise); ValueError naming
    ``function`` if its arguments do not fit."""
    if not isinstance(robots, bool):
        raise TypeError(f"{function}(): robots must be True or False, got {robots!r}")
    check_argument(function, "robots_ttl", robots_ttl, none=False)
    check_argument(function, "robots_timeout", robots_timeout, least=0.001, none=False)
    if fetch_robots is not None and not callable(fetch_robots):
        raise TypeError(f"{function}(): fetch_robots must be a function (url, user_agent) -> (status, body), "
                        f"got {fetch_robots!r}")
    if not robots:
        return None
    if not isinstance(user_agent, str) or not user_agent.strip():
        raise ValueError(f"{function}(): robots=True needs user_agent=, the name your crawler gives in "
                         f"User-agent (the robots.txt rules for it are obeyed), e.g. user_agent='mybot/1.0'")
    return RobotsRules(frontier, user_agent, ttl=robots_ttl, fetch=fetch_robots, backoff=policy.host_backoff,
                       backoff_max=policy.host_backoff_max, timeout=robots_timeout)


def check_policy(function: str, classify: Any, host_errors: Any, host_backoff: Any, host_backoff_max: Any) -> None:
    """ValueError or TypeError naming ``function`` for a bad failure setting."""
    if classify is not None and not callable(classify):
        raise TypeError(f"{function}(): classify must be a function (request, error) -> 'retry', 'fail', "
                        f"'backoff' or None, got {classify!r}")
    check_argument(function, "host_errors", host_errors, whole=True, least=1)
    check_argument(function, "host_backoff", host_backoff, none=False)
    check_argument(function, "host_backoff_max", host_backoff_max, none=False)


def error_text(error: BaseException) -> str:
    """An error as a failure records it: its type and message, cut at 2,000 characters."""
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 2000 else text[:2000] + "..."


# ------------------------------------------------------------------ one run
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

    def settle(self, request: Request, error: BaseException | None) -> None:
        """Finish ``request`` after its handler (done, retry with backoff, or failed) and count it.

        Blocking: makes the frontier's calls."""
        frontier = self.frontier
        try:
            held = frontier.holds(request)
        except Exception as exc:  # as in apply(): the request comes back
            log.warning("could not finish %s (%s: %s); it will be handed out again", request.url,
                        type(exc).__name__, exc)
            counters: tuple[str, ...] = ()
        else:
            counters = apply(frontier, request, self.policy.decide(request, error, held=held))
        self.count(*counters)

    def settle_robots(self, request: Request, verdict: Verdict) -> None:
        """Finish ``request`` that robots.txt kept from its handler (disallowed, or held) and count it.

        Blocking: makes the frontier's calls."""
        self.count(*settle_robots(self.frontier, request, verdict))

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


# ------------------------------------------------------------------ arguments and display
def check_argument(function: str, name: str, value: Any, *, whole: bool = False, least: float = 0.0,
                   none: bool = True) -> None:
    """ValueError naming ``function`` and ``name`` unless ``value`` is a finite number of at least
    ``least`` (a whole one if ``whole``), or None when ``none``."""
    if value is None and none:
        return
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) or value < least:
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"{function}(): {name} must be {kind} of at least {least:g}{' or None' if none else ''}, "
                         f"got {value!r}")


class StatusLine:
    """A status line on stderr, redrawn twice a second from a thread of its own: pending, in hand,
    done, failed, rate."""

    def __init__(self, run: RunState) -> None:
        self.run = run
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="diskfrontier-status", daemon=True)
        self.thread.start()

    def _line(self) -> str:
        stats = self.run.stats
        try:
            pending = self.run.frontier.stats().get("pending", "?")
        except FrontierError:
            pending = "?"
        seconds = max(time.time() - stats.started, 1e-9)
        return (f"\rpending {pending}  in hand {self.run.busy}  done {stats.done}  retried {stats.retried}  "
                f"failed {stats.failed}  {stats.handled / seconds:.1f}/s ")

    def _loop(self) -> None:
        while not self.stopped.wait(0.5):
            sys.stderr.write(self._line())
            sys.stderr.flush()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        sys.stderr.write(self._line() + "\n")
        sys.stderr.flush()


_MOMENT = ("pending", "in_flight", "done", "failed", "pushed", "retried", "reclaimed", "dropped")


def _moment(stats: dict[str, Any]) -> tuple[Any, ...]:
    """What of a frontier's counters moves when a request is pushed, handed out, given back or finished
    (pending and in flight first), by any worker or client."""
    return tuple(stats.get(name) for name in _MOMENT)
