"""What a failure of a ``crawl()`` handler is: retried, failed at once, or a reason to back its host off.

A handler says it by what it raises: ``PermanentError`` for a failure of the URL that trying
again cannot mend (failed at once), anything else for one that may pass (retried with backoff,
and counted against the host: a timeout, a 5xx). A ``classify(request, error)`` hook given to
``crawl()`` may decide instead, for errors the handler does not make itself (an HTTP client's
own exceptions): it returns ``"retry"``, ``"fail"``, ``"backoff"`` or None (the rule above).
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from ..core.errors import PermanentError
from ..request.model import Request


class FailureKind(str, enum.Enum):
    """What happens to a request whose handler raised."""

    RETRY = "retry"  # tried again after backoff; a failure of its host (blocked after host_errors in a row)
    FAIL = "fail"  # recorded as failed at once; its host is not counted as failing
    BACKOFF = "backoff"  # tried again, and its host is blocked at once (a 429, a 503 with Retry-After)


Classify = Callable[[Request, BaseException], "FailureKind | str | None"]
"""``classify(request, error)``: a ``FailureKind`` (or its value), or None for the default rule."""


def kind_of(request: Request, error: BaseException, classify: Classify | None = None) -> FailureKind:
    """The kind of ``error``: what ``classify`` says, else FAIL for a ``PermanentError`` and RETRY for
    the rest. A ``classify`` that returns something else raises ValueError saying what it may return."""
    if classify is not None:
        said = classify(request, error)
        if said is not None:
            try:
                return FailureKind(said)
            except ValueError:
                raise ValueError(f"classify() returned {said!r:.100}: it must return 'retry', 'fail', 'backoff' "
                                 f"(or a FailureKind) or None") from None
    return FailureKind.FAIL if isinstance(error, PermanentError) else FailureKind.RETRY


__all__ = ["Classify", "FailureKind", "kind_of"]
