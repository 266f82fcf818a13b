"""What a worker does, written once for ``crawl()``'s threads and for the tasks of ``acrawl()`` (and of
``crawl()`` with a coroutine handler).

A worker takes a request from the frontier, asks robots.txt about it, calls the handler and settles the
outcome with the run's policy, until its run says stop. ``work`` is that loop, as a coroutine that makes
each of those calls through a port: ``Blocking`` for a thread, whose calls block and return, so that the
coroutine never suspends and ``drive`` runs it to its end in the thread that calls it; ``Awaiting`` for a
task, whose calls await an ``AsyncFrontier`` (the blocking ones on its thread pool) and the handler.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from ..core.errors import FrontierError
from ..request.model import Request
from .robots import ALLOW, STOPPED, RobotsRules, Verdict
from .state import RunState

if TYPE_CHECKING:
    from ..access.asyncfrontier import AsyncFrontier

log = logging.getLogger("diskfrontier")

__all__ = ["Awaiting", "Blocking", "Port", "drive", "is_async_handler", "work"]

IDLE_POLL = 0.05  # how long a worker waits for a request before it looks at the run's state again


class Port(Protocol):
    """How a worker makes its calls: the only part of it that differs between a thread and a task."""

    async def pop(self) -> Request | None:
        """The next request, waiting at most ``IDLE_POLL`` seconds for one."""

    async def blocking(self, function: Callable[..., Any], *args: Any) -> None:
        """``function(*args)``, one of the run's that blocks (it calls the frontier)."""

    async def verdict(self, robots: RobotsRules, request: Request) -> Verdict:
        """What robots.txt says of ``request``, fetching it first if need be; ``STOPPED`` if the run stops
        meanwhile."""

    async def handle(self, request: Request) -> object:
        """Call the handler on ``request``; what it returned."""

    def cancelled(self) -> bool:
        """A ``CancelledError`` came out of the handler: True if the worker itself is being cancelled (it
        leaves), False if it is the handler's own (an error like any other)."""


async def work(state: RunState, port: Port) -> None:
    """A worker: take, check and handle requests, and settle each, until ``state`` says stop."""
    while not state.stop.is_set():
        if not state.reserve():
            return
        try:
            request = await port.pop()
        except FrontierError as exc:
            state.unreserve()
            if state.hard.is_set():
                return  # the run was left at once and the frontier closed under this worker: not an error
            log.error("pop failed: %s", exc)
            state.halt(f"error: {exc}")
            return
        if request is None:
            if state.hard.is_set():
                return
            state.unreserve()
            await port.blocking(state.idle)
            continue
        state.took()
        if state.hard.is_set():
            return  # left at once: a request popped now stays in flight and comes back
        if not await _one(state, port, request):
            return


async def _one(state: RunState, port: Port, request: Request) -> bool:
    """Robots.txt, the handler and the settling of one request in hand; False if the worker is to leave
    it (the run stopped), in flight."""
    error: BaseException | None = None
    result: object = None
    verdict: Verdict = ALLOW
    seconds: float | None = None
    try:
        if state.robots is not None:  # fetches the site's robots.txt the first time, unless the run stops
            verdict = await port.verdict(state.robots, request)
        if verdict is STOPPED:
            state.release()  # nothing was done for it: it stays in flight and comes back
            return False
        if verdict is not ALLOW:
            await port.blocking(state.settle_robots, request, verdict)
            return True
        started = time.perf_counter()
        try:
            result = await port.handle(request)
        finally:
            seconds = time.perf_counter() - started
    except Exception as exc:  # any error of the handler is retried, then recorded
        error = exc
    except asyncio.CancelledError as exc:
        if state.hard.is_set() or port.cancelled():
            raise
        error = exc  # the handler's own (something it awaited was cancelled): an error like any other
    if state.hard.is_set():
        return False  # left in flight: the frontier gives it back
    await port.blocking(state.settle, request, error, result, seconds)
    return True


def drive(worker: Coroutine[Any, Any, None]) -> None:
    """Run a worker whose port is ``Blocking`` to its end, in this thread."""
    try:
        worker.send(None)
    except StopIteration:
        return
    worker.close()
    raise RuntimeError("a worker of blocking calls waited for an event loop")


class Blocking:
    """The port of a worker thread: ``handler(request, frontier)`` and the frontier's calls, made here."""

    def __init__(self, state: RunState, handler: Callable[[Request, Any], Any]) -> None:
        self.state, self.handler = state, handler

    async def pop(self) -> Request | None:
        return self.state.frontier.pop(timeout=IDLE_POLL)

    async def blocking(self, function: Callable[..., Any], *args: Any) -> None:
        function(*args)

    async def verdict(self, robots: RobotsRules, request: Request) -> Verdict:
        return robots.check(request, self.state.stop)

    async def handle(self, request: Request) -> object:
        result = self.handler(request, self.state.frontier)
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()
            raise TypeError("the handler returned an awaitable: make it an async def function")
        return result

    def cancelled(self) -> bool:
        return True  # no task here: a CancelledError a handler raises leaves its thread, as any BaseException


class Awaiting:
    """The port of a task: ``call(request)`` awaited, and the frontier's calls through ``frontier``, so that
    the loop is never blocked."""

    def __init__(self, state: RunState, frontier: AsyncFrontier, call: Callable[[Request], Awaitable[Any]]) -> None:
        self.state, self.frontier, self.call = state, frontier, call

    async def pop(self) -> Request | None:
        return await self.frontier.pop(timeout=IDLE_POLL)

    async def blocking(self, function: Callable[..., Any], *args: Any) -> None:
        await self.frontier.call(function, *args)

    async def verdict(self, robots: RobotsRules, request: Request) -> Verdict:
        return await robots.acheck(request, self.frontier.call, self.state.stop)

    async def handle(self, request: Request) -> object:
        return await self.call(request)

    def cancelled(self) -> bool:
        """True if the running task was asked to stop (Python 3.10 cannot tell: then always True)."""
        task = asyncio.current_task()
        cancelling = getattr(task, "cancelling", None)
        return cancelling is None or cancelling() > 0


def is_async_handler(handler: Any) -> bool:
    """True for a coroutine function, or an object with an async ``__call__``."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(type(handler).__call__)
