"""SIGINT and SIGTERM while a run lasts: one state machine, installed by ``crawl()`` in the main thread and by
``acrawl()`` on its event loop.

The first SIGINT or SIGTERM stops the run taking new requests, and the requests in hand are finished (for
at most the run's grace: ``RunState.watch``); a second SIGINT leaves at once, the requests in hand staying
in flight. Only the main thread can take signals: in any other, neither installer does anything.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["StopSignals"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """SIGINT and SIGTERM call ``first(name)`` once ("SIGINT" or "SIGTERM"); after that, a SIGINT calls
    ``second()``. ``in_main_thread()`` and ``on_loop(loop)`` take the signals for the time of a ``with``
    block and put back what they found."""

    def __init__(self, first: Callable[[str], None], second: Callable[[], None]) -> None:
        self.first, self.second = first, second
        self.seen = False

    def take(self, signum: int) -> None:
        """One signal came."""
        if self.seen and signum == signal.SIGINT:
            self.second()
            return
        self.seen = True
        self.first(signal.Signals(signum).name)

    @contextmanager
    def in_main_thread(self) -> Iterator[None]:
        """The signals by ``signal.signal``, for code that runs no event loop in this thread."""
        saved: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in _SIGNALS:
                saved[signum] = signal.signal(signum, lambda number, frame: self.take(number))
        try:
            yield
        finally:
            for number, handler in saved.items():
                signal.signal(number, handler)

    @contextmanager
    def on_loop(self, loop: asyncio.AbstractEventLoop) -> Iterator[None]:
        """The signals by ``loop.add_signal_handler``. What was there comes back at the end: the caller's own
        handler on the loop (the one ``asyncio.run()`` sets for Ctrl-C included), or else its ``signal.signal``
        one, and the wake-up fd. A loop without signals (Windows) takes none."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        wakeup = signal.set_wakeup_fd(-1)
        signal.set_wakeup_fd(wakeup)
        loop_handlers = getattr(loop, "_signal_handlers", {})  # the loop's own, to put back
        saved: dict[int, tuple[Any, Any]] = {}
        for signum in _SIGNALS:
            previous, loop_handle = signal.getsignal(signum), loop_handlers.get(signum)
            try:
                loop.add_signal_handler(signum, self.take, signum)
            except (NotImplementedError, RuntimeError, ValueError):
                continue
            saved[signum] = (previous, loop_handle)
        try:
            yield
        finally:
            for number, (previous, loop_handle) in saved.items():
                loop.remove_signal_handler(number)
                if loop_handle is not None:
                    loop.add_signal_handler(number, loop_handle._callback, *loop_handle._args)
                elif previous is not None:
                    signal.signal(number, previous)
            if saved and not getattr(loop, "_signal_handlers", None) and wakeup != -1:
                signal.set_wakeup_fd(wakeup)
