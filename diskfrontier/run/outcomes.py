"""What a run tells its frontier of each fetch (``record_outcome``): ``outcome_of`` an action, and
``OutcomeBuffer``, which sends them in batches.

A handler's ``Fetched`` result gives the HTTP status and the body's length; the run times the
handler itself (its seconds are the fetch time: what the handler does beside the fetch counts in
it); the action taken gives the retry and the failure kind. The buffer sends what it holds once it
holds ``BATCH`` outcomes or ``EVERY`` seconds after its last send, and at the end of the run: a
kill loses at most those (they are figures, not requests).
"""

from __future__ import annotations

import logging
import threading
import time

from ..contract.outcomes import Outcome
from ..contract.protocol import FrontierProtocol
from .policy import Action
from .revisit import Fetched

log = logging.getLogger("diskfrontier")

BATCH = 100
EVERY = 1.0


def outcome_of(action: Action, result: object, seconds: float | None) -> Outcome:
    """The outcome of one handled request: ``action`` taken after its handler returned ``result``
    (or raised), in ``seconds``."""
    status = size = None
    if isinstance(result, Fetched):
        status = result.status
        size = len(result.body) if result.body is not None else 0
    return Outcome(status=status, received_bytes=size or 0, fetch_seconds=seconds,
                   retried=action.kind == "retry", failure=action.failure)


class OutcomeBuffer:
    """Outcomes waiting to be sent to ``frontier`` (thread-safe; the send is made outside the lock)."""

    def __init__(self, frontier: FrontierProtocol) -> None:
        self.frontier = frontier
        self.lock = threading.Lock()
        self.waiting: list[Outcome] = []
        self.sent_at = time.monotonic()
        self.warned = False

    def add(self, outcome: Outcome) -> None:
        """Keep ``outcome``; send what is kept if it is time to."""
        with self.lock:
            self.waiting.append(outcome)
            due = len(self.waiting) >= BATCH or time.monotonic() - self.sent_at >= EVERY
        if due:
            self.flush()

    def flush(self) -> None:
        """Send what is kept now. A frontier that refuses (closed, Redis gone) is named in the log once: the
        run goes on, those outcomes uncounted."""
        with self.lock:
            batch, self.waiting = self.waiting, []
            self.sent_at = time.monotonic()
        if not batch:
            return
        try:
            self.frontier.record_outcome(*batch)
        except Exception as exc:
            if not self.warned:
                self.warned = True
                log.warning("could not record the outcomes of %d fetches (%s: %s); they are not counted",
                            len(batch), type(exc).__name__, exc)
