"""The holder's background thread: applies inbox commands, publishes ``status.json``, runs the upkeep.

Every ``POLL`` seconds it looks at the inbox and, if a command waits, applies it under the
frontier's lock (a ``pop(timeout=...)`` waiting for a request wakes for it). About once a
second it writes ``status.json`` (``snapshot.snapshot``: counts, the busiest hosts, the
latest failures), replaced atomically and not fsynced: a reader of a held directory takes
it instead of the journal. The host list is refreshed less often when it is costly, so
that the thread never holds the lock for more than a few per cent of the time.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .frontier import Frontier

log = logging.getLogger("diskfrontier")

POLL = 0.25
"""Seconds between two looks at the inbox."""
PUBLISH_EVERY = 1.0
"""Seconds between two ``status.json`` files."""
_BUSY_SHARE = 0.02  # the most of its time the thread may spend listing hosts
_ERROR_PAUSE = 5.0  # after a failed command (a full disk), the next attempt waits this long


class Watcher:
    """The thread of one open ``Frontier`` (held by a weak reference: it never keeps one alive)."""

    def __init__(self, frontier: Frontier, *, inbox: bool = True) -> None:
        self._frontier = weakref.ref(frontier)
        self._inbox = inbox  # False: only the checkpoints and compactions (Frontier(watch=False))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"diskfrontier-watch {frontier.path}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (a command being applied is finished first)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        published = hosts_at = 0.0
        hosts_every = PUBLISH_EVERY
        failing_until = 0.0
        last_error = ""
        while not self._stop.wait(POLL):
            frontier = self._frontier()
            if frontier is None:
                return
            now = time.monotonic()
            try:
                frontier._upkeep.tick()
            except Exception as exc:  # the upkeep names its own failures; this is one it did not expect
                log.warning("%s: maintenance failed (%s: %s)", frontier.path, type(exc).__name__, exc)
            if not self._inbox:
                del frontier
                continue
            try:
                if now >= failing_until:
                    frontier._apply_commands()
                if now - published >= PUBLISH_EVERY:
                    with_hosts = now - hosts_at >= hosts_every
                    cost = frontier._publish_status(with_hosts=with_hosts)
                    published = now
                    if with_hosts:
                        hosts_at = now
                        hosts_every = max(PUBLISH_EVERY, cost / _BUSY_SHARE)
                last_error = ""
            except Exception as exc:
                failing_until = now + _ERROR_PAUSE
                text = f"{type(exc).__name__}: {exc}"
                if text != last_error:
                    log.warning("%s: a command or status.json could not be written (%s); trying again in %gs",
                                frontier.path, text, _ERROR_PAUSE)
                    last_error = text
            finally:
                del frontier
