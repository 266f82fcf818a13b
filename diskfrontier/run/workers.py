"""A run's workers, as threads or as tasks, and the wait for them that ends the run.

Both wait the same way (``RunState.watch``): until the workers have ended, or the run was left at once (a
second Ctrl-C), or the handlers' grace after a stop is over. Then threads still running are left behind
(a thread cannot be stopped from outside) and tasks still running are cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..request.model import Request
from .state import RunState
from .step import Awaiting, Blocking, drive, work

if TYPE_CHECKING:
    from ..access.asyncfrontier import AsyncFrontier

log = logging.getLogger("diskfrontier")

__all__ = ["run_tasks", "run_threads", "wait_for_threads"]

_TICK = 0.05  # how often the wait for the workers looks at the run's duration, grace and second Ctrl-C
_CANCEL_WAIT = 1.0  # how long cancelled handlers are waited for before they are left running


def run_threads(state: RunState, handler: Callable[[Request, Any], Any], workers: int) -> None:
    """Run ``workers`` threads calling ``handler(request, frontier)`` until the run ends (see the module)."""
    threads = [threading.Thread(target=lambda: drive(work(state, Blocking(state, handler))),
                                name=f"diskfrontier-worker-{n}", daemon=True) for n in range(workers)]
    for thread in threads:
        thread.start()
    wait_for_threads(state, threads)


def wait_for_threads(state: RunState, threads: list[threading.Thread], over: threading.Event | None = None) -> None:
    """Wait for ``threads`` to end, or until ``over`` is set, or ``state.watch()`` says the waiting is over."""
    while True:
        alive = [thread for thread in threads if thread.is_alive()]
        if not alive or (over is not None and over.is_set()) or state.watch():
            return
        alive[0].join(_TICK)


async def run_tasks(state: RunState, frontier: AsyncFrontier, call: Callable[[Request], Awaitable[Any]],
                    workers: int) -> None:
    """Run ``workers`` tasks taking requests from ``frontier`` and calling ``call(request)`` on each, until the
    run ends (see the module); then cancel those still running. If the task running this is cancelled, the
    tasks are cancelled with it (their requests stay in flight). Raises what a task itself raised (not a
    handler: its errors are retried, then recorded)."""
    tasks = [asyncio.ensure_future(work(state, Awaiting(state, frontier, call))) for _ in range(workers)]
    try:
        while not all(task.done() for task in tasks) and not state.watch():
            await asyncio.wait(tasks, timeout=_TICK)
    finally:
        await _cancel(tasks)
        state.seal()
    for task in tasks:
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
