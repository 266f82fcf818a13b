"""Sending a command to the process that holds a job directory, and waiting for its answer.

``deliver`` writes the command into the inbox (durable from then on) and waits for the
holder to apply it. If the holder stops before it did, the command is applied by opening
the directory here (an open applies what waits in the inbox), so a command never waits
for a crawl that is gone.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from ..core.errors import FrontierError, JobDirLocked
from . import inbox
from .frontier import Frontier
from .layout import Layout
from .lock import probe_lock

_POLL = 0.02


class NotApplied(FrontierError):
    """The holder did not apply the command in time; it stays queued in the inbox."""


def deliver(root: str, verb: str, args: dict[str, Any], *, wait: bool = True,
            timeout: float = 30.0) -> tuple[str, dict[str, Any] | None]:
    """Send the command; return its id and, with ``wait``, its answer (``NotApplied`` after ``timeout``)."""
    ident = inbox.send(root, verb, args)
    if not wait:
        return ident, None
    return ident, await_answer(root, ident, timeout)


def await_answer(root: str, ident: str, timeout: float) -> dict[str, Any]:
    """The answer to command ``ident``, applied by the holder or, once there is none, by an open here."""
    lock = Layout(root).lock
    deadline = time.monotonic() + timeout
    while True:
        found = inbox.answer_of(root, ident)
        if found is not None:
            return found
        if not inbox.waiting(root, ident):  # the holder answers before it removes the command: look once more
            found = inbox.answer_of(root, ident)
            if found is not None:
                return found
            raise inbox.CommandRefused(f"command {ident} left {inbox.inbox_dir(root)} without an answer: the crawl "
                                       f"holding {root} set it aside unapplied (its log says why, and the file is "
                                       f"there as {ident}.cmd*.refused), or it was removed; send it again")
        if probe_lock(lock) is None:
            with contextlib.suppress(JobDirLocked):  # else a crawl took the directory meanwhile: it applies it
                Frontier(root, watch=False).close()
            if not inbox.waiting(root, ident):
                continue  # applied or refused by that open: its answer is read above
        if time.monotonic() >= deadline:
            raise NotApplied(f"the crawl holding {root} did not apply command {ident} within {timeout:g}s; it "
                             f"stays queued in {inbox.inbox_dir(root)} and is applied when that crawl next makes a "
                             f"frontier call, or by the next open")
        time.sleep(_POLL)
