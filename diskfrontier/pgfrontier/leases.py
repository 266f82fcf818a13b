"""``Leases``: the requests one ``PostgresFrontier`` client holds leased, and ``Renewal``, the thread that renews
them.

A pop leases requests in the crawl's ``leases`` table to this client; this is the client's own side: each
request handed out gets a local number (its ``_seq``), kept with its row id and lease number. Ending or
renewing a lease sends (id, lease number) pairs to the ``finish`` function; a request whose lease ended is
forgotten. The close waits for pops under way and gives back what they leased too. ``Renewal`` renews every
lease held every third of the lease, in one call that also says the client is there (``beat``): a client
that runs keeps its requests however long it works on them; one killed, frozen or cut off loses them within
one lease. One lock guards it all, so that threads may share the frontier.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterable

from ..core.errors import FrontierClosed, FrontierError, NotInFlight
from ..request.model import Request
from .deferred import GRACE

log = logging.getLogger("diskfrontier")


class Leases:
    """This client's leased requests, by local number: (request, row id, lease number)."""

    def __init__(self) -> None:
        self.client_id = f"{secrets.token_hex(6)}-{os.getpid()}"
        self.info = {"host": socket.gethostname(), "pid": os.getpid()}
        self._lock = threading.Lock()
        self._pops_done = threading.Condition(self._lock)
        self._popping = 0
        self._closing = False
        self._held: dict[int, tuple[Request, int, int]] = {}
        self._count = 0

    def begin_pop(self) -> bool:
        """Count a pop as under way; False once ``closing`` has begun."""
        with self._lock:
            if self._closing:
                return False
            self._popping += 1
            return True

    def end_pop(self) -> None:
        with self._lock:
            self._popping -= 1
            self._pops_done.notify_all()

    def add(self, request: Request, row_id: int, lease_no: int) -> Request:
        """Hold ``request``, leased as row ``row_id`` with ``lease_no``."""
        with self._lock:
            self._count += 1
            request._seq = self._count
            self._held[self._count] = (request, row_id, lease_no)
        return request

    def take(self, requests: Iterable[Request], what: str) -> list[tuple[int, int]]:
        """(row id, lease number) of each request, every one the very object a pop returned and still held; else
        ``NotInFlight`` naming the first that is not."""
        out = []
        with self._lock:
            for request in requests:
                seq = getattr(request, "_seq", None)
                held = self._held.get(seq) if isinstance(seq, int) else None
                if held is None or held[0] is not request:
                    raise NotInFlight(f"{what}() was given {request!r}, which this client does not hold: pass the "
                                      f"Request object pop() returned, once")
                out.append((held[1], held[2]))
        return out

    def forget(self, requests: Iterable[Request]) -> None:
        with self._lock:
            for request in requests:
                seq = getattr(request, "_seq", None)
                held = self._held.get(seq) if isinstance(seq, int) else None
                if held is not None and held[0] is request:
                    del self._held[seq]  # type: ignore[arg-type]

    def clear(self) -> None:
        with self._lock:
            self._held.clear()

    def holds(self, request: Request) -> bool:
        seq = getattr(request, "_seq", None)
        with self._lock:
            held = self._held.get(seq) if isinstance(seq, int) else None
            return held is not None and held[0] is request

    def requests(self) -> list[Request]:
        """The requests held, oldest lease first."""
        with self._lock:
            return [held[0] for held in self._held.values()]

    def pairs(self) -> tuple[list[int], list[int]]:
        """Row ids and lease numbers of every lease held (what a renewal sends)."""
        with self._lock:
            return [held[1] for held in self._held.values()], [held[2] for held in self._held.values()]

    def __len__(self) -> int:
        return len(self._held)

    def closing(self, wait: float) -> list[Request]:
        """Refuse new pops, wait up to ``wait`` seconds for those under way, and return what is held then."""
        with self._lock:
            self._closing = True
            self._pops_done.wait_for(lambda: self._popping == 0, timeout=wait)
        return self.requests()


class Renewal:
    """A daemon thread calling ``renew()`` every ``lease / 3`` seconds until ``stop``, and ``flush()`` ``GRACE``
    seconds after each ``nudge`` (a done waits to be sent); an error is logged once and tried again at the next
    turn. It holds what it calls by weak references only."""

    def __init__(self, renew: Callable[[], object], lease: float, name: str,
                 flush: Callable[[], object] | None = None) -> None:
        self.lease = lease
        self._stop = threading.Event()
        self._nudged = threading.Event()
        self._failing = ""
        refs = (weakref.WeakMethod(renew), None if flush is None else weakref.WeakMethod(flush))
        self._thread = threading.Thread(target=self._loop, args=refs, name=name, daemon=True)
        self._thread.start()

    def nudge(self) -> None:
        """Have ``flush`` called ``GRACE`` seconds from now."""
        self._nudged.set()

    def stop(self) -> None:
        self._stop.set()
        self._nudged.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _loop(self, renew: weakref.WeakMethod, flush: weakref.WeakMethod | None) -> None:
        every = self.lease / 3
        beat_at = time.monotonic() + every
        while True:
            nudged = self._nudged.wait(max(beat_at - time.monotonic(), 0.0))
            if self._stop.is_set():
                return
            if nudged and flush is not None:
                self._nudged.clear()
                if self._stop.wait(GRACE) or not self._call(flush, every, "the dones waiting could not be sent"):
                    return
                if time.monotonic() < beat_at:  # dones come all the time: the beat still comes when it is due
                    continue
            self._nudged.clear()
            if not self._call(renew, every, "leases could not be renewed", timed=True):
                return
            beat_at = time.monotonic() + every

    def _call(self, ref: weakref.WeakMethod, every: float, failed: str, *, timed: bool = False) -> bool:
        """Call what ``ref`` holds (``failed``: what its error means; ``timed``: a renewal, which warns when it took
        longer than a third of the lease); False once it is gone or its frontier closed."""
        call = ref()
        if call is None:
            return False
        started = time.monotonic()
        try:
            call()
            self._failing = ""
        except FrontierClosed:
            return False
        except FrontierError as exc:
            if str(exc) != self._failing:
                log.warning("%s (%s); trying again in %gs", failed, exc, every)
                self._failing = str(exc)
        finally:
            del call
        if timed and time.monotonic() - started > every:
            log.warning("renewing the leases took %.1fs, more than a third of the lease (%gs): requests may "
                        "go to other clients", time.monotonic() - started, self.lease)
        return True
