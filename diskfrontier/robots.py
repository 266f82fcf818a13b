"""robots.txt for ``crawl()``: fetched once a site, kept in the frontier, obeyed with protego.

``RobotsRules.check(request)`` says whether a request may be fetched:

* The site's robots.txt (``scheme://host[:port]/robots.txt``) is fetched before its first
  request, once (workers of the same site wait for that one fetch), and kept in the frontier
  (``set_robots``) with its status and time, so that a restart does not fetch it again. It is
  fetched again once it is ``ttl`` seconds old.
* 2xx: its rules decide (protego, for ``user_agent``), and its ``Crawl-delay`` becomes the
  host's delay (``set_delay``), never below the frontier's own delay.
* 4xx (and a redirect that ends nowhere): no rules, everything is allowed (RFC 9309, 2.3.1.3).
* 5xx, a timeout or no connection: the host is held back (``host_failed``, so that the hold
  doubles while it lasts) and the request is to be tried again when the hold ends; nothing
  is kept, so the next try fetches it again (RFC 9309, 2.3.1.4, without assuming "disallow
  all" for ever).

How robots.txt is fetched is ``fetch(url, user_agent) -> (status, body)`` (status 0: no
answer); by default ``fetch_with_urllib`` (urllib, in the worker's thread, or in a thread of
its own under ``acrawl``). A coroutine function may be given for ``acheck``.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from protego import Protego

from .contract import MAX_ROBOTS, MAX_SECONDS, FrontierProtocol, RobotsEntry
from .request.model import Request

DEFAULT_TIMEOUT = 10.0
Fetch = Callable[[str, str], "tuple[int, bytes] | Awaitable[tuple[int, bytes]]"]
"""``fetch(robots_url, user_agent) -> (status, body)``; status 0 for no answer (timeout, refused)."""


def fetch_with_urllib(url: str, user_agent: str, timeout: float = DEFAULT_TIMEOUT) -> tuple[int, bytes]:
    """GET ``url`` with urllib (redirects followed): (status, at most ``MAX_ROBOTS`` bytes of body);
    (0, b"") if no answer came (a timeout, a refused connection, a name that does not resolve)."""
    if not url.startswith(("http://", "https://")):
        return 0, b""
    request = urllib.request.Request(url, headers={"User-Agent": user_agent})  # noqa: S310 - http(s) only, above
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http(s) only, above
            return int(response.status), response.read(MAX_ROBOTS)
    except urllib.error.HTTPError as exc:
        with exc:
            return int(exc.code), b""
    except (OSError, ValueError):  # URLError, a timeout, a reset connection, a malformed answer
        return 0, b""


@dataclass(frozen=True)
class Verdict:
    """What robots.txt says of one request: ``allow``, ``disallow``, or ``hold`` until ``until``."""

    kind: str
    until: float = 0.0


ALLOW = Verdict("allow")
DISALLOW = Verdict("disallow")


def site_of(url: str) -> tuple[str, str]:
    """(the key robots.txt is kept under: ``host[:port]``, lower-cased; the robots.txt URL) of a URL."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    key = host if parts.port is None else f"{host}:{parts.port}"
    return key, f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}/robots.txt"


class RobotsRules:
    """robots.txt of every site a crawl meets, for one ``user_agent`` (see the module docstring)."""

    def __init__(self, frontier: FrontierProtocol, user_agent: str, *, ttl: float = 86400.0,
                 fetch: Fetch | None = None, backoff: float = 60.0, backoff_max: float = 3600.0) -> None:
        if not isinstance(user_agent, str) or not user_agent.strip():
            raise ValueError("robots: user_agent must name the crawler (a non-empty str), e.g. 'mybot/1.0'")
        self.frontier = frontier
        self.user_agent = user_agent
        self.ttl = ttl
        self.fetch: Fetch = fetch or fetch_with_urllib
        self.backoff, self.backoff_max = backoff, backoff_max
        self.base_delay = float(frontier.stats().get("delay") or 0.0)
        self.fetched = 0  # robots.txt fetches made
        self._rules: dict[str, tuple[float, Protego | None]] = {}  # key -> (fetched_at, rules; None: allow all)
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._alocks: dict[str, asyncio.Lock] = {}
        self._held: dict[str, float] = {}  # key -> until when its host is held back (a 5xx or no answer)

    # ------------------------------------------------------------------ deciding
    def check(self, request: Request) -> Verdict:
        """The verdict for ``request``, fetching its site's robots.txt first if it is not known."""
        key, url = site_of(request.url)
        known = self._known(key, request)
        if known is None:
            with self._lock_of(key):
                known = self._known(key, request)
                if known is None:
                    hold = self._holding(key)
                    if hold is not None:
                        return hold
                    result = self.fetch(url, self.user_agent)
                    if inspect.isawaitable(result):
                        raise TypeError("robots: fetch_robots returned an awaitable: use acrawl() for an async fetch")
                    return self._learned(key, request, *result)
        return self._judge(known[1], request)

    async def acheck(self, request: Request,
                     call: Callable[..., Awaitable[Any]] | None = None) -> Verdict:
        """``check`` for asyncio tasks: an async ``fetch`` is awaited, a plain one run in a thread; the
        frontier's calls go through ``call(function, *args)`` (an ``AsyncFrontier``'s ``call``; by
        default ``asyncio.to_thread``), so that the loop is never blocked."""
        hop: Callable[..., Awaitable[Any]] = call or asyncio.to_thread
        key, url = site_of(request.url)
        known = self._fresh(key)
        if known is None:
            known = await hop(self._known, key, request)
        if known is None:
            lock = self._alocks.setdefault(key, asyncio.Lock())
            async with lock:
                known = self._fresh(key) or await hop(self._known, key, request)
                if known is None:
                    hold = self._holding(key)
                    if hold is not None:
                        return hold
                    if inspect.iscoroutinefunction(self.fetch):
                        result = await cast(Awaitable[tuple[int, bytes]], self.fetch(url, self.user_agent))
                    else:
                        result = cast(tuple[int, bytes], await asyncio.to_thread(self.fetch, url, self.user_agent))
                    return cast(Verdict, await hop(self._learned, key, request, *result))
        return self._judge(known[1], request)

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
        """Act on a fetch of robots.txt: keep it and judge, or hold the host back."""
        self.fetched += 1
        if not 0 <= status <= 999:
            status = 0
        if status == 0 or status >= 500:
            until = self.frontier.host_failed(request.slot, block_after=1, backoff=self.backoff,
                                              backoff_max=self.backoff_max)
            held = until if until is not None else time.time() + self.backoff
            self._held[key] = held
            return Verdict("hold", held)
        self._held.pop(key, None)
        entry = RobotsEntry(status, bytes(body[:MAX_ROBOTS]), time.time())
        self.frontier.set_robots(key, entry)
        return self._judge(self._use(key, request, entry)[1], request)

    def _use(self, key: str, request: Request, entry: RobotsEntry) -> tuple[float, Protego | None]:
        """Parse a kept entry, apply its Crawl-delay, and remember it."""
        rules: Protego | None = None
        if 200 <= entry.status < 300:
            rules = Protego.parse(entry.body.decode("utf-8", "replace"))
            self._apply_delay(request.slot, rules)
        known = (entry.fetched_at, rules)
        self._rules[key] = known
        return known

    def _apply_delay(self, slot: str, rules: Protego) -> None:
        asked: Any = rules.crawl_delay(self.user_agent)
        if asked is None:
            return
        delay = min(max(float(asked), self.base_delay), float(MAX_SECONDS))
        info = self.frontier.host(slot)
        if info is None or info.delay != delay:
            self.frontier.set_delay(slot, delay)


__all__ = ["ALLOW", "DEFAULT_TIMEOUT", "DISALLOW", "Fetch", "RobotsRules", "Verdict", "fetch_with_urllib", "site_of"]
