"""A request recorded as failed (``fail``), as ``failed()`` lists it."""

from __future__ import annotations

from dataclasses import dataclass

from .request.model import Request


@dataclass(frozen=True)
class FailedRequest:
    """A failed request: the request (with its ``attempts``), the error text and when it failed."""

    request: Request
    error: str
    failed_at: float  # time.time()
