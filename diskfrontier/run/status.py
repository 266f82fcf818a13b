"""The status line of a run on stderr: pending, in hand, done, failed, rate; the same under ``crawl()`` and
``acrawl()``."""

from __future__ import annotations

import sys
import threading
import time

from ..core.errors import FrontierError
from .state import RunState

__all__ = ["StatusLine", "status_line"]


def status_line(run: RunState, progress: bool | None) -> StatusLine | None:
    """A ``StatusLine`` of ``run`` if ``progress`` asks for one (None: if stderr is a terminal)."""
    shown = sys.stderr.isatty() if progress is None else progress
    return StatusLine(run) if shown else None


class StatusLine:
    """A status line on stderr, redrawn twice a second from a thread of its own: pending, in hand,
    done, failed, rate."""

    def __init__(self, run: RunState) -> None:
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
