"""What becomes of a request after its handler, whoever ran it: ``crawl()``'s threads and tasks and
``acrawl()``'s tasks.

``RetryPolicy.decide`` maps a request and its handler's error to an ``Action`` (done, retry after a
backoff, fail, or nothing: the handler finished it itself), by the error's kind (``failurekinds``: a
``PermanentError`` fails at once, a ``classify`` hook may decide) and with the blame its host takes
(a failure counted against it, or a block at once); ``apply`` carries the action out on the
frontier. A robots.txt verdict (``robots.py``) is settled here too: a disallowed request fails, a
held one is given back for when its site's hold ends. Each returns the ``RunStats`` counters it adds
to; ``RunState`` (``state.py``) counts them.

The frontier calls here are the blocking ones of the contract: ``crawl()`` makes them on its worker
threads, ``acrawl()`` on the thread pool of its ``AsyncFrontier``, so that both settle a request
through the same code.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Literal

from ..contract.checks import MAX_SECONDS
from ..contract.protocol import FrontierProtocol
from ..request.model import Request, retries_text
from ..request.revisit import RevisitState
from .failurekinds import Classify, FailureKind, kind_of
from .revisit import CHANGED, NEW, UNCHANGED, UNKNOWN, Fetched, Revisit
from .robots import Verdict, site_of

log = logging.getLogger("diskfrontier")

__all__ = ["Action", "HostBlame", "RetryPolicy", "apply", "error_text", "settle_robots"]


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
    "fail" (record it as failed with ``error``), "revisit" (done, and pending again after ``delay``
    seconds with the revisit state ``revisit``), or "none" (the handler already finished it itself,
    with ``done``, ``retry`` or ``fail``: counted as done). ``at_once``: a failure with no retry.
    ``blame``: a failure of the request's host to count (None: the host is not blamed). ``counters``:
    more ``RunStats`` counters it adds to. ``failure``: the kind of the handler's error (a ``FailureKind``
    value), None if it did not raise.
    """

    kind: Literal["done", "retry", "fail", "revisit", "none"]
    delay: float = 0.0
    error: str = ""
    at_once: bool = False
    blame: HostBlame | None = None
    revisit: RevisitState | None = None
    counters: tuple[str, ...] = ()
    failure: str | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """How a run treats a handler's error: ``retries`` retries, ``backoff`` seconds doubled each attempt;
    ``classify`` (see ``failurekinds``) may say what an error is; ``host_errors`` failures of a host in a
    row block it for ``host_backoff`` seconds, doubled each further failure, at most ``host_backoff_max``
    (``host_errors`` None: hosts are never blocked for their failures, but a "backoff" still blocks).
    ``revisit``: how pages are come back to (a handler's ``Fetched`` result, ``revisit.py``)."""

    retries: int = 3
    backoff: float = 1.0
    classify: Classify | None = None
    host_errors: int | None = 5
    host_backoff: float = 60.0
    host_backoff_max: float = 3600.0
    revisit: Revisit | None = None

    def decide(self, request: Request, error: BaseException | None, *, held: bool, result: object = None) -> Action:
        """The action for ``request`` after its handler returned ``result`` (``error`` None) or raised ``error``;
        ``held``: the request is still in flight here (the handler did not finish it itself)."""
        if not held:
            if error is not None:
                log.warning("handler raised after it finished %s itself: %s", request.url, error_text(error))
            return Action("none")
        if error is None:
            if self.revisit is not None and isinstance(result, Fetched):
                verdict, state = self.revisit.after_fetch(request, result, time.time())
                return Action("revisit", delay=state.interval, revisit=state, counters=_REVISIT_COUNTERS[verdict])
            return Action("done")
        try:
            kind = kind_of(request, error, self.classify)
        except Exception as exc:  # a classify hook that raised or answered wrongly: the error is retried
            log.error("classify() failed for %s (%s); the error is retried: %s", request.url, error_text(exc),
                      error_text(error))
            kind = FailureKind.RETRY
        text = error_text(error)
        if kind is FailureKind.FAIL:
            return Action("fail", error=text, at_once=True, failure=kind.value)
        blame = None
        if kind is FailureKind.BACKOFF:
            blame = HostBlame(1, self.host_backoff, self.host_backoff_max)
        elif self.host_errors is not None:
            blame = HostBlame(self.host_errors, self.host_backoff, self.host_backoff_max)
        if request.attempts < self.retries:
            return Action("retry", delay=min(self.backoff * 2 ** request.attempts, MAX_SECONDS), error=text,
                          blame=blame, failure=kind.value)
        if self.revisit is not None and request.revisit is not None:  # a revisit that failed: come back later
            later = self.revisit.after_failure(request, time.time())
            if later is not None:
                return Action("revisit", delay=later.interval, error=text, blame=blame, revisit=later,
                              counters=("revisit_failures",), failure=kind.value)
        return Action("fail", error=text, blame=blame, failure=kind.value)


_COUNTED = {"done": "done", "none": "done", "retry": "retried", "fail": "failed", "revisit": "done"}
_REVISIT_COUNTERS = {NEW: ("revisits_scheduled",), CHANGED: ("revisits_scheduled", "revisits", "changes"),
                     UNCHANGED: ("revisits_scheduled", "revisits"), UNKNOWN: ("revisits_scheduled", "revisits")}


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
        elif action.kind == "revisit":
            request.revisit = action.revisit
            frontier.done(request, refetch_after=action.delay)
            if action.error:
                log.info("revisit of %s failed (%s); tried again in %.0fs", request.url, action.error, action.delay)
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
    if action.kind == "revisit" and action.revisit is not None and action.revisit.last_status == 304 \
            and not action.error:
        counters += ("not_modified",)
    return (_COUNTED[action.kind], *counters, *action.counters)


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


def error_text(error: BaseException) -> str:
    """An error as a failure records it: its type and message, cut at 2,000 characters."""
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 2000 else text[:2000] + "..."
