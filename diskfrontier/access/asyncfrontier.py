"""``AsyncFrontier``: any frontier (a job directory, or a crawl in Redis or PostgreSQL) for asyncio code.

Every call of the frontier runs on a small thread pool that the ``AsyncFrontier`` owns, never on
the event loop: a job directory's disk writes and a Redis round trip both leave the loop free.
The backends are thread-safe (``crawl()`` drives them from many threads), so the same frontier
object, with its one implementation of every atomic step (the job directory's journal writes,
the Redis backend's Lua scripts and shard routing), serves both worlds. A call costs one hop to a
pool thread and back, tens of microseconds; an asyncio Redis client would need every step written
again for ``redis.asyncio``, and kept in step with the blocking one.

``pop(timeout=t)`` does not hold a pool thread while it waits: it tries a pop that does not wait,
and between tries sleeps on the loop until the frontier's ``next_ready()`` time, a change made
through this ``AsyncFrontier`` (a push, done, retry, resume...) or a short poll for what other
processes do, whichever comes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..contract.checks import check_seconds
from ..contract.outcomes import Outcome
from ..contract.protocol import FrontierProtocol
from ..contract.values import Dropped, FailedRequest, HostInfo
from ..core.errors import FrontierClosed
from ..request.model import Request

__all__ = ["AsyncFrontier"]

T = TypeVar("T")

_POLL_MIN = 0.002  # the first wait of a pop that found nothing ready while next_ready() said now
_POLL_MAX = 0.1  # the longest a waiting pop sleeps before it looks again (for other processes' changes)


class AsyncFrontier:
    """A frontier for asyncio code: every method of the contract as a coroutine, run off the loop.

    ``AsyncFrontier(target, crawl=None, **options)`` opens the frontier at ``target`` when entered
    (``async with``) or at ``await open()``: a job directory's path, or a Redis or PostgreSQL URL with the
    crawl's name as ``crawl`` (the options are those of ``Frontier``, ``RedisFrontier`` or
    ``PostgresFrontier``); leaving the
    ``async with`` closes it. ``AsyncFrontier(frontier)`` wraps a frontier already open, which
    stays the caller's: closing the ``AsyncFrontier`` then only stops its threads.

    ``threads``: the size of its thread pool (calls beyond it wait their turn; a waiting ``pop``
    holds no thread). The wrapped frontier is ``.frontier``, for the rare call not wrapped here
    (``await af.call(af.frontier.method, ...)`` runs one off the loop).
    """

    def __init__(self, target: str | os.PathLike[str] | FrontierProtocol, crawl: str | None = None, *,
                 threads: int = 4, **options: Any) -> None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"AsyncFrontier(): threads must be a whole number of at least 1, got {threads!r}")
        self._frontier: FrontierProtocol | None = None
        self._target: str | os.PathLike[str] | None = None
        if isinstance(target, (str, os.PathLike)):
            self._target, self._crawl, self._options = target, crawl, options
            self.owns = True
        else:
            if crawl is not None or options:
                raise ValueError("AsyncFrontier(frontier) wraps an open frontier: it takes no crawl= or options")
            self._frontier = target
            self.owns = False  # the caller's: close() leaves it open
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="diskfrontier-async")
        self._changed: asyncio.Event | None = None
        self._closed = False

    # ------------------------------------------------------------------ plumbing
    @property
    def frontier(self) -> FrontierProtocol:
        """The frontier under this one (its blocking calls must not be made on the loop)."""
        if self._frontier is None:
            raise FrontierClosed("the AsyncFrontier is not open yet: use async with AsyncFrontier(...) "
                                 "or await frontier.open()")
        return self._frontier

    @property
    def order(self) -> str:
        """'lifo' or 'fifo', as the frontier was made."""
        return self.frontier.order

    async def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)`` on this frontier's thread pool; its result, or its error."""
        if self._closed:
            raise FrontierClosed("the AsyncFrontier is closed: open a new one")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(function, *args, **kwargs))

    def _poke(self) -> None:
        """Wake the pops waiting here: something changed that may make a request ready."""
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    # ------------------------------------------------------------------ lifetime
    async def open(self) -> AsyncFrontier:
        """Open the frontier (off the loop), if this ``AsyncFrontier`` was made from a target."""
        if self._frontier is None:
            from .targets import open_target

            target = self._target
            assert target is not None
            self._frontier = await self.call(open_target, target, self._crawl, **self._options)
        return self

    async def close(self) -> None:
        """Close the frontier if this ``AsyncFrontier`` opened it (off the loop: a job directory
        checkpoints and gives back what is in flight), then stop the thread pool."""
        if self._closed:
            return
        try:
            if self.owns and self._frontier is not None:
                await self.call(self._frontier.close)
        finally:
            self._closed = True
            self._poke()
            await asyncio.get_running_loop().run_in_executor(None, self._pool.shutdown)

    async def __aenter__(self) -> AsyncFrontier:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ writing requests
    async def push(self, request: Request, *, not_before: float | None = None) -> bool:
        """Queue ``request``; False if its fingerprint was seen before (unless ``dont_filter``)."""
        queued = await self.call(self.frontier.push, request, not_before=not_before)
        self._poke()
        return queued

    async def push_many(self, requests: Iterable[Request]) -> int:
        """Push many requests (one group commit); return how many were queued. The iterable is
        read on the loop first, so it may be a generator of the caller's."""
        batch = list(requests)
        queued = await self.call(self.frontier.push_many, batch)
        self._poke()
        return queued

    async def has_seen(self, fingerprint: bytes) -> bool:
        """True if a request with this fingerprint was accepted."""
        return await self.call(self.frontier.has_seen, fingerprint)

    async def mark_seen(self, fingerprints: Iterable[bytes]) -> int:
        """Add fingerprints to the seen set without queueing anything; return how many were new."""
        return await self.call(self.frontier.mark_seen, list(fingerprints))

    # ------------------------------------------------------------------ taking and finishing requests
    async def pop(self, timeout: float | None = 0.0) -> Request | None:
        """The next ready request, now in flight; None if none is ready within ``timeout`` seconds.

        ``timeout=None`` waits until one is ready, and returns None once the crawl is ``finished``
        or nothing could become ready by waiting (nothing in flight, nothing waiting for a time,
        not paused). While waiting no thread is held: the loop sleeps until the frontier's next
        ready time, a change made through this ``AsyncFrontier``, or a poll of at most 0.1 s.
        """
        if timeout is not None:
            timeout = check_seconds("timeout", timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        step = _POLL_MIN
        while True:
            if self._changed is None:
                self._changed = asyncio.Event()
            changed = self._changed  # taken before the look: a change during it wakes the wait at once
            request, ready, over = await self.call(_look, self.frontier, timeout is None)
            if request is not None:
                return request
            if over:
                return None
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return None
            if ready is None:
                wait = _POLL_MAX
            else:
                until = ready - time.time()
                if until <= 0:  # ready now, yet none was handed out (bounded work, a race): look again soon
                    wait, step = step, min(step * 2, _POLL_MAX)
                else:
                    wait = min(until + 0.001, _POLL_MAX)
            if deadline is not None:
                wait = min(wait, deadline - now)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), wait)

    async def done(self, request: Request, *, refetch_after: float | None = None) -> None:
        """Acknowledge an in-flight request (pending again after ``refetch_after`` seconds, if given)."""
        await self.call(self.frontier.done, request, refetch_after=refetch_after)
        self._poke()

    async def done_many(self, requests: Iterable[Request]) -> None:
        """``done`` for many requests."""
        await self.call(self.frontier.done_many, list(requests))
        self._poke()

    async def retry(self, request: Request, *, delay: float = 0.0) -> None:
        """Give an in-flight request back, ready after ``delay`` seconds, with ``attempts`` one higher."""
        await self.call(self.frontier.retry, request, delay=delay)
        self._poke()

    async def fail(self, request: Request, error: str) -> None:
        """Finish an in-flight request as failed, with ``error``."""
        await self.call(self.frontier.fail, request, error)
        self._poke()

    async def record_outcome(self, *outcomes: Outcome) -> None:
        """Add what fetches came to to the crawl's outcome counters (``FrontierProtocol.record_outcome``)."""
        await self.call(self.frontier.record_outcome, *outcomes)

    async def holds(self, request: Request) -> bool:
        """True if ``request`` is in flight here (what ``done`` would take)."""
        return await self.call(self.frontier.holds, request)

    async def in_flight(self) -> list[Request]:
        """The requests in flight here."""
        return await self.call(_in_flight, self.frontier)

    # ------------------------------------------------------------------ failed requests
    async def failed(self) -> list[FailedRequest]:
        """Every failed request not requeued, oldest failure first."""
        return await self.call(self.frontier.failed)

    async def requeue_failed(self, limit: int | None = None) -> int:
        """Put failed requests back as pending (``attempts`` 0), oldest first; return how many."""
        count = await self.call(self.frontier.requeue_failed, limit)
        self._poke()
        return count

    async def record_failed(self, failed: Iterable[FailedRequest]) -> int:
        """Store requests as failed, with their errors, times and attempts; return how many."""
        return await self.call(self.frontier.record_failed, list(failed))

    # ------------------------------------------------------------------ state
    async def finished(self) -> bool:
        """True when nothing is pending and nothing is in flight (the ``finished`` property)."""
        return await self.call(_finished, self.frontier)

    async def next_ready(self) -> float | None:
        """When the next pending request may be handed out (``time.time()``); None if nothing is pending."""
        return await self.call(self.frontier.next_ready)

    async def stats(self) -> dict[str, Any]:
        """Counters and the state of the frontier (``pending``, ``in_flight``, ``seen``, ...)."""
        return await self.call(self.frontier.stats)

    async def count(self) -> int:
        """Requests waiting to be popped (``len(frontier)``)."""
        return await self.call(len, self.frontier)

    # ------------------------------------------------------------------ steering
    async def pause(self) -> None:
        """Hand out nothing until ``resume()`` (stored with the crawl: it holds across restarts)."""
        await self.call(self.frontier.pause)

    async def resume(self) -> None:
        """End a pause (nothing happens if the crawl is not paused)."""
        await self.call(self.frontier.resume)
        self._poke()

    async def paused_since(self) -> float | None:
        """When the crawl was paused (``time.time()``); None if it is not paused."""
        return await self.call(_paused_since, self.frontier)

    async def drop(self, *, host: str | None = None, match: str | None = None, dry_run: bool = False,
                   show: int = 0) -> Dropped:
        """Remove the pending requests of ``host`` or whose URL ``match`` finds (``FrontierProtocol.drop``)."""
        return await self.call(self.frontier.drop, host=host, match=match, dry_run=dry_run, show=show)

    # ------------------------------------------------------------------ hosts
    async def set_delay(self, host: str, seconds: float | None) -> None:
        """Wait at least ``seconds`` between hand-outs of ``host`` (None: the frontier's delay)."""
        await self.call(self.frontier.set_delay, host, seconds)
        self._poke()

    async def block(self, host: str, until: float) -> None:
        """Hand out nothing of ``host`` before ``until`` (``math.inf``: until ``unblock``)."""
        await self.call(self.frontier.block, host, until)

    async def unblock(self, host: str) -> None:
        """Undo ``block``."""
        await self.call(self.frontier.unblock, host)
        self._poke()

    async def set_budget(self, host: str, budget: int | None) -> None:
        """At most ``budget`` requests of ``host`` done or in flight, ever (None: no limit)."""
        await self.call(self.frontier.set_budget, host, budget)
        self._poke()

    async def set_done_count(self, host: str, done: int) -> None:
        """Set how many requests of ``host`` are done (for a crawl copied in from elsewhere)."""
        await self.call(self.frontier.set_done_count, host, done)

    async def hosts(self) -> list[HostInfo]:
        """Every host with pending, in-flight or done requests or a setting."""
        return await self.call(self.frontier.hosts)

    async def host(self, name: str) -> HostInfo | None:
        """One host as ``hosts()`` tells of it; None if the frontier has nothing of it."""
        return await self.call(self.frontier.host, name)


# ------------------------------------------------------------------ what runs on the pool
def _look(frontier: FrontierProtocol, until_over: bool) -> tuple[Request | None, float | None, bool]:
    """One try of a waiting pop, in one hop: the request popped, else the next ready time and
    (``until_over``) whether waiting is pointless: finished, or nothing in flight and nothing
    that time alone makes ready, and not paused."""
    request = frontier.pop(timeout=0)
    if request is not None:
        return request, None, False
    ready = frontier.next_ready()
    over = False
    if until_over and ready is None and frontier.paused_since is None:
        over = frontier.finished or frontier.stats().get("in_flight", 0) == 0
    return None, ready, over


def _in_flight(frontier: FrontierProtocol) -> list[Request]:
    return frontier.in_flight


def _finished(frontier: FrontierProtocol) -> bool:
    return frontier.finished


def _paused_since(frontier: FrontierProtocol) -> float | None:
    return frontier.paused_since
