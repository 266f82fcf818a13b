"""``Leases``: the requests one ``RedisFrontier`` client holds leased, and their lease tokens.

A pop leases requests in Redis to this client (the ``POP`` script names it by ``client_id``);
this is the client's own side of those leases. Each request handed out gets a local number
(its ``_seq``, written only here), kept with its id in the crawl and its lease token; ending
or renewing a lease (``done``, ``retry``, ``fail``, ``extend``, the close's ``release``) sends
the tokens to the ``FINISH`` script from here, and a request whose lease ended is forgotten.
The pops under way are counted, so that the close can wait for them and give back what they
leased too; once it has begun, new pops are refused. Requests a pop leased ahead (``prefetch``)
wait here, held and renewed like the others, until a later pop hands them out. ``Renewal`` renews every lease held in
the background, every third of the lease, in one script call per ``batch`` requests: a client
that runs keeps its requests however long it works on them, and one that is killed, frozen or
cut off loses them within one lease. One lock guards it all, so that threads may share the frontier.

The client also tells the crawl it is there (the ``BEAT`` script: its host name, pid and lease, and
the server's time as its last sighting, in the ``clients`` hash): at open, with every renewal (in
the same script call), and, for a client that does not renew in the background, on its own pops
and dones at most every ``BEAT_EVERY`` seconds; a clean close removes it. ``diskfrontier clients``
reads it: a client is live while it was seen within two beats (two thirds of its lease; without a
renewal thread, within its lease).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import secrets
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from ..core.errors import FrontierClosed, FrontierError, NotInFlight
from ..request.model import Request

log = logging.getLogger("diskfrontier")

# seconds: at most this often (and at most every third of its lease) a client without renewal says it is there
BEAT_EVERY = 5.0


class Leases:
    """This client's leased requests, by local number: (request, its id in the crawl, its lease token).

    ``check`` raises unless the frontier may still be used (it is closed, or this is a forked
    child); ``run(what, script, args, shard)`` runs one of the crawl's scripts on one of its shards
    (``what``: the call, for errors); a ``FINISH`` takes at most ``batch`` requests, and a request's lease
    is ended or renewed on the shard that leased it (the client's entry is kept on shard 0). Neither
    may hold the frontier itself (a weak reference will do): then a frontier dropped without ``close``
    still goes at once.
    ``lease``: the client's lease, recorded with it; ``beat_on_calls``: the client has no renewal
    thread, so ``touch`` (on its pops and dones) says it is there.
    """

    def __init__(self, check: Callable[[], None], run: Callable[[str, str, list[Any], int], Any], batch: int,
                 lease: float = 30.0, beat_on_calls: bool = False) -> None:
        self._check, self._run, self._batch = check, run, batch
        self.client_id = f"{secrets.token_hex(6)}-{os.getpid()}"  # the owner the POP script writes into tokens
        # beat: how often the renewal thread says the client is there (none without one: its calls do)
        self._info = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "lease": lease,
                                 "beat": None if beat_on_calls else lease / 3})
        self._beat_every = min(BEAT_EVERY, lease / 3) if beat_on_calls else None
        self._beat_at = -float("inf")  # time.monotonic() of the last beat
        self._lock = threading.Lock()
        self._pops_done = threading.Condition(self._lock)  # close() waits for the pops under way
        self._popping = 0
        self._closing = False
        self._held: dict[int, tuple[Request, bytes, bytes, int]] = {}  # local number -> (request, id, token, shard)
        self._lost: set[int] = set()  # held, but their leases ran out: the renewal skips them
        self._waiting: dict[int, None] = {}  # held, leased ahead by a prefetch, not handed out yet (in pop order)
        self._count = 0
        self.before_renewal: Callable[[], None] | None = None  # what a renewal does first (send the dones kept)

    # ------------------------------------------------------------------ pops
    def begin_pop(self) -> bool:
        """Count a pop as under way; False (nothing counted) once ``closing`` has begun."""
        with self._lock:
            if self._closing:
                return False
            self._popping += 1
            return True

    def end_pop(self) -> None:
        """The pop counted by ``begin_pop`` is over (a ``closing`` waiting for it may go on)."""
        with self._lock:
            self._popping -= 1
            self._pops_done.notify_all()

    def add(self, request: Request, rid: bytes, token: bytes, shard: int = 0) -> Request:
        """Hold ``request``, leased as ``rid`` with ``token`` on shard ``shard``: it gets the next local
        number; returns it."""
        with self._lock:
            self._count += 1
            request._seq = self._count
            self._held[self._count] = (request, rid, token, shard)
        return request

    def stash(self, requests: Iterable[Request]) -> None:
        """Keep ``requests`` (held: ``add`` was called for each) for later pops: they are renewed and given
        back at close like the others, but not handed out yet (``holds`` is False for them)."""
        with self._lock:
            for request in requests:
                self._waiting[request._seq] = None  # type: ignore[index]

    def hand_out(self, count: int) -> list[Request]:
        """Up to ``count`` of the stashed requests, oldest first, now handed out; a stashed request whose
        lease a renewal found lost is dropped (its lease ran out: it is pending again, or another's). None once
        ``closing`` has begun (the close gives them back)."""
        out: list[Request] = []
        with self._lock:
            while not self._closing and self._waiting and len(out) < count:
                seq = next(iter(self._waiting))
                del self._waiting[seq]
                if seq in self._lost:
                    self._lost.discard(seq)
                    self._held.pop(seq, None)
                    continue
                held = self._held.get(seq)
                if held is not None:
                    out.append(held[0])
        return out

    @property
    def stashed(self) -> int:
        """How many requests leased ahead wait to be handed out."""
        return len(self._waiting)

    def hand_in(self, request: Request) -> tuple[bytes, bytes, int] | None:
        """No longer hold ``request``, whose done is sent later: its (id, lease token, shard), or None if a
        renewal had found its lease lost (forgotten all the same); ``NotInFlight`` if it is not held and handed
        out."""
        seq = getattr(request, "_seq", None)
        with self._lock:
            held = self._held.get(seq) if isinstance(seq, int) else None
            if held is None or held[0] is not request or seq in self._waiting:
                raise not_held("done", request)
            del self._held[seq]  # type: ignore[arg-type]
            if seq in self._lost:
                self._lost.discard(seq)
                return None
            return held[1], held[2], held[3]

    def is_lost(self, request: Request) -> bool:
        """True if a renewal found the lease of ``request`` (held) lost."""
        seq = getattr(request, "_seq", None)
        with self._lock:
            held = self._held.get(seq) if isinstance(seq, int) else None
            return held is not None and held[0] is request and seq in self._lost

    # ------------------------------------------------------------------ ending and renewing leases
    def finish(self, what: str, requests: list[Request], seconds: float,
               bodies: list[bytes] | None = None) -> list[int]:
        """One ``FINISH`` of ``what`` ("done", "refetch", "retry", "fail", "extend" or "release") for
        ``requests``, each with its body in ``bodies`` if given; per request 1, or 0 if its lease was lost.
        All are checked first (``NotInFlight``); all but an "extend" are forgotten once it ran."""
        self._check()
        out = [0] * len(requests)
        for shard, positions, args in self.finish_args(what, requests, seconds, bodies):
            answer = self._run(what, "FINISH", args, shard)
            for k, ok in zip(positions, answer, strict=True):
                out[k] = int(ok)
            if what != "extend":
                self.forget(requests[k] for k in positions)
        return out

    def finish_args(self, what: str, requests: list[Request], seconds: float,
                    bodies: list[bytes] | None = None) -> list[tuple[int, list[int], list[Any]]]:
        """The ``FINISH`` calls of ``finish`` (each: its shard, the positions in ``requests`` it takes, its
        arguments), after every request was checked (``NotInFlight``); says the client is there if due."""
        taken = self._take(requests, what)
        self.touch()
        by_shard: dict[int, list[int]] = {}  # shard -> positions in requests
        for k, (_rid, _token, shard) in enumerate(taken):
            by_shard.setdefault(shard, []).append(k)
        calls = []
        for shard, positions in by_shard.items():
            args: list[Any] = [what, repr(seconds), len(positions)]
            for k in positions:
                args += [taken[k][0], taken[k][1], bodies[k] if bodies else b""]
            calls.append((shard, positions, args))
        return calls

    def renew_all(self, seconds: float) -> int:
        """Renew the lease of every request held (not those known lost) for ``seconds``, and say the
        client is there (one script call, or one per ``batch`` requests); return how many were renewed.
        A lease found lost stays held, so that the call finishing it raises ``LeaseExpired``. The dones kept
        for later (``before_renewal``) are sent first."""
        self._check()
        if self.before_renewal is not None:
            self.before_renewal()
        with self._lock:
            held = [(shard, seq, rid, token) for seq, (_r, rid, token, shard) in self._held.items()
                    if seq not in self._lost]
        renewed = 0
        first = [entry for entry in held if entry[0] == 0]  # shard 0's, with the beat (the client's entry is there)
        for at in range(0, max(len(first), 1), self._batch):
            chunk = first[at:at + self._batch]
            args: list[Any] = []
            for _shard, _seq, rid, token in chunk:
                args += [rid, token]
            answer = self._beat("renew", "beat", seconds, len(chunk), args)
            renewed += self._note_lost(chunk, answer[1:])
        others = sorted((entry for entry in held if entry[0]), key=lambda entry: entry[0])
        for _shard, group in itertools.groupby(others, key=lambda entry: entry[0]):
            part = list(group)
            for at in range(0, len(part), self._batch):
                chunk = part[at:at + self._batch]
                args = []
                for _shard, _seq, rid, token in chunk:
                    args += [rid, token, b""]
                answer = self._run("renew", "FINISH", ["extend", repr(seconds), len(chunk), *args], chunk[0][0])
                renewed += self._note_lost(chunk, answer)
        return renewed

    def _note_lost(self, chunk: list[tuple[int, int, bytes, bytes]], answer: list[Any]) -> int:
        """Mark the leases of ``chunk`` a renewal found lost (a 0 in ``answer``); how many were renewed."""
        lost = [seq for (_shard, seq, _rid, _token), ok in zip(chunk, answer, strict=True) if not int(ok)]
        with self._lock:
            self._lost.update(seq for seq in lost if seq in self._held)
        return len(chunk) - len(lost)

    # ------------------------------------------------------------------ saying the client is there
    def _beat(self, what: str, mode: str, seconds: float, count: int, args: list[Any]) -> Any:
        self._beat_at = time.monotonic()
        return self._run(what, "BEAT", [self.client_id, self._info, mode, repr(seconds), count, *args], 0)

    def register(self) -> None:
        """Record this client in the crawl (and forget the clients dead for long): at open."""
        self._beat("open", "open", 0.0, 0, [])

    def touch(self) -> None:
        """Say the client is there, if it has no renewal thread and did not say so for a while."""
        if self._beat_every is not None and time.monotonic() - self._beat_at >= self._beat_every:
            self._beat("beat", "beat", 0.0, 0, [])

    def leave(self) -> None:
        """Remove this client's entry from the crawl (a clean close, after its leases were given back)."""
        self._run("close", "LEAVE", [self.client_id], 0)

    def finish_many(self, what: str, requests: list[Request], seconds: float) -> list[Request]:
        """``finish`` in batches; the requests whose leases were lost."""
        lost: list[Request] = []
        for at in range(0, len(requests), self._batch):
            chunk = requests[at:at + self._batch]
            lost += [r for r, ok in zip(chunk, self.finish(what, chunk, seconds), strict=True) if not ok]
        return lost

    def _take(self, requests: Iterable[Request], what: str) -> list[tuple[bytes, bytes, int]]:
        """(id, lease token, shard) of each request, every one the very object a pop returned and still held
        (a "release" may take those leased ahead too); else ``NotInFlight`` naming the first that is not
        (``what``: the call, for the message)."""
        out = []
        with self._lock:
            for request in requests:
                seq = getattr(request, "_seq", None)
                held = self._held.get(seq) if isinstance(seq, int) else None
                if held is None or held[0] is not request or (seq in self._waiting and what != "release"):
                    raise not_held(what, request)
                out.append((held[1], held[2], held[3]))
        return out

    def forget(self, requests: Iterable[Request]) -> None:
        """No longer hold ``requests`` (finished, or their leases lost); those not held are passed over."""
        with self._lock:
            for request in requests:
                self._held.pop(request._seq, None)  # type: ignore[arg-type]
                self._lost.discard(request._seq)
                self._waiting.pop(request._seq, None)  # type: ignore[arg-type]

    def clear(self) -> None:
        """Hold nothing (the crawl's keys are gone)."""
        with self._lock:
            self._held.clear()
            self._lost.clear()
            self._waiting.clear()

    # ------------------------------------------------------------------ what is held
    def holds(self, request: Request) -> bool:
        """True if ``request`` is the very object a pop returned and it is still held."""
        seq = getattr(request, "_seq", None)
        with self._lock:
            held = self._held.get(seq) if isinstance(seq, int) else None
            return held is not None and held[0] is request and seq not in self._waiting

    def requests(self, *, stashed: bool = False) -> list[Request]:
        """The requests held and handed out (``stashed``: those leased ahead too), oldest lease first."""
        with self._lock:
            return [held[0] for seq, held in self._held.items() if stashed or seq not in self._waiting]

    def __len__(self) -> int:
        return len(self._held)

    # ------------------------------------------------------------------ closing
    def closing(self, wait: float) -> list[Request]:
        """Refuse new pops, wait up to ``wait`` seconds for those under way, and return what is held
        then (what the close gives back)."""
        with self._lock:
            self._closing = True
            self._pops_done.wait_for(lambda: self._popping == 0, timeout=wait)
        return self.requests(stashed=True)

    def __repr__(self) -> str:
        return f"<Leases of {self.client_id}: {len(self._held)} held>"


def not_held(what: str, request: Request) -> NotInFlight:
    """The error of ``what`` given ``request``, which this client does not hold."""
    return NotInFlight(f"{what}() was given {request!r}, which this client does not hold: pass the Request object "
                       f"pop() returned, once")


class Renewal:
    """A daemon thread renewing every lease of ``leases`` for ``lease`` seconds, every ``lease / 3``.

    It holds ``leases`` by a weak reference, and ends when the leases are gone, the frontier is
    closed, or ``stop`` is called. An error of the server is logged once and tried again at the next turn.
    ``send``: what a ``nudge`` has it do ``grace`` seconds later (send the dones no step has taken yet).
    """

    def __init__(self, leases: Leases, lease: float, name: str, send: Callable[[], None] | None = None,
                 grace: float = 0.0) -> None:
        self.lease = lease
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._send, self._grace = send, grace
        self._thread = threading.Thread(target=self._loop, args=(weakref.ref(leases),), name=name, daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """True until ``stop`` is called (or the thread ended)."""
        return not self._stop.is_set() and self._thread.is_alive()

    def nudge(self) -> None:
        """Have the thread ``send`` in ``grace`` seconds (once, however many nudges come meanwhile)."""
        if not self._wake.is_set():
            self._wake.set()

    def stop(self) -> None:
        """End the thread (and wait for a renewal under way)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _sent(self, ref: weakref.ref[Leases]) -> bool:
        """``send`` after the grace, unless the thread is stopped meanwhile (then False)."""
        self._wake.clear()
        if self._stop.wait(self._grace) or ref() is None:
            return False
        try:
            if self._send is not None:
                self._send()
        except (FrontierClosed, ReferenceError):
            return False
        except FrontierError as exc:
            log.warning("dones not sent yet could not be sent (%s); their requests come back when their leases "
                        "run out", exc)
        return True

    def _loop(self, ref: weakref.ref[Leases]) -> None:
        every = self.lease / 3
        failing = ""
        beat = time.monotonic() + every
        while True:
            self._wake.wait(max(0.0, beat - time.monotonic()))
            if self._stop.is_set():
                return
            if self._wake.is_set():
                if not self._sent(ref):
                    return
                if time.monotonic() < beat:
                    continue
            beat = time.monotonic() + every
            leases = ref()
            if leases is None:
                return
            started = time.monotonic()
            try:
                leases.renew_all(self.lease)
                failing = ""
            except (FrontierClosed, ReferenceError):
                return
            except FrontierError as exc:
                if str(exc) != failing:
                    log.warning("leases could not be renewed (%s); trying again in %gs", exc, every)
                    failing = str(exc)
            finally:
                del leases
            if time.monotonic() - started > every:
                log.warning("renewing the leases took %.1fs, more than a third of the lease (%gs): "
                            "requests may go to other clients", time.monotonic() - started, self.lease)
