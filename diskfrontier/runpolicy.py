"""What a run decides, whoever runs it: ``crawl()``'s threads and tasks and ``acrawl()``'s tasks.

``RetryPolicy.decide`` maps a request and its handler's error to an ``Action`` (done, retry after a
backoff, fail, or nothing: the handler finished it itself); ``apply`` carries the action out on the
frontier. ``RunState`` holds one run's counters and stop flags and decides when the run ends: after
``max_requests``, when an idle worker finds the crawl finished or stalled, or at a stop asked for
from outside (a duration, a signal). ``RunStats`` and ``CrawlStats`` are what a run reports.

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

from .contract import MAX_SECONDS, FrontierProtocol
from .errors import FrontierError
from .request.model import Request, retries_text

log = logging.getLogger("diskfrontier")

__all__ = ["Action", "CrawlStats", "RetryPolicy", "RunState", "RunStats", "StatusLine", "apply", "check_argument"]


# ------------------------------------------------------------------ what a run reports
@dataclass
class RunStats:
    """What one run did."""

    started: float  # time.time()
    ended: float = 0.0
    handled: int = 0  # requests taken from the frontier
    done: int = 0  # handler returned (acknowledged, by crawl() or by the handler itself)
    retried: int = 0  # handler raised, given back through the frontier's retry with backoff
    failed: int = 0  # handler raised with no retries left: recorded as failed
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
    def stopped_by(self) -> str:
        return self.runs[-1].stopped_by if self.runs else ""


# ------------------------------------------------------------------ one request after its handler
@dataclass(frozen=True)
class Action:
    """What becomes of a request after its handler.

    ``kind``: "done" (acknowledge it), "retry" (give it back, ready after ``delay`` seconds),
    "fail" (record it as failed with ``error``), or "none" (the handler already finished it
    itself, with ``done``, ``retry`` or ``fail``: counted as done).
    """

    kind: Literal["done", "retry", "fail", "none"]
    delay: float = 0.0
    error: str = ""


@dataclass(frozen=True)
class RetryPolicy:
    """How a run treats a handler's error: ``retries`` retries, ``backoff`` seconds doubled each attempt."""

    retries: int = 3
    backoff: float = 1.0

    def decide(self, request: Request, error: BaseException | None, *, held: bool) -> Action:
        """The action for ``request`` after its handler returned (``error`` None) or raised ``error``;
        ``held``: the request is still in flight here (the handler did not finish it itself)."""
        if not held:
            if error is not None:
                log.warning("handler raised after it finished %s itself: %s", request.url, error_text(error))
            return Action("none")
        if error is None:
            return Action("done")
        if request.attempts < self.retries:
            return Action("retry", delay=min(self.backoff * 2 ** request.attempts, MAX_SECONDS),
                          error=error_text(error))
        return Action("fail", error=error_text(error))


_COUNTED = {"done": "done", "none": "done", "retry": "retried", "fail": "failed"}


def apply(frontier: FrontierProtocol, request: Request, action: Action) -> str:
    """Carry out ``action`` on ``frontier``; return the ``RunStats`` counter it adds to ("done",
    "retried", "failed"), or "" if the frontier refused (closed under us, a lease lost, a request
    changed: the request comes back, as one in flight does)."""
    try:
        if action.kind == "done":
            frontier.done(request)
        elif action.kind == "retry":
            frontier.retry(request, delay=action.delay)
            log.info("retry %d of %s in %.1fs: %s", request.attempts, request.url, action.delay, action.error)
        elif action.kind == "fail":
            frontier.fail(request, action.error)
            log.warning("failed after %s: %s: %s", retries_text(request.attempts), request.url, action.error)
    except Exception as exc:
        log.warning("could not finish %s (%s: %s); it will be handed out again", request.url,
                    type(exc).__name__, exc)
        return ""
    return _COUNTED[action.kind]


def error_text(error: BaseException) -> str:
    """An error as a failure records it: its type and message, cut at 2,000 characters."""
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 2000 else text[:2000] + "..."


# ------------------------------------------------------------------ one run
class RunState:
    """The shared state of one run over ``frontier``: counters, the stop flags, and the decisions
    of when to stop. Safe to use from many threads (and from an event loop's thread beside them)."""

    def __init__(self, frontier: FrontierProtocol, policy: RetryPolicy, duration: float | None,
                 max_requests: int | None) -> None:
        self.frontier, self.policy = frontier, policy
        self.max_requests = max_requests
        self.stats = RunStats(time.time())
        self.deadline = None if duration is None else time.monotonic() + duration
        self.lock = threading.Lock()
        self.stop = threading.Event()  # no new work
        self.hard = threading.Event()  # leave at once
        self.taken = 0  # hand-outs reserved against max_requests
        self.busy = 0  # requests in hand (popped, not yet settled)

    def halt(self, reason: str) -> None:
        """Take no new request; ``reason`` becomes ``stopped_by`` unless a stop came first."""
        with self.lock:
            if not self.stats.stopped_by:
                self.stats.stopped_by = reason
        self.stop.set()

    def leave(self) -> None:
        """Stop at once (a second Ctrl-C): the requests in hand stay in flight."""
        with self.lock:
            self.stats.stopped_by = "interrupted"
        self.hard.set()
        self.stop.set()

    def check_deadline(self) -> None:
        """Stop the run if its duration is over."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.halt("duration")

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
            counter = ""
        else:
            counter = apply(frontier, request, self.policy.decide(request, error, held=held))
        self.count(counter)

    def count(self, counter: str) -> None:
        """One request in hand settled, adding to ``counter`` (none if ""); stop at max_requests,
        and look whether the crawl is over if it was the last one in hand."""
        with self.lock:
            self.busy -= 1
            idle = self.busy == 0
            self.stats.handled += 1
            reached = self.max_requests is not None and self.stats.handled >= self.max_requests
            if counter:
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
        # in flight first: a request in flight now can be given back (retried for later) while the
        # next ready time is read, and must not make the crawl look stalled
        in_flight = frontier.stats().get("in_flight", 0)
        if frontier.finished:
            self.halt("finished")
        elif frontier.paused_since is not None:
            return  # paused: idle until resumed (from another process, through the inbox)
        elif in_flight == 0 and frontier.next_ready() is None:
            self.halt("stalled")  # only hosts blocked for ever or over their budget are left

    def signalled(self, name: str) -> None:
        """A first SIGINT or SIGTERM: take no new request, finish those in hand."""
        if self.stop.is_set():
            return
        with self.lock:
            busy = self.busy
        log.warning("%s: stopping; finishing the %d requests in hand (Ctrl-C again to stop at once)", name, busy)
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
