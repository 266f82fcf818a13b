"""robots.txt for ``crawl()``: fetched once a site, kept in the frontier, obeyed with protego.

``RobotsRules.check(request)`` says whether a request may be fetched:

* A site is an origin, as RFC 9309 has it: scheme, host and port (``site_of``). Its robots.txt
  (``scheme://host[:port]/robots.txt``) is fetched before its first request, once (workers of the
  same site wait for that one fetch), and kept in the frontier (``set_robots``) under the origin's
  key, with its status and time, so that a restart does not fetch it again. It is fetched again
  once it is ``ttl`` seconds old.
* 2xx: its rules decide (protego, for ``user_agent``), and its ``Crawl-delay`` becomes the delay of
  the request's slot (``set_delay``; a host: the largest Crawl-delay of the host's sites), never
  below the frontier's own delay.
* 4xx (and a redirect that ends nowhere): no rules, everything is allowed (RFC 9309, 2.3.1.3).
* 5xx, no answer within ``timeout`` or no connection: that site is held back (``backoff``
  seconds, doubled for each failure in a row, at most ``backoff_max``) and its request is to be
  tried again when the hold ends; nothing is kept, so the next try fetches it again (RFC 9309,
  2.3.1.4, without assuming "disallow all" for ever). The hold is the site's, not its host's: the
  host's other sites (other ports, the other scheme) go on, which a block of the host (the
  politeness slot) would stop. It lives in this object (a restart fetches the robots.txt again).

How robots.txt is fetched is ``fetch(url, user_agent) -> (status, body)`` (status 0: no answer);
by default ``fetch_with_urllib`` (``robotsfetch``: one deadline for the whole fetch). Whatever the
fetch, it runs in a thread of its own (an async one, under ``acheck``, as a task): a worker waits
for it at most ``timeout`` seconds (then it is no answer) and not at all once its run stops
(``check(request, stop)``: the verdict is then ``STOPPED``, and the request is left as it is).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from hashlib import sha256
from typing import Any, cast
from urllib.parse import urlsplit

from protego import Protego

from ..contract.backoff import host_backoff
from ..contract.checks import MAX_ROBOTS, MAX_SECONDS
from ..contract.protocol import FrontierProtocol
from ..contract.values import RobotsEntry
from ..request.model import MAX_SLOT_BYTES, Request
from .robotsfetch import DEFAULT_TIMEOUT, Fetch, await_fetch, fetch_with_urllib, run_fetch

_TICK = 0.05  # how often a worker waiting for another's fetch of the same site looks at its run's stop
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Verdict:
    """What robots.txt says of one request: ``allow``, ``disallow``, or ``hold`` until ``until``;
    ``stopped``: the run stopped before the site's robots.txt was known (nothing is decided)."""

    kind: str
    until: float = 0.0


ALLOW = Verdict("allow")
DISALLOW = Verdict("disallow")
STOPPED = Verdict("stopped")


def site_of(url: str) -> tuple[str, str]:
    """(the key robots.txt is kept under: the URL's origin ``scheme://host[:port]``, lower-cased, the
    port left out when it is the scheme's default; the robots.txt URL) of a URL."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # a port out of range: the fetch will find no answer
        port = None
    key = f"{scheme}://{host}" if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{scheme}://{host}:{port}"
    if len(key.encode("utf-8", "replace")) > MAX_SLOT_BYTES:  # a key is a host name as the frontier takes one
        key = f"{scheme}://{sha256(key.encode('utf-8', 'replace')).hexdigest()}"
    return key, f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}/robots.txt"


class RobotsRules:
    """robots.txt of every site a crawl meets, for one ``user_agent`` (see the module docstring).

    ``timeout``: the longest a fetch of robots.txt is waited for, all of it (the default fetch gives
    up then too); ``backoff`` and ``backoff_max``: how long a site whose robots.txt could not be
    fetched is held back."""

    def __init__(self, frontier: FrontierProtocol, user_agent: str, *, ttl: float = 86400.0,
                 fetch: Fetch | None = None, backoff: float = 60.0, backoff_max: float = 3600.0,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        if not isinstance(user_agent, str) or not user_agent.strip():
            raise ValueError("robots: user_agent must name the crawler (a non-empty str), e.g. 'mybot/1.0'")
        self.frontier = frontier
        self.user_agent = user_agent
        self.ttl = ttl
        self.timeout = timeout
        self.fetch: Fetch = fetch or functools.partial(fetch_with_urllib, timeout=timeout)
        self.backoff, self.backoff_max = backoff, backoff_max
        self.base_delay = float(frontier.stats().get("delay") or 0.0)
        self.fetched = 0  # robots.txt fetches made
        self._rules: dict[str, tuple[float, Protego | None]] = {}  # key -> (fetched_at, rules; None: allow all)
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._fetching: dict[str, asyncio.Future[None]] = {}  # key -> set when a task's fetch of it ends
        self._held: dict[str, float] = {}  # key -> until when the site is held back (a 5xx or no answer)
        self._failures: dict[str, int] = {}  # key -> fetches failed in a row
        self._delays: dict[str, dict[str, float]] = {}  # slot -> key -> the Crawl-delay its robots.txt asks

    # ------------------------------------------------------------------ deciding
    def check(self, request: Request, stop: threading.Event | None = None) -> Verdict:
        """The verdict for ``request``, fetching its site's robots.txt first if it is not known;
        ``STOPPED`` as soon as ``stop`` is set while it waits for a fetch."""
        key, url = site_of(request.url)
        known = self._known(key, request)
        if known is None:
            lock = self._lock_of(key)
            while not lock.acquire(timeout=_TICK):  # another worker fetches it
                if stop is not None and stop.is_set():
                    return STOPPED
            try:
                known = self._known(key, request)
                if known is None:
                    hold = self._holding(key)
                    if hold is not None:
                        return hold
                    result = run_fetch(self.fetch, url, self.user_agent, self.timeout, stop)
                    if result is None:
                        return STOPPED
                    return self._learned(key, request, *result)
            finally:
                lock.release()
        return self._judge(known[1], request)

    async def acheck(self, request: Request, call: Callable[..., Awaitable[Any]] | None = None,
                     stop: threading.Event | None = None) -> Verdict:
        """``check`` for asyncio tasks: an async ``fetch`` is run as a task, a plain one in a thread of
        its own; the frontier's calls go through ``call(function, *args)`` (an ``AsyncFrontier``'s
        ``call``; by default ``asyncio.to_thread``), so that the loop is never blocked."""
        hop: Callable[..., Awaitable[Any]] = call or asyncio.to_thread
        loop = asyncio.get_running_loop()
        key, url = site_of(request.url)
        while True:
            known = self._fresh(key) or await hop(self._known, key, request)
            if known is not None:
                return self._judge(known[1], request)
            fetching = self._fetching.get(key)
            if fetching is None or fetching.get_loop() is not loop:  # (one left by an earlier run's loop)
                break
            while not fetching.done():  # another task fetches it
                if stop is not None and stop.is_set():
                    return STOPPED
                await asyncio.wait({fetching}, timeout=_TICK)
        # No await from here to the fetch: no other task can start one, or end one, meanwhile.
        known = self._fresh(key)
        if known is not None:
            return self._judge(known[1], request)
        hold = self._holding(key)
        if hold is not None:
            return hold
        fetching = self._fetching[key] = loop.create_future()
        try:
            result = await await_fetch(self.fetch, url, self.user_agent, self.timeout, stop)
            if result is None:
                return STOPPED
            return cast(Verdict, await hop(self._learned, key, request, *result))
        finally:
            if self._fetching.get(key) is fetching:
                del self._fetching[key]
            fetching.set_result(None)

    def _holding(self, key: str) -> Verdict | None:
        """The hold of ``key`` while it lasts (a worker that waited for a fetch that failed does not fetch
        again at once)."""
        until = self._held.get(key)
        if until is not None and until > time.time():
            return Verdict("hold", until)
        self._held.pop(key, None)
        return None

    def _judge(self, rules: Protego | None, request: Request) -> Verdict:
        if rules is None or rules.can_fetch(request.url, self.user_agent):
            return ALLOW
        return DISALLOW

    # ------------------------------------------------------------------ knowing
    def _lock_of(self, key: str) -> threading.Lock:
        with self._guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = threading.Lock()
            return lock

    def _fresh(self, key: str) -> tuple[float, Protego | None] | None:
        """The rules of ``key`` if this process knows them and they are fresh (no frontier call)."""
        known = self._rules.get(key)
        if known is not None and time.time() - known[0] < self.ttl:
            return known
        return None

    def _known(self, key: str, request: Request) -> tuple[float, Protego | None] | None:
        """The rules of ``key`` if they are known and fresh: in memory, else as the frontier keeps them."""
        known = self._fresh(key)
        if known is not None:
            return known
        now = time.time()
        entry = self.frontier.robots(key)
        if entry is None or now - entry.fetched_at >= self.ttl:
            return None
        return self._use(key, request, entry)

    def _learned(self, key: str, request: Request, status: int, body: bytes) -> Verdict:
        """Act on a fetch of robots.txt: keep it and judge, or hold the site back."""
        self.fetched += 1
        if isinstance(status, bool) or not isinstance(status, int) or not 0 <= status <= 999:
            status = 0
        if status == 0 or status >= 500:
            with self._guard:
                failures = self._failures[key] = self._failures.get(key, 0) + 1
                until = time.time() + host_backoff(failures, 1, self.backoff, self.backoff_max)
                self._held[key] = until
            return Verdict("hold", until)
        with self._guard:
            self._held.pop(key, None)
            self._failures.pop(key, None)
        entry = RobotsEntry(status, bytes(body[:MAX_ROBOTS]), time.time())
        self.frontier.set_robots(key, entry)
        return self._judge(self._use(key, request, entry)[1], request)

    def _use(self, key: str, request: Request, entry: RobotsEntry) -> tuple[float, Protego | None]:
        """Parse a kept entry, apply its Crawl-delay, and remember it."""
        rules: Protego | None = None
        if 200 <= entry.status < 300:
            rules = Protego.parse(entry.body.decode("utf-8", "replace"))
            self._apply_delay(request.slot, key, rules)
        known = (entry.fetched_at, rules)
        self._rules[key] = known
        return known

    def _apply_delay(self, slot: str, key: str, rules: Protego) -> None:
        """The slot's delay: the largest Crawl-delay of its sites known here (the sites of one host share
        its politeness), never below the frontier's own delay."""
        asked: Any = rules.crawl_delay(self.user_agent)
        with self._guard:
            asks = self._delays.setdefault(slot, {})
            if asked is None:
                asks.pop(key, None)
            else:
                asks[key] = float(asked)
            if not asks:
                return
            delay = min(max(max(asks.values()), self.base_delay), float(MAX_SECONDS))
        info = self.frontier.host(slot)
        if info is None or info.delay != delay:
            self.frontier.set_delay(slot, delay)


__all__ = ["ALLOW", "DEFAULT_TIMEOUT", "DISALLOW", "STOPPED", "Fetch", "RobotsRules", "Verdict", "fetch_with_urllib",
           "site_of"]
