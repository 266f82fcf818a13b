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
from collections.abc import Callable

log = logging.getLogger("diskfrontier")

POLL = 0.25
"""Seconds between two looks at the inbox."""
PUBLISH_EVERY = 1.0
"""Seconds between two ``status.json`` files."""
_BUSY_SHARE = 0.02  # the most of its time the thread may spend listing hosts
_ERROR_PAUSE = 5.0  # after a failed command (a full disk), the next attempt waits this long


class Watcher:
    """The thread of one open frontier: it calls the frontier's ``tick`` (its upkeep), ``apply_commands`` and
    ``publish_status`` (methods, held by weak references: the thread never keeps a frontier alive, and ends
    when it is gone)."""

    def __init__(self, path: str, *, tick: Callable[[], None], apply_commands: Callable[[], int] | None = None,
                 publish_status: Callable[..., float] | None = None) -> None:
        self.path = path
        self._tick = weakref.WeakMethod(tick)
        # None: only the checkpoints and compactions (Frontier(watch=False))
        self._apply = None if apply_commands is None else weakref.WeakMethod(apply_commands)
        self._publish = None if publish_status is None else weakref.WeakMethod(publish_status)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"diskfrontier-watch {path}", daemon=True)
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
        said = {"commands": "", "status": ""}
        path = self.path
        while not self._stop.wait(POLL):
            tick = self._tick()
            if tick is None:
                return  # the frontier is gone
            now = time.monotonic()
            try:
                tick()
            except Exception as exc:  # the upkeep names its own failures; this is one it did not expect
                log.warning("%s: maintenance failed (%s: %s)", path, type(exc).__name__, exc)
            del tick
            apply = None if self._apply is None else self._apply()
            if apply is not None and now >= failing_until:  # apart from the status: a failed command does
                try:                                         # not stop publishing
                    apply()
                    said["commands"] = ""
                except Exception as exc:
                    failing_until = now + _ERROR_PAUSE
                    self._warn(said, "commands", path, "a command could not be applied", exc)
            del apply
            publish = None if self._publish is None else self._publish()
            if publish is not None and now - published >= PUBLISH_EVERY:
                published = now
                with_hosts = now - hosts_at >= hosts_every
                try:
                    cost = publish(with_hosts=with_hosts)
                    said["status"] = ""
                except Exception as exc:
                    self._warn(said, "status", path, "status.json could not be written", exc)
                else:
                    if with_hosts:
                        hosts_at = now
                        hosts_every = max(PUBLISH_EVERY, cost / _BUSY_SHARE)
            del publish

    @staticmethod
    def _warn(said: dict[str, str], what: str, path: str, problem: str, exc: Exception) -> None:
        """Log a failure of ``what`` once, until it fails differently or has worked again."""
        text = f"{type(exc).__name__}: {exc}"
        if said[what] != text:
            said[what] = text
            log.warning("%s: %s (%s); trying again in %gs", path, problem, text,
                        _ERROR_PAUSE if what == "commands" else PUBLISH_EVERY)
