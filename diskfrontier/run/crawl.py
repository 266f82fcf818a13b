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
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..contract.protocol import FrontierProtocol
from ..request.model import Request
from .options import RunKeywords, RunOptions, check_argument, options_of, retry_policy, robots_rules
from .policy import RetryPolicy
from .robots import RobotsRules
from .signals import StopSignals
from .state import RunState
from .stats import CrawlStats, RunStats, log_ended
from .status import status_line
from .step import is_async_handler
from .workers import run_tasks, run_threads, wait_for_threads

if sys.version_info >= (3, 11):
    from typing import Unpack
elif TYPE_CHECKING:  # the annotations of ``**options`` are read only by type checkers before 3.11
    from typing_extensions import Unpack

log = logging.getLogger("diskfrontier")
_LOOP_LEAVE = 5.0  # how long a run left at once waits for its loop to cancel its tasks and close


CrawlFrontier = FrontierProtocol  # what crawl() needs of a frontier: the contract (an older name)


Handler = Callable[[Request, Any], Any]


def crawl(
    frontier: FrontierProtocol,
    handler: Callable[[Request, Any], Any] | Callable[[Request, Any], Awaitable[Any]],
    *,
    every: float | None = None,
    times: int = 1,
    **options: Unpack[RunKeywords],
) -> CrawlStats:
    """Run ``handler(request, frontier)`` over the frontier's requests on ``workers`` threads
    (or asyncio tasks, when ``handler`` is a coroutine function), until the crawl is finished.

    ``options``: ``workers``, ``duration``, ``max_requests``, ``retries``, ``backoff``, ``grace``,
    ``robots`` and the others of ``RunOptions``, which gives each one's meaning and default;
    ``acrawl()`` takes the same.

    A handler that returns acknowledges its request (``done``), unless it called
    ``frontier.retry`` or ``frontier.done(..., refetch_after=...)`` itself. One that raises
    ``PermanentError`` has its request recorded as failed at once. One that raises anything
    else is retried through the frontier (so politeness and crash safety hold) after ``backoff``
    seconds, doubled each attempt, up to ``retries`` times; then the request is recorded as
    failed with the error text (``frontier.failed()``, ``diskfrontier failed JOBDIR``).
    ``classify(request, error)`` may say instead: "retry", "fail", "backoff" or None (see
    ``diskfrontier.run.failurekinds``). Each retried error (and each "backoff") counts against
    the request's host, blocked after ``host_errors`` in a row (``frontier.host_failed``).
    With ``robots=True``, each site's robots.txt is fetched once, kept in the frontier and
    obeyed for ``user_agent`` (``diskfrontier.run.robots``).

    A run stops when the crawl is finished, after ``duration`` seconds, after
    ``max_requests`` requests, or on SIGINT or SIGTERM: no new request is taken, a worker
    waiting for a robots.txt fetch leaves at once, and the handlers under way are given
    ``grace`` seconds to finish (None: as long as they take); then the run returns, leaving
    them behind (their threads go on; their requests stay in flight, are never acknowledged by
    the run and come back; ``abandoned`` counts them). A second Ctrl-C leaves at once (the
    requests in hand stay in flight and come back; nothing is lost). With ``every`` (seconds) and ``times``, a run
    starts every ``every`` seconds, ``times`` runs (a signal ends them all), each resuming
    the same frontier. Returns the runs' stats. Logs under the ``diskfrontier`` logger.
    """
    check_argument("crawl", "every", every)
    check_argument("crawl", "times", times, whole=True, least=1, none=False)
    settings = options_of("crawl", options)
    if not callable(handler):
        raise TypeError(f"crawl(): handler must be callable, got {type(handler).__name__}")
    policy = retry_policy(settings)
    rules = robots_rules(settings, frontier)
    is_async = is_async_handler(handler)
    _refuse_a_running_loop()
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
        run = _run_once(frontier, handler, settings, policy, rules, is_async, f"run {number + 1} of {times}")
        result.runs.append(run.stats)
        log_ended(f"run {number + 1}", run.stats)
        if run.stats.stopped_by in ("SIGINT", "SIGTERM", "interrupted") or run.stats.stopped_by.startswith("error"):
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
    with StopSignals(lambda name: came.set(), came.set).in_main_thread():
        came.wait(seconds)
    return came.is_set()


def _run_once(frontier: FrontierProtocol, handler: Handler, options: RunOptions, policy: RetryPolicy,
              rules: RobotsRules | None, is_async: bool, name: str) -> RunState:
    run = RunState(frontier, policy, options.duration, options.max_requests, rules, options.grace)
    log.info("%s: %d %s", name, options.workers, "tasks" if is_async else "threads")
    status = status_line(run, options.progress, options.progress_every)
    try:
        with StopSignals(run.signalled, run.signalled_again).in_main_thread():
            if is_async:
                _run_on_a_loop(run, handler, options.workers)
            else:
                run_threads(run, handler, options.workers)
    finally:
        run.end()
        if status is not None:
            status.close()
    return run


def _run_on_a_loop(run: RunState, handler: Handler, workers: int) -> None:
    """Run the async handlers as tasks of a loop in a thread of its own, so that a stop need not wait for the
    loop (a handler may block it); raise what the loop raised."""
    over = threading.Event()  # the tasks have ended (their loop may linger)
    errors: list[BaseException] = []
    thread = threading.Thread(target=_run_loop, args=(run, handler, workers, over, errors),
                              name="diskfrontier-loop", daemon=True)
    thread.start()
    wait_for_threads(run, [thread], over)
    if run.hard.is_set():
        over.wait(_LOOP_LEAVE)  # the loop cancels its tasks and closes its AsyncFrontier
    if errors:
        raise errors[0]


def _run_loop(run: RunState, handler: Handler, workers: int, over: threading.Event,
              errors: list[BaseException]) -> None:
    try:
        asyncio.run(_run_tasks(run, handler, workers, over, errors))
    except BaseException as exc:  # raised again by crawl(), in the caller's thread
        errors.append(exc)
        over.set()


async def _run_tasks(run: RunState, handler: Handler, workers: int, over: threading.Event,
                     errors: list[BaseException]) -> None:
    """The async handlers as tasks of the loop; they get the frontier itself, as a thread's handler does,
    and the run's own calls go through an ``AsyncFrontier``."""
    from ..access.asyncfrontier import AsyncFrontier

    try:
        async with AsyncFrontier(run.frontier, threads=min(workers, 8)) as wrapped:
            await run_tasks(run, wrapped, lambda request: handler(request, run.frontier), workers)
    except BaseException as exc:  # raised again by crawl(), in the caller's thread
        errors.append(exc)
    finally:
        # What asyncio.run() does after this (wait for tasks left running: an async fetch_robots given up
        # on, a handler that swallowed its cancellation) is not the run's to wait for.
        over.set()


__all__ = ["CrawlStats", "RunStats", "crawl"]
