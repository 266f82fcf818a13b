"""``crawl()``: a pool of workers over a frontier, with time-boxed and repeated runs.

A run stopped by its duration, its request count, Ctrl-C or SIGTERM takes no new request and
finishes the ones in hand (done, retried with backoff, or recorded as failed), so that the
frontier is left consistent and nothing is lost. The stop is bounded: a worker waiting for a
robots.txt fetch leaves at once, and a handler still running ``grace`` seconds after the stop is
left behind; a second Ctrl-C leaves at once. What is left behind stays in flight (a job directory
gives it back at close or at its next open; Redis at close or when its lease runs out).

The main thread watches the run (its duration, its signals, the grace) and the workers do the
work: plain handlers on threads, coroutine handlers as tasks of a loop in a thread of its own.
A thread cannot be killed, so a handler left behind goes on in its daemon thread until it returns
(its request is never acknowledged by the run) or the process exits.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..contract.protocol import FrontierProtocol
from ..core.errors import FrontierError
from ..request.model import Request
from .failurekinds import Classify
from .policy import CrawlStats, RetryPolicy, RunState, RunStats, StatusLine, check_argument, check_policy, robots_rules
from .robots import ALLOW, DEFAULT_TIMEOUT, STOPPED, Fetch, RobotsRules, Verdict

log = logging.getLogger("diskfrontier")
_IDLE_POLL = 0.05  # how long a worker waits for a request before it looks at the run's state again
_TICK = 0.05  # how often the main thread looks at the run's duration and grace
_LOOP_LEAVE = 5.0  # how long a run left at once waits for its loop to cancel its tasks and close


CrawlFrontier = FrontierProtocol  # what crawl() needs of a frontier: the contract (an older name)


Handler = Callable[[Request, Any], Any]


class _Run(RunState):
    """One run of ``crawl()``: the shared state and decisions (``RunState``), and the loops of its
    worker threads or tasks around the handler."""

    def __init__(self, frontier: FrontierProtocol, handler: Handler, policy: RetryPolicy,
                 duration: float | None, max_requests: int | None, robots: RobotsRules | None,
                 grace: float | None) -> None:
        super().__init__(frontier, policy, duration, max_requests, robots, grace)
        self.handler = handler
        self.tasks_over = threading.Event()  # the async handlers' tasks have ended (their loop may linger)
        self.errors: list[BaseException] = []  # what the async handlers' loop raised, for crawl() to raise

    # ------------------------------------------------------------------ threads
    def worker(self) -> None:
        frontier = self.frontier
        while not self.stop.is_set():
            if not self.reserve():
                return
            try:
                request = frontier.pop(timeout=_IDLE_POLL)
            except FrontierError as exc:
                self.unreserve()
                if self.hard.is_set():
                    return  # the run was left at once and the frontier closed under this thread: not an error
                log.error("pop failed: %s", exc)
                self.halt(f"error: {exc}")
                return
            if request is None:
                if self.hard.is_set():
                    return
                self.unreserve()
                self.idle()
                continue
            self.took()
            if self.hard.is_set():
                return  # left at once: a request popped now stays in flight and comes back
            error: BaseException | None = None
            verdict: Verdict = ALLOW
            try:
                if self.robots is not None:  # fetches the site's robots.txt the first time, unless the run stops
                    verdict = self.robots.check(request, self.stop)
                if verdict is STOPPED:
                    self.release()  # nothing was done for it: it stays in flight and comes back
                    return
                if verdict is not ALLOW:
                    self.settle_robots(request, verdict)
                    continue
                result = self.handler(request, frontier)
                if inspect.isawaitable(result):
                    if inspect.iscoroutine(result):
                        result.close()
                    raise TypeError("the handler returned an awaitable: make it an async def function")
            except Exception as exc:  # any error of the handler is retried, then recorded
                error = exc
            if self.hard.is_set():
                return  # left in flight: the frontier gives it back
            self.settle(request, error)


def _check(name: str, value: Any, *, whole: bool = False, least: float = 0.0, none: bool = True) -> None:
    check_argument("crawl", name, value, whole=whole, least=least, none=none)


def crawl(
    frontier: FrontierProtocol,
    handler: Callable[[Request, Any], Any] | Callable[[Request, Any], Awaitable[Any]],
    *,
    workers: int = 8,
    duration: float | None = None,
    max_requests: int | None = None,
    every: float | None = None,
    times: int = 1,
    retries: int = 3,
    backoff: float = 1.0,
    progress: bool | None = None,
    classify: Classify | None = None,
    host_errors: int | None = 5,
    host_backoff: float = 60.0,
    host_backoff_max: float = 3600.0,
    robots: bool = False,
    user_agent: str | None = None,
    robots_ttl: float = 86400.0,
    fetch_robots: Fetch | None = None,
    robots_timeout: float = DEFAULT_TIMEOUT,
    grace: float | None = 10.0,
) -> CrawlStats:
    """Run ``handler(request, frontier)`` over the frontier's requests on ``workers`` threads
    (or asyncio tasks, when ``handler`` is a coroutine function), until the crawl is finished.

    A handler that returns acknowledges its request (``done``), unless it called
    ``frontier.retry`` or ``frontier.done(..., refetch_after=...)`` itself. One that raises
    ``PermanentError`` has its request recorded as failed at once. One that raises anything
    else is retried through the frontier (so politeness and crash safety hold) after ``backoff``
    seconds, doubled each attempt, up to ``retries`` times; then the request is recorded as
    failed with the error text (``frontier.failed()``, ``diskfrontier failed JOBDIR``).
    ``classify(request, error)`` may say instead: "retry", "fail", "backoff" or None (see
    ``diskfrontier.run.failurekinds``).

    Failing hosts: each retried error (and each "backoff") counts against the request's host;
    after ``host_errors`` in a row (None: never; a "backoff": at once) the host is blocked for
    ``host_backoff`` seconds, doubled for each further failure, at most ``host_backoff_max``; a
    done of any of its requests ends the streak (``frontier.host_failed``).

    ``robots=True``: each site's (origin's) robots.txt is fetched once before its first request
    (by ``fetch_robots(url, user_agent) -> (status, body)``, default urllib), kept in the frontier
    (fetched again after ``robots_ttl`` seconds) and obeyed for ``user_agent``: a disallowed
    request is recorded as failed (``robots.txt``), its Crawl-delay becomes the host's delay
    (never below the frontier's), a 4xx allows all, a 5xx or no answer within
    ``robots_timeout`` seconds (the whole fetch) holds that site back and the request waits for
    it (``diskfrontier.run.robots``).

    A run stops when the crawl is finished, after ``duration`` seconds, after
    ``max_requests`` requests, or on SIGINT or SIGTERM: no new request is taken, a worker
    waiting for a robots.txt fetch leaves at once, and the handlers under way are given
    ``grace`` seconds to finish (None: as long as they take); then the run returns, leaving
    them behind (their threads go on; their requests stay in flight, are never acknowledged by
    the run and come back; ``abandoned`` counts them). A second Ctrl-C leaves at once (the
    requests in hand stay in flight and come back; nothing is lost). With ``every`` (seconds) and ``times``, a run
    starts every ``every`` seconds, ``times`` runs (a signal ends them all), each resuming
    the same frontier. Returns the runs' stats. ``progress``: a status line on stderr (the
    default: when stderr is a terminal). Logs under the ``diskfrontier`` logger.
    """
    _check("workers", workers, whole=True, least=1, none=False)
    _check("duration", duration)
    _check("max_requests", max_requests, whole=True, least=1)
    _check("every", every)
    _check("times", times, whole=True, least=1, none=False)
    _check("retries", retries, whole=True, none=False)
    _check("backoff", backoff, none=False)
    _check("grace", grace)
    check_policy("crawl", classify, host_errors, host_backoff, host_backoff_max)
    if not callable(handler):
        raise TypeError(f"crawl(): handler must be callable, got {type(handler).__name__}")
    policy = RetryPolicy(retries, backoff, classify, host_errors, host_backoff, host_backoff_max)
    rules = robots_rules("crawl", frontier, robots, user_agent, robots_ttl, fetch_robots, policy, robots_timeout)
    is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        type(handler).__call__)  # an object with an async __call__
    _refuse_a_running_loop()
    show = sys.stderr.isatty() if progress is None else progress
    result = CrawlStats()
    first = time.monotonic()
    for number in range(times):
        if number:
            start_at = first + number * (every or 0.0)
            wait = start_at - time.monotonic()
            if wait < 0 and every:
                log.warning("run %d starts %.1fs late: the previous run took longer than every=%gs",
                            number + 1, -wait, every)
            if wait > 0 and _sleep_unless_signalled(wait):
                break
        run = _Run(frontier, handler, policy, duration, max_requests, rules, grace)
        log.info("run %d of %d: %d %s", number + 1, times, workers, "tasks" if is_async else "threads")
        _run_once(run, workers, is_async, show)
        result.runs.append(run.stats)
        stats = run.stats
        log.info("run %d ended (%s): %d handled, %d done, %d retried, %d failed (%d at once), %d host blocks, "
                 "%.1f a second", number + 1, stats.stopped_by, stats.handled, stats.done, stats.retried,
                 stats.failed, stats.failed_at_once, stats.host_blocks, stats.rate)
        if stats.stopped_by in ("SIGINT", "SIGTERM", "interrupted") or stats.stopped_by.startswith("error"):
            break
    return result


def _refuse_a_running_loop() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # plain code: no loop runs in this thread
    raise RuntimeError("crawl() was called inside a running event loop, which it would block for the "
                       "whole crawl: use 'await acrawl(frontier, handler, ...)' (from diskfrontier import "
                       "acrawl), or run crawl() in a thread: 'await asyncio.to_thread(crawl, ...)'")


def _sleep_unless_signalled(seconds: float) -> bool:
    """Sleep between runs; True if SIGINT or SIGTERM came (the remaining runs are cancelled)."""
    came = threading.Event()
    with _Signals(lambda name: came.set(), lambda: came.set()):
        came.wait(seconds)
    return came.is_set()


def _run_once(run: _Run, workers: int, is_async: bool, show: bool) -> None:
    status = StatusLine(run) if show else None
    with _Signals(run.signalled, run.signalled_again):
        if is_async:
            threads = [threading.Thread(target=_run_loop, args=(run, workers), name="diskfrontier-loop", daemon=True)]
        else:
            threads = [threading.Thread(target=run.worker, name=f"diskfrontier-worker-{n}", daemon=True)
                       for n in range(workers)]
        for thread in threads:
            thread.start()
        _watch(run, threads, run.tasks_over if is_async else None)
        if is_async and run.hard.is_set():
            run.tasks_over.wait(_LOOP_LEAVE)  # the loop cancels its tasks and closes its AsyncFrontier
    run.seal()
    if status is not None:
        status.close()
    run.stats.ended = time.time()
    if run.errors:
        raise run.errors[0]


def _watch(run: _Run, threads: list[threading.Thread], over: threading.Event | None) -> None:
    """Wait for the run's threads (or until ``over`` is set), stopping the run at its duration; return when
    they have ended, at a second Ctrl-C, or when the handlers' grace after a stop is over (they are left
    behind)."""
    while True:
        alive = [thread for thread in threads if thread.is_alive()]
        if not alive or run.hard.is_set() or (over is not None and over.is_set()):
            return
        run.check_deadline()
        if run.grace_over():
            run.abandon()
            return
        alive[0].join(_TICK)


def _run_loop(run: _Run, workers: int) -> None:
    """The async handlers' loop, in a thread of its own, so that a stop need not wait for the loop."""
    try:
        asyncio.run(_run_tasks(run, workers))
    except BaseException as exc:  # raised again by crawl(), in the caller's thread
        run.errors.append(exc)
        run.tasks_over.set()


async def _run_tasks(run: _Run, workers: int) -> None:
    """The async handlers as tasks of a loop of the run's own; they get the frontier itself, as a
    thread's handler does, and the run's own calls go through an ``AsyncFrontier``."""
    from ..access.asyncfrontier import AsyncFrontier
    from .acrawl import run_tasks

    try:
        async with AsyncFrontier(run.frontier, threads=min(workers, 8)) as wrapped:
            await run_tasks(run, wrapped, lambda request: run.handler(request, run.frontier), workers)
    except BaseException as exc:  # raised again by crawl(), in the caller's thread
        run.errors.append(exc)
    finally:
        # What asyncio.run() does after this (wait for tasks left running: an async fetch_robots given up
        # on, a handler that swallowed its cancellation) is not the run's to wait for.
        run.tasks_over.set()


class _Signals:
    """SIGINT and SIGTERM call ``first(name)`` once; a second SIGINT calls ``second()``. The
    previous handlers come back at exit. Only the main thread can take signals: elsewhere
    this does nothing."""

    def __init__(self, first: Callable[[str], None], second: Callable[[], None]) -> None:
        self.first, self.second = first, second
        self.saved: dict[int, Any] = {}
        self.seen = False

    def _handle(self, signum: int, frame: Any) -> None:
        if self.seen and signum == signal.SIGINT:
            self.second()
            return
        self.seen = True
        self.first(signal.Signals(signum).name)

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self.saved[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self.saved.items():
            signal.signal(signum, handler)


__all__ = ["CrawlStats", "RunStats", "crawl"]
