"""``acrawl()``: ``crawl()`` for asyncio code, run as tasks inside the caller's event loop.

The run is ``crawl()``'s, where ``await`` is: the same options (``RunOptions``), worker step
(``step.work``, through an ``Awaiting`` port), ``RunState`` and ``RetryPolicy``, signal handling
(``StopSignals``, installed on the loop), status line and log lines. Its frontier calls go through an
``AsyncFrontier``, so that the loop is never blocked; deciding what becomes of a request after its
handler (the frontier's ``done``, ``retry`` or ``fail``) is one hop to the ``AsyncFrontier``'s
thread pool. While it runs, SIGINT and SIGTERM are the run's (``loop.add_signal_handler``); the
caller's handlers come back at the end.

A stop is bounded as in ``crawl()``: a task waiting for a robots.txt fetch leaves at once (the
fetch runs in a thread or a task of its own, not waited for), and the handlers still running
``grace`` seconds after the stop are cancelled; a handler that does not end when cancelled (it
swallows the cancellation) is left running in the loop after a second (``workers._CANCEL_WAIT``).
Either way its request stays in flight and comes back.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from ..access.asyncfrontier import AsyncFrontier
from ..contract.protocol import FrontierProtocol
from .options import RunKeywords, options_of, retry_policy, robots_rules
from .signals import StopSignals
from .state import RunState
from .stats import CrawlStats, log_ended
from .status import status_line
from .step import is_async_handler
from .workers import run_tasks

if sys.version_info >= (3, 11):
    from typing import Unpack
elif TYPE_CHECKING:  # the annotations of ``**options`` are read only by type checkers before 3.11
    from typing_extensions import Unpack

__all__ = ["acrawl"]

log = logging.getLogger("diskfrontier")


async def acrawl(
    frontier: AsyncFrontier | FrontierProtocol,
    handler: Callable[..., Awaitable[Any]],
    *,
    setup: Callable[[], AbstractAsyncContextManager[Any]] | None = None,
    **options: Unpack[RunKeywords],
) -> CrawlStats:
    """Run ``await handler(request, frontier)`` over the frontier's requests as ``workers`` tasks
    of the running event loop, until the crawl is finished; the loop's other tasks run meanwhile.

    ``options``: those of ``crawl()``, the keyword arguments of ``RunOptions``, which says what
    each one means; ``acrawl()`` has no ``every`` and ``times``.

    ``frontier``: an ``AsyncFrontier`` (the handler gets it, to ``await frontier.push_many(...)``),
    or a frontier of either backend, which is wrapped in one for the run (and left open). Every
    frontier call is made off the loop.

    ``setup``: a function returning an async context manager (``setup=httpx.AsyncClient``), entered
    before the first request and exited after the last one, on Ctrl-C and on errors too; what it
    gives is passed to the handler as a third argument: ``await handler(request, frontier, client)``.

    Stops, retries, failing hosts, robots.txt and stats are those of ``crawl()``. A run stops when
    the crawl is finished or stalled, after ``duration`` seconds or ``max_requests`` requests, or on
    SIGINT or SIGTERM (taken while the run lasts, in the main thread): the tasks take no new
    request, a task waiting for a robots.txt fetch leaves at once, and the handlers under way
    are given ``grace`` seconds (None: as long as they take) to finish, then cancelled. A second
    Ctrl-C cancels the handlers at once. The requests of handlers cancelled (``abandoned``) stay
    in flight and come back (a job directory at close or next open, Redis at close or when their
    leases run out). Returns a ``CrawlStats`` of one run.
    """
    settings = options_of("acrawl", options)
    if not is_async_handler(handler):
        raise TypeError("acrawl(): handler must be an async def function (or an object with an async "
                        f"__call__), got {handler!r}; for a plain function use crawl()")
    if setup is not None and not callable(setup):
        raise TypeError(f"acrawl(): setup must be a function returning an async context manager, got {setup!r}")
    borrowed = not isinstance(frontier, AsyncFrontier)
    wrapped = AsyncFrontier(frontier, threads=min(settings.workers, 8)) if not isinstance(frontier, AsyncFrontier) \
        else frontier
    policy = retry_policy(settings)
    rules = robots_rules(settings, wrapped.frontier)
    state = RunState(wrapped.frontier, policy, settings.duration, settings.max_requests, rules, settings.grace)
    status = status_line(state, settings.progress, settings.progress_every)
    log.info("acrawl: %d tasks", settings.workers)
    loop = asyncio.get_running_loop()
    try:
        with StopSignals(state.signalled, state.signalled_again).on_loop(loop):
            if setup is None:
                await run_tasks(state, wrapped, lambda request: handler(request, wrapped), settings.workers)
            else:
                async with setup() as value:
                    await run_tasks(state, wrapped, lambda request: handler(request, wrapped, value),
                                    settings.workers)
    finally:
        state.end()
        if status is not None:
            await loop.run_in_executor(None, status.close)
        if borrowed:
            await wrapped.close()  # its threads only: the frontier stays the caller's
    log_ended("acrawl", state.stats)
    return CrawlStats([state.stats])
