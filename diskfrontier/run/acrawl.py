"""``acrawl()``: ``crawl()`` for asyncio code, run as tasks inside the caller's event loop.

The run decides as ``crawl()`` does, through the same ``RunState`` and ``RetryPolicy``
(``runpolicy``): the same stops, retries with backoff and stats. Its frontier calls go through an
``AsyncFrontier``, so that the loop is never blocked; deciding what becomes of a request after its
handler (the frontier's ``done``, ``retry`` or ``fail``) is one hop to the ``AsyncFrontier``'s
thread pool. While it runs, SIGINT and SIGTERM are the run's (``loop.add_signal_handler``); the
caller's handlers come back at the end.

A stop is bounded as in ``crawl()``: a task waiting for a robots.txt fetch leaves at once (the
fetch runs in a thread or a task of its own, not waited for), and the handlers still running
``grace`` seconds after the stop are cancelled; a handler that does not end when cancelled (it
swallows the cancellation) is left running in the loop after ``_CANCEL_WAIT`` seconds. Either
way its request stays in flight and comes back.
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
from contextlib import AbstractAsyncContextManager
from typing import Any

from ..access.asyncfrontier import AsyncFrontier
from ..contract.protocol import FrontierProtocol
from ..core.errors import FrontierError
from ..request.model import Request
from .failurekinds import Classify
from .policy import CrawlStats, RetryPolicy, RunState, StatusLine, check_argument, check_policy, robots_rules
from .robots import ALLOW, DEFAULT_TIMEOUT, STOPPED, Fetch, Verdict

__all__ = ["acrawl", "run_tasks"]

log = logging.getLogger("diskfrontier")
_IDLE_POLL = 0.05  # how long a task waits for a request before it looks at the run's state again
_TICK = 0.05  # how often the run looks at its duration and at a second Ctrl-C
_CANCEL_WAIT = 1.0  # how long cancelled handlers are waited for before they are left running


async def acrawl(
    frontier: AsyncFrontier | FrontierProtocol,
    handler: Callable[..., Awaitable[Any]],
    *,
    workers: int = 8,
    duration: float | None = None,
    max_requests: int | None = None,
    retries: int = 3,
    backoff: float = 1.0,
    progress: bool | None = None,
    setup: Callable[[], AbstractAsyncContextManager[Any]] | None = None,
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
    """Run ``await handler(request, frontier)`` over the frontier's requests as ``workers`` tasks
    of the running event loop, until the crawl is finished; the loop's other tasks run meanwhile.

    ``frontier``: an ``AsyncFrontier`` (the handler gets it, to ``await frontier.push_many(...)``),
    or a frontier of either backend, which is wrapped in one for the run (and left open). Every
    frontier call is made off the loop.

    ``setup``: a function returning an async context manager (``setup=httpx.AsyncClient``), entered
    before the first request and exited after the last one, on Ctrl-C and on errors too; what it
    gives is passed to the handler as a third argument: ``await handler(request, frontier, client)``.

    Stops, retries and stats are those of ``crawl()``: a handler that returns acknowledges its
    request (unless it finished it itself); one that raises is retried after ``backoff`` seconds,
    doubled each attempt, up to ``retries`` times, then recorded as failed. A run stops when the
    crawl is finished or stalled, after ``duration`` seconds or ``max_requests`` requests, or on
    SIGINT or SIGTERM (taken while the run lasts, in the main thread): the tasks take no new
    request, a task waiting for a robots.txt fetch leaves at once, and the handlers under way
    are given ``grace`` seconds (None: as long as they take) to finish, then cancelled. A second
    Ctrl-C cancels the handlers at once. The requests of handlers cancelled (``abandoned``) stay
    in flight and come back (a job directory at close or next open, Redis at close or when their
    leases run out). ``progress``: a status line on stderr (default: when it is a terminal).
    Returns a ``CrawlStats`` of one run.

    Failure kinds (``PermanentError``, ``classify``), failing hosts (``host_errors``,
    ``host_backoff``, ``host_backoff_max``) and robots.txt (``robots``, ``user_agent``,
    ``robots_ttl``, ``fetch_robots``, ``robots_timeout``) are those of ``crawl()``; here
    ``fetch_robots`` may be a coroutine function (``async def fetch(url, user_agent) -> (status,
    body)``, with an httpx client for instance), run as a task and cancelled if it outlasts
    ``robots_timeout``; a plain one, and the default (urllib), run in a thread of their own.
    """
    _check_arguments("acrawl", workers, duration, max_requests, retries, backoff)
    check_argument("acrawl", "grace", grace)
    check_policy("acrawl", classify, host_errors, host_backoff, host_backoff_max)
    if not _is_async(handler):
        raise TypeError("acrawl(): handler must be an async def function (or an object with an async "
                        f"__call__), got {handler!r}; for a plain function use crawl()")
    if setup is not None and not callable(setup):
        raise TypeError(f"acrawl(): setup must be a function returning an async context manager, got {setup!r}")
    borrowed = not isinstance(frontier, AsyncFrontier)
    wrapped = AsyncFrontier(frontier, threads=min(workers, 8)) if not isinstance(frontier, AsyncFrontier) \
        else frontier
    policy = RetryPolicy(retries, backoff, classify, host_errors, host_backoff, host_backoff_max)
    rules = robots_rules("acrawl", wrapped.frontier, robots, user_agent, robots_ttl, fetch_robots, policy,
                         robots_timeout)
    state = RunState(wrapped.frontier, policy, duration, max_requests, rules, grace)
    show = sys.stderr.isatty() if progress is None else progress
    status = StatusLine(state) if show else None
    log.info("acrawl: %d tasks", workers)
    try:
        with _LoopSignals(asyncio.get_running_loop(), state):
            if setup is None:
                await run_tasks(state, wrapped, lambda request: handler(request, wrapped), workers)
            else:
                async with setup() as value:
                    await run_tasks(state, wrapped, lambda request: handler(request, wrapped, value), workers)
    finally:
        state.stats.ended = time.time()
        if status is not None:
            await asyncio.get_running_loop().run_in_executor(None, status.close)
        if borrowed:
            await wrapped.close()  # its threads only: the frontier stays the caller's
    stats = state.stats
    log.info("acrawl ended (%s): %d handled, %d done, %d retried, %d failed (%d at once), %d host blocks, "
             "%.1f a second", stats.stopped_by, stats.handled, stats.done, stats.retried, stats.failed,
             stats.failed_at_once, stats.host_blocks, stats.rate)
    return CrawlStats([stats])


async def run_tasks(state: RunState, frontier: AsyncFrontier, call: Callable[[Request], Awaitable[Any]],
                    workers: int) -> None:
    """Run ``workers`` tasks taking requests from ``frontier`` and calling ``call(request)`` on each,
    until ``state`` says stop; a hard stop, or the end of the handlers' grace after a stop, cancels
    them. ``crawl()`` runs its async handlers through this too. If the task running this is
    cancelled, the tasks are cancelled with it (their requests stay in flight)."""
    tasks = [asyncio.ensure_future(_task(state, frontier, call)) for _ in range(workers)]
    try:
        while not all(task.done() for task in tasks):
            if state.hard.is_set():
                break
            state.check_deadline()
            if state.grace_over():
                state.abandon()
                break
            await asyncio.wait(tasks, timeout=_TICK)
    finally:
        await _cancel(tasks)
        state.seal()
    for task in tasks:  # a task's own error (not a handler's: those are retried, then recorded)
        error = None if not task.done() or task.cancelled() else task.exception()
        if isinstance(error, Exception):
            raise error


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the tasks still running and wait for them, at most ``_CANCEL_WAIT`` seconds: one that
    does not end (its handler swallows the cancellation) is left running in the loop."""
    running = [task for task in tasks if not task.done()]
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running, timeout=_CANCEL_WAIT)
    stuck = [task for task in running if not task.done()]
    for task in stuck:
        task.add_done_callback(_forget)
    if stuck:
        log.warning("%d handlers did not end when cancelled: left running; their requests stay in flight", len(stuck))


def _forget(task: asyncio.Task[None]) -> None:
    """A task left running has ended: whatever it raised is not this run's any more."""
    if not task.cancelled():
        task.exception()


async def _task(state: RunState, frontier: AsyncFrontier, call: Callable[[Request], Awaitable[Any]]) -> None:
    while not state.stop.is_set():
        if not state.reserve():
            return
        try:
            request = await frontier.pop(timeout=_IDLE_POLL)
        except FrontierError as exc:
            state.unreserve()
            if state.hard.is_set():
                return  # the run was left at once and the frontier closed under it: not an error
            log.error("pop failed: %s", exc)
            state.halt(f"error: {exc}")
            return
        if request is None:
            if state.hard.is_set():
                return
            state.unreserve()
            await frontier.call(state.idle)
            continue
        state.took()
        if state.hard.is_set():
            return  # left at once: a request popped now stays in flight and comes back
        error: BaseException | None = None
        verdict: Verdict = ALLOW
        try:
            if state.robots is not None:
                verdict = await state.robots.acheck(request, frontier.call, state.stop)
            if verdict is STOPPED:
                state.release()  # nothing was done for it: it stays in flight and comes back
                return
            if verdict is not ALLOW:
                await frontier.call(state.settle_robots, request, verdict)
                continue
            await call(request)
        except Exception as exc:  # any error of the handler is retried, then recorded
            error = exc
        except asyncio.CancelledError as exc:
            if state.hard.is_set() or _being_cancelled():
                raise
            error = exc  # the handler's own (something it awaited was cancelled): an error like any other
        if state.hard.is_set():
            return  # left in flight: the frontier gives it back
        await frontier.call(state.settle, request, error)


def _being_cancelled() -> bool:
    """True if the running task was asked to stop (Python 3.10 cannot tell: then always True)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return cancelling is None or cancelling() > 0


def _is_async(handler: Any) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(type(handler).__call__)


def _check_arguments(function: str, workers: Any, duration: Any, max_requests: Any, retries: Any,
                     backoff: Any) -> None:
    check_argument(function, "workers", workers, whole=True, least=1, none=False)
    check_argument(function, "duration", duration)
    check_argument(function, "max_requests", max_requests, whole=True, least=1)
    check_argument(function, "retries", retries, whole=True, none=False)
    check_argument(function, "backoff", backoff, none=False)


class _LoopSignals:
    """SIGINT and SIGTERM handled on ``loop`` while the run lasts: the first one stops the run taking
    requests, a second SIGINT leaves at once. The caller's handlers (a ``signal.signal`` one or the
    loop's own) and the wake-up fd come back at exit. Outside the main thread this does nothing."""

    _SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, loop: asyncio.AbstractEventLoop, state: RunState) -> None:
        self.loop, self.state = loop, state
        self.saved: dict[int, tuple[Any, Any]] = {}
        self.wakeup = -1
        self.seen = False

    def _handle(self, signum: int) -> None:
        if self.seen and signum == signal.SIGINT:
            self.state.signalled_again()
            return
        self.seen = True
        self.state.signalled(signal.Signals(signum).name)

    def __enter__(self) -> _LoopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        self.wakeup = signal.set_wakeup_fd(-1)
        signal.set_wakeup_fd(self.wakeup)
        loop_handlers = getattr(self.loop, "_signal_handlers", {})  # the loop's own, to put back
        for signum in self._SIGNALS:
            previous, loop_handle = signal.getsignal(signum), loop_handlers.get(signum)
            try:
                self.loop.add_signal_handler(signum, self._handle, signum)
            except (NotImplementedError, RuntimeError, ValueError):  # a loop without signals (Windows)
                continue
            self.saved[signum] = (previous, loop_handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, (previous, loop_handle) in self.saved.items():
            self.loop.remove_signal_handler(signum)
            if loop_handle is not None:
                self.loop.add_signal_handler(signum, loop_handle._callback, *loop_handle._args)
            elif previous is not None:
                signal.signal(signum, previous)
        if self.saved and not getattr(self.loop, "_signal_handlers", None) and self.wakeup != -1:
            signal.set_wakeup_fd(self.wakeup)
        self.saved.clear()
