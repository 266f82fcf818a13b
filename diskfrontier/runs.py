"""``crawl()``: a pool of workers over a frontier, with time-boxed and repeated runs.

Every request a worker takes is finished before the run ends (done, retried with backoff,
or recorded as failed), so a run stopped by its duration, its request count, Ctrl-C or
SIGTERM leaves the frontier consistent and loses nothing; a second Ctrl-C ends the run at
once, leaving the requests in hand in flight (a job directory gives them back at close or at
its next open; Redis when their leases run out).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .contract import MAX_SECONDS, FrontierProtocol
from .errors import FrontierError
from .request.model import Request, retries_text

log = logging.getLogger("diskfrontier")
_IDLE_POLL = 0.05  # how long a worker waits for a request before it looks at the run's state again


CrawlFrontier = FrontierProtocol  # what crawl() needs of a frontier: the contract (an older name)


Handler = Callable[[Request, Any], Any]


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
    """What ``crawl()`` did: one ``RunStats`` a run, and their sums."""

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


class _Run:
    """The shared state of one run: counters, the stop flags, and the signal handlers."""

    def __init__(self, frontier: FrontierProtocol, handler: Handler, retries: int, backoff: float,
                 duration: float | None, max_requests: int | None) -> None:
        self.frontier, self.handler = frontier, handler
        self.retries, self.backoff = retries, backoff
        self.max_requests = max_requests
        self.stats = RunStats(time.time())
        self.deadline = None if duration is None else time.monotonic() + duration
        self.lock = threading.Lock()
        self.stop = threading.Event()  # no new work
        self.hard = threading.Event()  # leave at once
        self.taken = 0  # hand-outs reserved against max_requests
        self.busy = 0  # requests in hand (popped, not yet settled)

    def halt(self, reason: str) -> None:
        with self.lock:
            if not self.stats.stopped_by:
                self.stats.stopped_by = reason
        self.stop.set()

    # ------------------------------------------------------------------ one request
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
        """Finish ``request`` after its handler: done, retry with backoff, or failed."""
        frontier = self.frontier
        try:
            if error is None:
                if frontier.holds(request):
                    frontier.done(request)
                outcome = "done"
            elif not frontier.holds(request):
                outcome = "done"  # the handler gave it back or finished it itself, then raised
                log.warning("handler raised after it finished %s itself: %s", request.url, _text(error))
            elif request.attempts < self.retries:
                delay = min(self.backoff * 2 ** request.attempts, MAX_SECONDS)
                frontier.retry(request, delay=delay)
                outcome = "retried"
                log.info("retry %d of %s in %.1fs: %s", request.attempts, request.url, delay, _text(error))
            else:
                frontier.fail(request, _text(error))
                outcome = "failed"
                log.warning("failed after %s: %s: %s", retries_text(request.attempts), request.url, _text(error))
        except Exception as exc:  # closed under us, a lease lost, a request changed: it comes back
            log.warning("could not finish %s (%s: %s); it will be handed out again", request.url,
                        type(exc).__name__, exc)
            outcome = ""
        with self.lock:
            self.busy -= 1
            idle = self.busy == 0
            self.stats.handled += 1
            reached = self.max_requests is not None and self.stats.handled >= self.max_requests
            if outcome:
                setattr(self.stats, outcome, getattr(self.stats, outcome) + 1)
        if reached:
            self.halt("max_requests")
        elif idle:
            self.idle()  # the last request in hand: the crawl may be finished now

    def idle(self) -> None:
        """Nothing was ready: end the run if nothing can become ready."""
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
            if self.hard.is_set():
                return  # left at once: a request popped now stays in flight and comes back
            if request is None:
                self.unreserve()
                self.idle()
                continue
            self.took()
            error: BaseException | None = None
            try:
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

    async def task(self) -> None:
        frontier = self.frontier
        while not self.stop.is_set():
            if not self.reserve():
                return
            request = frontier.pop()
            if request is None:
                self.unreserve()
                self.idle()
                ready = frontier.next_ready()
                wait = _IDLE_POLL if ready is None else min(_IDLE_POLL, max(0.0, ready - time.time()))
                await asyncio.sleep(max(wait, 0.001))
                continue
            self.took()
            error: BaseException | None = None
            try:
                await self.handler(request, frontier)
            except Exception as exc:  # as in worker()
                error = exc
            if self.hard.is_set():
                return
            self.settle(request, error)


def _text(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 2000 else text[:2000] + "..."


def _check(name: str, value: Any, *, whole: bool = False, least: float = 0.0, none: bool = True) -> None:
    if value is None and none:
        return
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) or value < least:
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"crawl(): {name} must be {kind} of at least {least:g}{' or None' if none else ''}, "
                         f"got {value!r}")


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
) -> CrawlStats:
    """Run ``handler(request, frontier)`` over the frontier's requests on ``workers`` threads
    (or asyncio tasks, when ``handler`` is a coroutine function), until the crawl is finished.

    A handler that returns acknowledges its request (``done``), unless it called
    ``frontier.retry`` or ``frontier.done(..., refetch_after=...)`` itself. One that raises
    is retried through the frontier (so politeness and crash safety hold) after ``backoff``
    seconds, doubled each attempt, up to ``retries`` times; then the request is recorded as
    failed with the error text (``frontier.failed()``, ``diskfrontier failed JOBDIR``).

    A run stops when the crawl is finished, after ``duration`` seconds, after
    ``max_requests`` requests, or on SIGINT or SIGTERM: no new request is taken, and those in
    hand are finished first. A second Ctrl-C leaves at once (the requests in hand stay in
    flight and come back; nothing is lost). With ``every`` (seconds) and ``times``, a run
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
    if not callable(handler):
        raise TypeError(f"crawl(): handler must be callable, got {type(handler).__name__}")
    is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        type(handler).__call__)  # an object with an async __call__
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
        run = _Run(frontier, handler, retries, backoff, duration, max_requests)
        log.info("run %d of %d: %d %s", number + 1, times, workers, "tasks" if is_async else "threads")
        _run_once(run, workers, is_async, show)
        result.runs.append(run.stats)
        stats = run.stats
        log.info("run %d ended (%s): %d handled, %d done, %d retried, %d failed, %.1f a second",
                 number + 1, stats.stopped_by, stats.handled, stats.done, stats.retried, stats.failed, stats.rate)
        if stats.stopped_by in ("SIGINT", "SIGTERM", "interrupted") or stats.stopped_by.startswith("error"):
            break
    return result


def _sleep_unless_signalled(seconds: float) -> bool:
    """Sleep between runs; True if SIGINT or SIGTERM came (the remaining runs are cancelled)."""
    came = threading.Event()
    with _Signals(lambda name: came.set(), lambda: came.set()):
        came.wait(seconds)
    return came.is_set()


def _run_once(run: _Run, workers: int, is_async: bool, show: bool) -> None:
    def on_signal(name: str) -> None:
        if run.stop.is_set():
            return
        with run.lock:
            busy = run.busy
        log.warning("%s: stopping; finishing the %d requests in hand (Ctrl-C again to stop at once)", name, busy)
        run.halt(name)

    def on_second() -> None:
        log.warning("stopping at once: the requests in hand stay in flight and come back")
        with run.lock:
            run.stats.stopped_by = "interrupted"
        run.hard.set()
        run.stop.set()

    status = _Status(run) if show else None
    with _Signals(on_signal, on_second):
        if is_async:
            asyncio.run(_run_tasks(run, workers))
        else:
            threads = [threading.Thread(target=run.worker, name=f"diskfrontier-worker-{n}", daemon=True)
                       for n in range(workers)]
            for thread in threads:
                thread.start()
            while any(thread.is_alive() for thread in threads):
                if run.hard.is_set():
                    break
                if run.deadline is not None and time.monotonic() >= run.deadline:
                    run.halt("duration")
                alive = [thread for thread in threads if thread.is_alive()]
                if alive:
                    alive[0].join(0.05)
    if status is not None:
        status.close()
    run.stats.ended = time.time()


async def _run_tasks(run: _Run, workers: int) -> None:
    tasks = [asyncio.ensure_future(run.task()) for _ in range(workers)]
    while not all(task.done() for task in tasks):
        if run.hard.is_set():
            for task in tasks:
                task.cancel()
            break
        if run.deadline is not None and time.monotonic() >= run.deadline:
            run.halt("duration")
        await asyncio.wait(tasks, timeout=0.05)
    await asyncio.gather(*tasks, return_exceptions=True)


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


class _Status:
    """A status line on stderr, redrawn twice a second: pending, in hand, done, failed, rate."""

    def __init__(self, run: _Run) -> None:
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


__all__ = ["CrawlStats", "RunStats", "crawl"]
