"""RedisFrontier: the job directory's contract on a Redis server, for many processes on many machines."""

from __future__ import annotations

import math
import os
import secrets
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..contract import MAX_ATTEMPTS, MAX_ERROR, FailedRequest, HostInfo
from ..contract import check_attempts as _attempts
from ..contract import check_host as _host
from ..contract import check_seconds as _seconds
from ..contract import check_time as _time
from ..errors import FrontierClosed, FrontierError, IncompleteCopy, NotInFlight
from ..request.model import Request
from . import lua
from .connection import (
    LeaseExpired,
    RedisMisconfigured,
    check_crawl_name,
    check_server,
    connect,
    log,
    repair_hint,
    shown_url,
    talking,
)
from .records import SeenKeys, bucket_bits, encode, pack_body, unpack_body
from .values import Values

FORMAT = "1"
_CLOSE_WAIT = 30.0  # seconds close() waits for pops under way in other threads
BATCH = 500  # requests per script call in push_many / done_many: keeps each script short
_FOREVER = 1e18  # a block "until unblock" (math.inf) as the scripts store it
_POLL_MIN, _POLL_MAX = 0.005, 0.25  # how often a waiting pop looks again (other clients push too)
COPY_MARK = "copying"  # the meta field that marks a crawl being made by 'copy' (its source), removed at the end


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class RedisFrontier:
    """A crawl frontier kept in Redis and shared by any number of processes on any number of machines.

    ``RedisFrontier("redis://host:6379/0", crawl="news")`` opens the crawl ``news`` (made on
    first use). Every client of one crawl sees one frontier: one seen set, one set of queues,
    one politeness schedule (a host's delay holds across all of them). The calls are the job
    directory's (``push``, ``push_many``, ``pop``, ``done``, ``retry``, ``len``, ``stats``,
    ``finished``, ``next_ready``, ``hosts``, ``set_delay``, ``block``/``unblock``,
    ``set_budget``, ``close``), each one atomic Lua script.

    Leases: ``pop`` leases the request to this client for ``lease`` seconds. ``done`` or
    ``retry`` acknowledge it; ``extend`` renews it. When a lease runs out (the worker died,
    or hung) any client takes the request back as pending (``stats()['reclaimed']``), and a
    late ``done`` of the old copy raises ``LeaseExpired`` without touching the new one.
    ``close()`` gives back this client's leased requests at once.

    Crawl settings (``order``, ``delay``, ``per_host``, ``prefer``) belong to the crawl:
    ``None`` keeps what the crawl has (the job directory's defaults for a new one); a value
    sets it for every client. ``per_host=0`` means no limit. ``expected_urls`` sizes the
    seen buckets when the crawl is made (about 100 fingerprints a bucket keeps each a small
    listpack hash); ``new_order`` is the order of a crawl made here when ``order`` is None.
    A crawl that ``diskfrontier copy`` is making (or was making when it was stopped) is refused
    with ``IncompleteCopy``. ``copy_of`` is for the copy itself: it opens such a crawl, and a crawl
    made by this open is marked as a copy of ``copy_of`` in the same step (``copy_mark``,
    ``made``); ``set_copy_mark(None)`` removes the mark at the end.
    Absolute times (``not_before``, ``block(until)``) are ``time.time()``
    values compared with the Redis server's clock; delays and leases are measured on it.
    """

    def __init__(
        self,
        url: str,
        *,
        crawl: str,
        lease: float = 300.0,
        delay: float | None = None,
        per_host: int | None = None,
        order: str | None = None,
        prefer: str | None = None,
        expected_urls: int = 10_000_000,
        create: bool = True,
        new_order: str = "lifo",
        copy_of: str | None = None,
    ) -> None:
        self.crawl = check_crawl_name(crawl)
        self.lease = _seconds("lease", lease)
        if self.lease <= 0:
            raise ValueError("lease must be more than 0 seconds")
        if delay is not None:
            delay = _seconds("delay", delay)
        if per_host is not None and (isinstance(per_host, bool) or not isinstance(per_host, int) or per_host < 0):
            raise ValueError(f"per_host must be None, 0 (no limit) or a whole number, got {per_host!r}")
        if order not in (None, "lifo", "fifo") or new_order not in ("lifo", "fifo"):
            raise ValueError(f"order must be 'lifo' or 'fifo', got {order if order is not None else new_order!r}")
        if prefer not in (None, "priority", "idle"):
            raise ValueError(f"prefer must be 'priority' or 'idle', got {prefer!r}")
        if isinstance(expected_urls, bool) or not isinstance(expected_urls, int) or expected_urls < 1:
            raise ValueError(f"expected_urls must be a whole number of at least 1, got {expected_urls!r}")
        self.url = url
        self._closed = True
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._pops_done = threading.Condition(self._lock)  # close() waits for the pops under way
        self._popping = 0
        self._closing = False
        self._held: dict[int, tuple[Request, bytes, bytes]] = {}  # local number -> (request, id, lease token)
        self._count = 0
        self._client_id = f"{secrets.token_hex(6)}-{os.getpid()}"
        self._redis = connect(url)
        self._meta = f"df:{{{self.crawl}}}:meta"
        self._prefix = f"df:{{{self.crawl}}}:"
        self._values = Values(url)
        try:
            self._open(url, order, delay, per_host, prefer, expected_urls, create, new_order, copy_of)
        except BaseException:
            self._closed = True
            self._redis.close()  # the caller never gets this object to close
            raise

    def _open(self, url: str, order: str | None, delay: float | None, per_host: int | None, prefer: str | None,
              expected_urls: int, create: bool, new_order: str, copy_of: str | None) -> None:
        check_server(self._redis, url, self.crawl)
        with talking(url, "open"):
            mark = self._redis.hget(self._meta, COPY_MARK)
        self.copy_mark: str | None = None if mark is None else mark.decode("utf-8", "replace")
        if self.copy_mark is not None and copy_of is None:
            raise IncompleteCopy(f"crawl {self.crawl!r} in Redis at {shown_url(url)} is an unfinished copy of "
                                 f"{self.copy_mark} (the copy was stopped before its end, or is still running): "
                                 f"run the same 'diskfrontier copy' again to redo it, or drop the crawl")
        self._scripts = {name: self._redis.register_script(getattr(lua, name))
                         for name in ("OPEN", "PUSH", "POP", "FINISH", "SET_HOST", "LOOK", "MARK_SEEN", "SET_DONE",
                                     "REQUEUE_FAILED", "REPLACE", "RECORD_FAILED")}
        answer = self._run("open", "OPEN", [
            FORMAT, order or "", "" if delay is None else repr(delay), "" if per_host is None else str(per_host),
            prefer or "", str(bucket_bits(expected_urls)), "create" if create else "open", new_order,
            copy_of or ""])
        if answer[0] == 0:
            raise FrontierError(f"there is no crawl {self.crawl!r} in Redis at {self._shown_url}")
        if answer[0] == -1:
            raise FrontierError(f"crawl {self.crawl!r} in Redis at {self._shown_url} is of format "
                                f"{answer[1].decode(errors='replace') or '?'}; this version of diskfrontier reads "
                                f"format {FORMAT}")
        v, meta = self._values, self._meta
        self.order = v.text(answer[1], f"{meta} field order")
        if self.order not in ("lifo", "fifo"):
            raise v.bad(f"{meta} field order", f"is {self.order!r}, not 'lifo' or 'fifo'")
        if order is not None and order != self.order:
            raise FrontierError(f"crawl {self.crawl!r} is {self.order.upper()}; its order is fixed when it is made "
                                f"(open it with order=None or order={self.order!r})")
        self.made = bool(answer[7])  # this open made the crawl (marked, with copy_of)
        if self.made and copy_of is not None:
            self.copy_mark = copy_of
        self.delay = v.real(answer[2], f"{meta} field delay", 0.0)
        self.per_host = v.whole(answer[3], f"{meta} field per_host", 0) or None
        self.prefer = v.text(answer[4], f"{meta} field prefer") if answer[4] is not None else "priority"
        self._seen_keys = SeenKeys(v.whole(answer[5], f"{meta} field bits"))
        if answer[6]:
            self._place_hosts_again()
        self._closed = False

    def _place_hosts_again(self) -> None:
        """Place every host of the crawl again under its changed settings, ``BATCH`` hosts a
        script call (a lowered delay wakes a host at once, a raised ``per_host`` frees a held one,
        a changed ``prefer`` re-keys the ready hosts). If this client dies half-way, the hosts
        not reached are placed again when anything touches them."""
        batch: list[bytes] = []
        with talking(self.url, "open"):
            for host in self._redis.sscan_iter(f"{self._prefix}hosts", count=BATCH):
                batch.append(host)
                if len(batch) == BATCH:
                    self._scripts["REPLACE"](keys=[self._meta], args=batch)
                    batch = []
            if batch:
                self._scripts["REPLACE"](keys=[self._meta], args=batch)

    # ------------------------------------------------------------------ plumbing
    @property
    def _shown_url(self) -> str:
        return shown_url(self.url)

    def set_copy_mark(self, source: str | None) -> None:
        """Mark the crawl as being made by a copy of ``source`` (None: remove the mark, the copy's last
        step). A marked crawl is refused by every open but ``copying=True`` (``IncompleteCopy``)."""
        self._check_open()
        with talking(self.url, "copy mark"):
            if source is None:
                self._redis.hdel(self._meta, COPY_MARK)
            else:
                self._redis.hset(self._meta, COPY_MARK, source)
        self.copy_mark = source

    def _run(self, what: str, name: str, args: list[Any]) -> Any:
        with talking(self.url, what):
            return self._scripts[name](keys=[self._meta], args=args)

    @property
    def _hint(self) -> str:
        return repair_hint(self.url, self.crawl)

    def _body(self, key: str, rid: bytes, body: Any) -> Request:
        """The request stored as ``rid`` in hash ``key`` of the crawl (``CrawlDamaged`` if it is not one)."""
        where = f"{self._prefix}{key} field {rid.decode(errors='replace')}"
        return unpack_body(body, where, hint=self._hint)

    def _check_open(self) -> None:
        if self._closed:
            raise FrontierClosed(f"crawl {self.crawl!r} at {self._shown_url} was closed; open it again")
        if os.getpid() != self._pid:
            raise FrontierError(f"this RedisFrontier was opened by pid {self._pid}: a forked child must open "
                                f"its own (its leases are the parent's)")

    def __enter__(self) -> RedisFrontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RedisFrontier {self.crawl!r} at {self._shown_url}>"

    # ------------------------------------------------------------------ push
    def _push_args(self, request: Request, not_before: float | None, record: bytes | None = None) -> list[Any]:
        """The PUSH script's arguments for ``request`` (its own ``attempts`` and ``not_before`` are
        kept, as a request read back from an export or another crawl carries them)."""
        if request.dont_filter:
            key, field = "", b""
        else:
            key, field = self._seen_keys.of(request.fingerprint)
        if not_before is None:
            not_before = 0.0 if request.not_before is None else _time("Request.not_before", request.not_before)
        body = pack_body(request, encode(request) if record is None else record, _attempts(request.attempts),
                         not_before)
        return [key, field, request.slot, request.priority, body, repr(not_before)]

    def push_record(self, request: Request, record: bytes) -> bool:
        """``push`` for a request already encoded as ``record`` (a msgpack request record)."""
        args = self._push_args(request, None, record)
        self._check_open()
        return bool(self._run("push", "PUSH", [1, *args])[0])

    def push(self, request: Request, *, not_before: float | None = None) -> bool:
        """Queue ``request``; False if its fingerprint was seen before (or True if ``dont_filter``).

        Dedupe, store and enqueue are one script: once this returns True the request is in
        Redis (durable as its ``appendfsync`` makes it). ``not_before``: a ``time.time()``
        value before which it is not handed out.
        """
        if not isinstance(request, Request):
            raise TypeError(f"push() takes a diskfrontier.Request, got {type(request).__name__}")
        args = self._push_args(request, None if not_before is None else _time("not_before", not_before))
        self._check_open()
        return bool(self._run("push", "PUSH", [1, *args])[0])

    def push_many(self, requests: Iterable[Request]) -> int:
        """Push many requests, ``BATCH`` to a script call; return how many were queued.

        Every request is checked and encoded first: a bad one raises before anything is sent.
        """
        args: list[Any] = []
        for request in requests:
            if not isinstance(request, Request):
                raise TypeError(f"push_many() takes diskfrontier.Request objects, got {type(request).__name__}")
            args.extend(self._push_args(request, None))
        self._check_open()
        queued = 0
        step = BATCH * 6
        for at in range(0, len(args), step):
            chunk = args[at:at + step]
            queued += sum(self._run("push_many", "PUSH", [len(chunk) // 6, *chunk]))
        return queued

    def has_seen(self, fingerprint: bytes) -> bool:
        """True if ``fingerprint`` is in the crawl's seen set."""
        self._check_open()
        key, field = self._seen_keys.of(fingerprint)
        with talking(self.url, "has_seen"):
            return bool(self._redis.hexists(self._prefix + key, field))

    def mark_seen(self, fingerprints: Iterable[bytes]) -> int:
        """Add fingerprints to the seen set without queuing anything; return how many were new."""
        self._check_open()
        args: list[Any] = []
        for fingerprint in fingerprints:
            args.extend(self._seen_keys.of(fingerprint))
        fresh = 0
        for at in range(0, len(args), BATCH * 2):
            chunk = args[at:at + BATCH * 2]
            fresh += self._run("mark_seen", "MARK_SEEN", [len(chunk) // 2, *chunk])
        return fresh

    # ------------------------------------------------------------------ pop
    def pop(self, timeout: float | None = 0.0) -> Request | None:
        """The next ready request, leased to this client; None if none is ready.

        ``timeout=0`` does not wait; ``timeout=t`` waits up to t seconds; ``timeout=None``
        waits until one is ready, and returns None once the crawl is ``finished`` (nothing
        pending, nothing leased by any client) or when nothing could become ready by waiting.
        A waiting pop looks again every few milliseconds up to a quarter second (other
        clients' pushes and dones are not signalled), and wakes at once when something
        held back by time is due.
        """
        if timeout is not None and timeout != 0.0:
            timeout = _seconds("timeout", timeout)
        self._check_open()
        got = self.pop_many(1)
        if got or timeout == 0:
            return got[0] if got else None
        deadline = None if timeout is None else time.monotonic() + timeout
        poll = _POLL_MIN
        while True:
            state = self._state
            if timeout is None and state is not None and state[3] == 0 and (state[2] == 0 or state[0] is None):
                return None  # finished, or only what nothing but another call could free
            wait = poll
            if state is not None and state[0] is not None:
                wait = min(wait, max(0.0, state[0] - state[1]) + 0.001)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                wait = min(wait, left)
            time.sleep(wait)
            poll = min(poll * 2, _POLL_MAX)
            self._check_open()
            got = self.pop_many(1)
            if got:
                return got[0]

    def pop_many(self, count: int) -> list[Request]:
        """Up to ``count`` ready requests in one script call, each leased (``pop`` order)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be a whole number of at least 1, got {count!r}")
        self._check_open()
        with self._lock:
            if self._closing:
                raise FrontierClosed(f"crawl {self.crawl!r} at {self._shown_url} is being closed")
            self._popping += 1
        try:
            answer = self._run("pop", "POP", [count, repr(self.lease), self._client_id])
            got = int(answer[0])
            self._state = None
            if got < count:
                event, now, pending, inflight = answer[1].decode().split(" ")
                self._state = (float(event) if event else None, float(now), int(pending), int(inflight))
            out = []
            with self._lock:
                for k in range(got):
                    rid, body, token, _expiry = answer[2 + 4 * k: 6 + 4 * k]
                    request = self._body("req", rid, body)
                    self._count += 1
                    request._seq = self._count
                    self._held[self._count] = (request, rid, token)
                    out.append(request)
            return out
        finally:
            with self._lock:
                self._popping -= 1
                self._pops_done.notify_all()

    _state: tuple[float | None, float, int, int] | None = None

    def next_event_seen(self) -> float | None:
        """When something held back by time becomes ready (``time.time()`` terms), as the last
        ``pop_many`` that came back short saw it (no round trip); None if it saw nothing waiting, or none
        came back short."""
        state = self._state
        if state is None or state[0] is None:
            return None
        return time.time() + max(0.0, state[0] - state[1])

    # ------------------------------------------------------------------ done, retry, extend
    def _take(self, request: Request, what: str) -> tuple[int, bytes, bytes]:
        seq = getattr(request, "_seq", None)
        with self._lock:
            held = self._held.get(seq) if isinstance(seq, int) else None
            if held is None or held[0] is not request:
                raise NotInFlight(f"{what}() was given {request!r}, which this client does not hold: pass the "
                                  f"Request object pop() returned, once")
            return seq, held[1], held[2]  # type: ignore[return-value]

    def _finish(self, what: str, requests: list[Request], seconds: float, bodies: list[bytes] | None) -> list[int]:
        self._check_open()
        taken = [self._take(r, what) for r in requests]
        args: list[Any] = []
        for k, (_, rid, token) in enumerate(taken):
            args += [rid, token, bodies[k] if bodies else b""]
        answer = self._run(what, "FINISH", [what, repr(seconds), len(taken), *args])
        if what != "extend":
            with self._lock:
                for seq, _, _ in taken:
                    self._held.pop(seq, None)
        return [int(x) for x in answer]

    def _one(self, what: str, request: Request, seconds: float, body: bytes | None) -> None:
        ok = self._finish(what, [request], seconds, None if body is None else [body])
        if not ok[0]:
            raise LeaseExpired(f"{what}() of {request!r}: its lease ran out and it was taken back (another client "
                               f"may hold it now); nothing was changed. Renew long work with extend()")

    def done(self, request: Request, *, refetch_after: float | None = None) -> None:
        """Acknowledge ``request`` (as ``pop`` returned it): it will never be handed out again.

        ``refetch_after=s``: finished now, and the same request comes back as pending after
        s seconds (its attempts from 0). Raises ``LeaseExpired`` if its lease was taken back.
        """
        if refetch_after is None:
            self._one("done", request, 0.0, None)
            return
        after = _seconds("refetch_after", refetch_after)
        self._one("refetch", request, after, pack_body(request, encode(request), 0, 0.0))
        request.attempts = 0
        request.not_before = time.time() + after if after else None

    def done_many(self, requests: Iterable[Request]) -> None:
        """``done`` for many requests in one script call; ``LeaseExpired`` names those that were
        taken back (the others are done)."""
        batch = list(requests)
        lost: list[Request] = []
        for at in range(0, len(batch), BATCH):
            chunk = batch[at:at + BATCH]
            for request, ok in zip(chunk, self._finish("done", chunk, 0.0, None), strict=True):
                if not ok:
                    lost.append(request)
        if lost:
            raise LeaseExpired(f"done_many(): the leases of {len(lost)} requests ran out and they were taken back "
                               f"(the first: {lost[0]!r}); the others are done")

    def retry(self, request: Request, *, delay: float = 0.0) -> None:
        """Give a leased request back, ready after ``delay`` seconds, with ``attempts`` one higher.

        One script: the lease ends and the request is pending again, stored as it is now.
        """
        seconds = _seconds("delay", delay)
        attempts = min(request.attempts + 1, MAX_ATTEMPTS)
        self._one("retry", request, seconds, pack_body(request, encode(request), attempts, 0.0))
        request.attempts = attempts
        request.not_before = time.time() + seconds if seconds else None

    def fail(self, request: Request, error: str) -> None:
        """Finish a leased request as failed, with ``error`` (its text kept, up to 4,000 bytes) and
        the time: it is not handed out again until ``requeue_failed``. Counted in its host's done."""
        if not isinstance(error, str):
            raise TypeError(f"fail(): error must be a str, got {type(error).__name__}")
        text = error.encode("utf-8", "replace")[:MAX_ERROR].decode("utf-8", "ignore").encode()
        self._one("fail", request, 0.0, struct.pack(">d", time.time()) + text)

    def failed(self) -> list[FailedRequest]:
        """Every failed request of the crawl (not requeued), oldest failure first."""
        self._check_open()
        p = self._prefix
        with talking(self.url, "failed"):
            pipe = self._redis.pipeline(transaction=False)
            pipe.hgetall(p + "failed")
            pipe.hgetall(p + "failinfo")
            bodies, infos = pipe.execute()
        out = []
        for rid, body in bodies.items():
            info = infos.get(rid, b"\0" * 8)
            if len(info) < 8:
                raise self._values.bad(f"{p}failinfo field {rid.decode(errors='replace')}",
                                       "does not hold a failure diskfrontier stored")
            (at,) = struct.unpack_from(">d", info)
            request = self._body("failed", rid, body)
            out.append(FailedRequest(request, info[8:].decode("utf-8", "replace"), at))
        return sorted(out, key=lambda failed: failed.failed_at)

    def requeue_failed(self, limit: int | None = None) -> int:
        """Put failed requests back as pending (attempts 0), oldest failure first; returns how many."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"requeue_failed(): limit must be None or a whole number of at least 1, got {limit!r}")
        self._check_open()
        return int(self._run("requeue_failed", "REQUEUE_FAILED", [limit or 0]))

    def record_failed(self, failed: Iterable[FailedRequest]) -> int:
        """Store requests as failed, each with its error text, ``failed_at`` time and ``request.attempts``
        as given (for a crawl copied in from elsewhere); returns how many. As ``fail`` leaves them:
        ``failed()`` lists them, each counts as done for its host, and its fingerprint is marked seen
        (no dedupe: each is stored even if it was seen)."""
        args: list[Any] = []
        for entry in failed:
            if not isinstance(entry, FailedRequest):
                raise TypeError(f"record_failed() takes FailedRequest objects, got {type(entry).__name__}")
            if not isinstance(entry.error, str):
                raise TypeError(f"record_failed(): error must be a str, got {type(entry.error).__name__}")
            request = entry.request
            at = _time("record_failed(): failed_at", entry.failed_at)
            key, field = ("", b"") if request.dont_filter else self._seen_keys.of(request.fingerprint)
            text = entry.error.encode("utf-8", "replace")[:MAX_ERROR].decode("utf-8", "ignore").encode()
            args += [key, field, pack_body(request, encode(request), _attempts(request.attempts), 0.0),
                     struct.pack(">d", at) + text]
        self._check_open()
        stored = 0
        step = BATCH * 4
        for at in range(0, len(args), step):
            chunk = args[at:at + step]
            stored += int(self._run("record_failed", "RECORD_FAILED", [len(chunk) // 4, *chunk]))
        return stored

    def holds(self, request: Request) -> bool:
        """True if ``request`` is leased to this client (what ``done`` would take)."""
        seq = getattr(request, "_seq", None)
        with self._lock:
            held = self._held.get(seq) if isinstance(seq, int) else None
            return held is not None and held[0] is request

    def extend(self, request: Request, seconds: float | None = None) -> None:
        """Renew the lease of ``request``: it runs out ``seconds`` (default: ``lease``) from now."""
        renew = self.lease if seconds is None else _seconds("seconds", seconds)
        self._one("extend", request, renew, None)

    def extend_many(self, requests: Iterable[Request], seconds: float | None = None) -> list[Request]:
        """``extend`` for many requests in one script call; returns those whose leases were already lost."""
        renew = self.lease if seconds is None else _seconds("seconds", seconds)
        batch = list(requests)
        lost: list[Request] = []
        for at in range(0, len(batch), BATCH):
            chunk = batch[at:at + BATCH]
            lost += [r for r, ok in zip(chunk, self._finish("extend", chunk, renew, None), strict=True) if not ok]
        with self._lock:
            for request in lost:
                self._held.pop(request._seq, None)  # type: ignore[arg-type]
        return lost

    # ------------------------------------------------------------------ reading the whole crawl
    def pending_requests(self, *, leased: bool = True) -> Iterator[Request]:
        """Every request of the crawl not done, in no particular order (``leased=False``: not those
        leased to a client now). Reads with HSCAN: safe beside running clients, though a request
        moved meanwhile may be seen twice or not at all."""
        self._check_open()
        p = self._prefix
        with talking(self.url, "pending_requests"):
            owners = set() if leased else set(self._redis.hkeys(p + "owner"))
            for rid, body in self._redis.hscan_iter(p + "req", count=1000):
                if rid not in owners:
                    yield self._body("req", rid, body)

    def seen_fingerprints(self) -> Iterator[bytes]:
        """Every fingerprint in the crawl's seen set (SCAN over its buckets, then HSCAN of each)."""
        self._check_open()
        p = self._prefix
        with talking(self.url, "seen_fingerprints"):
            for pattern in ("s:*", "x:*"):
                for key in self._redis.scan_iter(match=_glob_escape(p) + pattern, count=1000):
                    suffix = key.decode(errors="replace")[len(p):]
                    for field in self._redis.hkeys(key):
                        try:
                            yield self._seen_keys.fingerprint(suffix, field)
                        except ValueError:
                            raise self._values.bad(key.decode(errors="replace"), "is not a seen bucket "
                                                   "diskfrontier made") from None

    # ------------------------------------------------------------------ state
    def _look(self) -> tuple[int, int, int, float | None, float]:
        self._check_open()
        pending, inflight, ready, event, now = self._run("look", "LOOK", [])
        return int(pending), int(inflight), int(ready), float(event) if event else None, float(now)

    def __len__(self) -> int:
        """Requests pending in the crawl (not counting those leased to any client)."""
        self._check_open()
        with talking(self.url, "len"):
            pending = self._redis.hget(self._meta, "pending")
        return self._values.whole(pending, f"{self._meta} field pending", 0)

    @property
    def finished(self) -> bool:
        """True when nothing is pending and nothing is leased, by any client."""
        pending, inflight, _, _, _ = self._look()
        return pending == 0 and inflight == 0

    def next_ready(self) -> float | None:
        """When the next pending request may be handed out (``time.time()`` terms; now if one
        may be now), or None if none can become ready by waiting alone. A lease running out is such
        a time: its request is pending again then (a job directory has no leases, and says None)."""
        pending, _, ready, event, now = self._look()
        local = time.time()
        if ready:
            return local
        if pending == 0 and event is None:
            return None
        return None if event is None else local + max(0.0, event - now)

    @property
    def in_flight(self) -> list[Request]:
        """The requests this client holds leases on."""
        with self._lock:
            return [held[0] for held in self._held.values()]

    def stats(self) -> dict[str, Any]:
        """The crawl's counters (all clients) and this client's leases."""
        self._check_open()
        p = self._prefix
        with talking(self.url, "stats"):
            pipe = self._redis.pipeline(transaction=False)
            pipe.hgetall(self._meta)
            pipe.zcard(p + "delayed")
            pipe.scard(p + "hosts")
            pipe.zcard(p + "ready")
            meta, delayed, hosts, ready = pipe.execute()
        v, key = self._values, self._meta
        meta = {k.decode(errors="replace"): value for k, value in meta.items()}
        count = {name: v.whole(meta.get(name), f"{key} field {name}", 0) for name in (
            "pending", "inflight", "done", "seen", "pushed", "duplicates", "retried", "refetch_scheduled", "reclaimed",
            "failed")}
        return {
            "backend": "redis",
            "crawl": self.crawl,
            "pending": count["pending"],
            "in_flight": count["inflight"],
            "leased_here": len(self._held),
            "done": count["done"],
            "seen": count["seen"],
            "pushed": count["pushed"],
            "duplicates": count["duplicates"],
            "retried": count["retried"],
            "refetch_scheduled": count["refetch_scheduled"],
            "reclaimed": count["reclaimed"],
            "failed": count["failed"],
            "delayed": delayed,
            "hosts": hosts,
            "ready_hosts": ready,
            "order": self.order,
            "delay": v.real(meta.get("delay"), f"{key} field delay", 0.0),  # the crawl's, as any client last set them
            "per_host": v.whole(meta.get("per_host"), f"{key} field per_host", 0) or None,
            "prefer": v.text(meta.get("prefer", self.prefer), f"{key} field prefer"),
            "lease": self.lease,
            "seen_bucket_bits": self._seen_keys.bits,
        }

    # ------------------------------------------------------------------ hosts
    def _set_host(self, host: str, field: str, value: str) -> None:
        self._check_open()
        self._run("host setting", "SET_HOST", [host, field, value])

    def set_delay(self, host: str, seconds: float | None) -> None:
        """Wait at least ``seconds`` between hand-outs of ``host`` by any client (None: the crawl's delay)."""
        name = _host(host)
        self._set_host(name, "dl", "" if seconds is None else repr(_seconds("seconds", seconds)))

    def block(self, host: str, until: float) -> None:
        """Hand out nothing of ``host`` before ``until`` (``time.time()``; ``math.inf``: until ``unblock``)."""
        name = _host(host)
        value = _FOREVER if until == math.inf else _time("block(): until", until)
        self._set_host(name, "b", repr(value))

    def unblock(self, host: str) -> None:
        """Undo ``block``."""
        self._set_host(_host(host), "b", "")

    def set_budget(self, host: str, budget: int | None) -> None:
        """At most ``budget`` requests of ``host`` done or leased, ever (None: no limit; at most
        2**53 - 1, the largest whole number the scripts' numbers hold exactly)."""
        name = _host(host)
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or not 0 <= budget < 2**53):
            raise ValueError(f"set_budget(): budget must be None or a whole number from 0 to 2**53 - 1, got {budget!r}")
        self._set_host(name, "bu", "" if budget is None else str(budget))

    def set_done_count(self, host: str, done: int) -> None:
        """Set the done count of ``host`` (for a crawl copied in from elsewhere)."""
        name = _host(host)
        if isinstance(done, bool) or not isinstance(done, int) or not 0 <= done < 2**53:
            raise ValueError(f"set_done_count(): done must be a whole number from 0 to 2**53 - 1, got {done!r}")
        self._check_open()
        self._run("set_done_count", "SET_DONE", [name, done])

    def hosts(self) -> list[HostInfo]:
        """Every host of the crawl: pending, leased and done counts, delay, ready time, block and budget."""
        self._check_open()
        p = self._prefix
        with talking(self.url, "hosts"):
            default_delay = self._values.real(self._redis.hget(self._meta, "delay"), f"{self._meta} field delay", 0.0)
            names = sorted(self._values.text(name, f"{p}hosts member {name!r}")
                           for name in self._redis.sscan_iter(p + "hosts", count=1000))
            rows: list[Any] = []
            for at in range(0, len(names), 1000):
                pipe = self._redis.pipeline(transaction=False)
                for name in names[at:at + 1000]:
                    pipe.hmget(p + "h:" + name, *_HOST_FIELDS)
                rows += pipe.execute()
        bad = self._values.bad
        infos = (_host_info(name, row, default_delay, bad, p) for name, row in zip(names, rows, strict=True))
        return [info for info in infos if info is not None]

    def host(self, name: str) -> HostInfo | None:
        """One host as ``hosts()`` tells of it (one round trip); None if the crawl has nothing of it."""
        name = _host(name)
        self._check_open()
        with talking(self.url, "host"):
            pipe = self._redis.pipeline(transaction=False)
            pipe.hget(self._meta, "delay")
            pipe.hmget(self._prefix + "h:" + name, *_HOST_FIELDS)
            delay, row = pipe.execute()
        default_delay = self._values.real(delay, f"{self._meta} field delay", 0.0)
        return _host_info(name, row, default_delay, self._values.bad, self._prefix)

    def drop(self) -> int:
        """Delete every key of the crawl (its requests, leases, seen set and hosts) and close;
        returns how many keys were deleted. Other clients of the crawl get errors from then on.
        The ``meta`` key goes last (SCAN and UNLINK in batches, never KEYS): a drop stopped half-way
        leaves a crawl that is still there to be dropped again."""
        self._check_open()
        deleted = 0
        meta = self._meta.encode()
        with talking(self.url, "drop"):
            batch: list[bytes] = []
            for key in self._redis.scan_iter(match=_glob_escape(self._prefix) + "*", count=1000):
                if key == meta:
                    continue  # last: while it is there the crawl exists, and a drop stopped half-way is done again
                batch.append(key)
                if len(batch) >= 1000:
                    deleted += self._redis.unlink(*batch)
                    batch = []
            if batch:
                deleted += self._redis.unlink(*batch)
            deleted += self._redis.unlink(meta)
        with self._lock:
            self._held.clear()
        self.close()
        return deleted

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        """Give back this client's leased requests (pending again at once) and disconnect."""
        if self._closed:
            return
        if os.getpid() != self._pid:
            self._closed = True
            return
        with self._lock:  # a pop under way in another thread leases what it gets: give that back too
            self._closing = True
            self._pops_done.wait_for(lambda: self._popping == 0, timeout=_CLOSE_WAIT)
        try:
            held = self.in_flight
            for at in range(0, len(held), BATCH):
                self._finish("release", held[at:at + BATCH], 0.0, None)
        except FrontierError as exc:
            log.warning("close(): %d leased requests of crawl %r could not be given back (%s); they come back "
                        "when their leases run out", len(self._held), self.crawl, exc)
        finally:
            self._closed = True
            self._redis.close()


_HOST_FIELDS = ("p", "i", "d", "dl", "b", "bu", "t")  # a host hash's fields, in the order _host_info reads them


def _host_info(name: str, row: list[Any], default_delay: float, bad: Callable[[str, str], Exception],
               prefix: str) -> HostInfo | None:
    """The ``HostInfo`` of a host hash's fields; None if it holds nothing worth showing. A field that
    is not a number is ``bad(where, problem)``."""
    numbers: list[float | None] = []
    for field, value in zip(_HOST_FIELDS, row, strict=True):
        try:
            number = None if value is None else float(value)
        except ValueError:
            number = math.nan
        if number is not None and not math.isfinite(number):
            raise bad(f"{prefix}h:{name} field {field}", f"is {value[:60]!r}, not a finite number")
        numbers.append(number)
    pending, inflight, done = (int(n or 0) for n in numbers[:3])
    delay = default_delay if numbers[3] is None else numbers[3]
    blocked = numbers[4]
    if blocked is not None and blocked >= _FOREVER:
        blocked = math.inf
    budget = int(numbers[5]) if numbers[5] is not None else None
    ready_at = None
    if pending:
        last = numbers[6] if numbers[6] is not None and delay > 0 else 0.0
        ready_at = max(last + delay if last else 0.0, blocked or 0.0)
    if pending or inflight or done or row[3] is not None or blocked is not None or budget is not None:
        return HostInfo(name, pending, inflight, done, delay, ready_at, blocked, budget)
    return None


__all__ = ["LeaseExpired", "RedisFrontier", "RedisMisconfigured"]
