"""``take(frontier)``: ``frontier.pop()`` where the test has made a request ready, so that what it
gets is a Request (an empty pop fails the test there, with a message saying so); ``atake`` for an
AsyncFrontier."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from diskfrontier import Request


class _Pops(Protocol):
    def pop(self, timeout: float | None = 0.0) -> Request | None: ...


class _PopsLater(Protocol):
    def pop(self, timeout: float | None = 0.0) -> Awaitable[Request | None]: ...


def take(frontier: _Pops, timeout: float | None = 0.0) -> Request:
    """The next ready request of ``frontier``; fails the test if none was ready."""
    request = frontier.pop(timeout)
    assert request is not None, "the frontier had no request ready"
    return request


async def atake(frontier: _PopsLater, timeout: float | None = 0.0) -> Request:
    """``take`` for an AsyncFrontier."""
    request = await frontier.pop(timeout)
    assert request is not None, "the frontier had no request ready"
    return request
