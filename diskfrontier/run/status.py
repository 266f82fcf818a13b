"""What a run shows while it works, on stderr: pending, in hand, done, retried, failed, rate; the same under
``crawl()`` and ``acrawl()``.

On a terminal, one line redrawn in place twice a second (``StatusLine``). Anywhere else (a log file, a
pipe, a service's journal), a plain line every ``progress_every`` seconds (``ProgressLines``): no carriage
return, no escape code, the rate over the lines' own interval, so that a log shows the crawl going on
instead of silence until it ends.
"""

from __future__ import annotations

import sys
import threading
import time

from ..core.errors import FrontierError
from .state import RunState

__all__ = ["ProgressLines", "StatusLine", "status_line"]

REDRAW_EVERY = 0.5
"""Seconds between redraws of the line on a terminal."""


def status_line(run: RunState, progress: bool | None, every: float = 5.0) -> StatusLine | ProgressLines | None:
    """What shows ``run``'s progress: a ``StatusLine`` on a terminal, ``ProgressLines`` (one every ``every``
    seconds) elsewhere, None with ``progress=False``. ``progress=True`` draws the line even when stderr is not
    a terminal; None chooses by stderr."""
    if progress is False:
        return None
    if progress or _is_terminal():
        return StatusLine(run)
    return ProgressLines(run, every)


def _is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


class _Shown:
    """A thread of its own writing ``run``'s figures to stderr every ``every`` seconds, and once at the end."""

    def __init__(self, run: RunState, every: float) -> None:
        self.run = run
        self.every = every
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="diskfrontier-status", daemon=True)
        self.thread.start()

    def _pending(self) -> object:
        try:
            return self.run.frontier.stats().get("pending", "?")
        except FrontierError:
            return "?"

    def _text(self, last: bool) -> str:
        raise NotImplementedError

    def _write(self, text: str) -> None:
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # a closed pipe or stream: the run goes on without its progress

    def _loop(self) -> None:
        while not self.stopped.wait(self.every):
            self._write(self._text(False))

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        self._write(self._text(True))


class StatusLine(_Shown):
    """A status line on a terminal, redrawn in place twice a second: pending, in hand, done, retried, failed,
    rate since the run began."""

    def __init__(self, run: RunState) -> None:
        super().__init__(run, REDRAW_EVERY)

    def _text(self, last: bool) -> str:
        stats = self.run.stats
        seconds = max(time.time() - stats.started, 1e-9)
        return (f"\rpending {self._pending()}  in hand {self.run.busy}  done {stats.done}  retried {stats.retried}  "
                f"failed {stats.failed}  {stats.handled / seconds:.1f}/s " + ("\n" if last else ""))


class ProgressLines(_Shown):
    """A plain line every ``every`` seconds (for a log, not a terminal): elapsed time, pending, in hand, done,
    retried, failed, and the requests handled a second over the last ``every`` seconds; one more at the end."""

    def __init__(self, run: RunState, every: float) -> None:
        self._last = (time.monotonic(), 0)
        super().__init__(run, every)

    def _text(self, last: bool) -> str:
        stats = self.run.stats
        now = time.monotonic()
        since, handled = self._last
        self._last = (now, stats.handled)
        rate = (stats.handled - handled) / max(now - since, 1e-9)
        elapsed = max(0.0, time.time() - stats.started)
        head = "ended" if last else "progress"
        return (f"{head} {_elapsed(elapsed)}: pending {self._pending()}, in hand {self.run.busy}, done {stats.done}, "
                f"retried {stats.retried}, failed {stats.failed}, {rate:.1f}/s over the last {now - since:.0f}s\n")


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
