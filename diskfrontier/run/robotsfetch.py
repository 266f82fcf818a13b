"""robots.txt fetched within a deadline: the default fetcher, and any fetch run so that no one waits past it.

A socket timeout bounds each read, not a fetch: a server that sends a byte every two seconds keeps
``urlopen(url, timeout=10)`` going for as long as it likes. ``fetch_with_urllib`` gives the whole
fetch (connect, TLS, status line and headers, body, redirects) one deadline: when it comes, the
sockets of the fetch are shut down and the answer is "no answer" (status 0), even if part of the
body came (a cut robots.txt could have lost the lines that disallow). Only the name lookup is
outside it (the system's resolver bounds that).

``run_fetch`` and ``await_fetch`` run a fetch, the default one or a user's ``fetch_robots``, in a
thread of its own (an async one as a task), so that whoever waits for it gives up when the deadline
comes or when its run stops, whatever the fetch is doing: a fetch given up on is left to end in its
thread (a daemon one) or its task, and its answer is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import inspect
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any, cast

from ..contract.checks import MAX_ROBOTS

log = logging.getLogger("diskfrontier")

DEFAULT_TIMEOUT = 10.0
Fetch = Callable[[str, str], "tuple[int, bytes] | Awaitable[tuple[int, bytes]]"]
"""``fetch(robots_url, user_agent) -> (status, body)``; status 0 for no answer (timeout, refused)."""

_TICK = 0.05  # how often a wait for a fetch looks at its run's stop


# ------------------------------------------------------------------ the default fetcher
class _Deadline:
    """The end of one fetch: the sockets it opened are shut down when it comes (a thread blocked in a
    read of them returns at once), and none is opened after it."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds
        self.expired = False
        self._lock = threading.Lock()
        self._watched: list[socket.socket] = []  # a duplicate of each socket: shutting it down ends the connection
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def connect(self, address: tuple[str, int], timeout: Any = None,
                source_address: tuple[str, int] | None = None) -> socket.socket:
        """``socket.create_connection`` within the deadline; the socket is watched until the fetch ends."""
        left = self.end - time.monotonic()
        if left <= 0 or self.expired:
            raise TimeoutError("the deadline of the robots.txt fetch has passed")
        if isinstance(timeout, (int, float)):
            left = min(left, float(timeout))
        sock = socket.create_connection(address, left, source_address)
        # A duplicate, not the socket: TLS takes the socket's descriptor over, and a descriptor number
        # may be reused once the fetch closed it; the duplicate keeps this connection's own.
        watched = sock.dup()
        with self._lock:
            self._watched.append(watched)
            if self.expired:
                _shut(watched)
        return sock

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for watched in self._watched:
                _shut(watched)

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        with self._lock:
            for watched in self._watched:
                watched.close()
            self._watched.clear()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by the other end
        sock.shutdown(socket.SHUT_RDWR)


class _HTTPConnection(http.client.HTTPConnection):
    _create_connection: Callable[..., socket.socket]


class _HTTPSConnection(http.client.HTTPSConnection):
    _create_connection: Callable[..., socket.socket]


class _HTTPHandler(urllib.request.HTTPHandler):
    """urllib's HTTP handler, its connections made within ``deadline``."""

    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def _connection(self, host: str, **options: Any) -> http.client.HTTPConnection:
        connection = _HTTPConnection(host, **options)
        connection._create_connection = self.deadline.connect
        return connection

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    """urllib's HTTPS handler, its connections (and their TLS handshakes) made within ``deadline``."""

    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def _connection(self, host: str, **options: Any) -> http.client.HTTPSConnection:
        connection = _HTTPSConnection(host, **options)
        connection._create_connection = self.deadline.connect
        return connection

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req, context=self._context)  # type: ignore[attr-defined]


def fetch_with_urllib(url: str, user_agent: str, timeout: float = DEFAULT_TIMEOUT) -> tuple[int, bytes]:
    """GET ``url`` with urllib (redirects followed): (status, at most ``MAX_ROBOTS`` bytes of body);
    (0, b"") if no whole answer came within ``timeout`` seconds for the whole fetch (a server too
    slow or stalled, a refused connection, a name that does not resolve, a malformed answer)."""
    if not url.startswith(("http://", "https://")):
        return 0, b""
    deadline = _Deadline(timeout)
    opener = urllib.request.build_opener(_HTTPHandler(deadline), _HTTPSHandler(deadline))
    request = urllib.request.Request(url, headers={"User-Agent": user_agent})  # noqa: S310 - http(s) only, above
    try:
        with deadline:
            try:
                with opener.open(request, timeout=timeout) as response:
                    status, body = int(response.status), response.read(MAX_ROBOTS)
            except urllib.error.HTTPError as exc:
                with exc:
                    status, body = int(exc.code), b""
    except (OSError, ValueError, http.client.HTTPException):  # URLError, a timeout, a reset, a cut answer
        return 0, b""
    if deadline.expired:
        return 0, b""  # what came before the deadline may be cut short: not to be obeyed
    return status, body


# ------------------------------------------------------------------ running a fetch
class _Answer:
    """What a fetch run in a thread gave: its value or its error, once ``ready`` is set."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.value: Any = None
        self.error: Exception | None = None

    def result(self) -> tuple[int, bytes]:
        if self.error is not None:
            raise self.error
        return _checked(self.value)


def _checked(value: Any) -> tuple[int, bytes]:
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise TypeError("robots: fetch_robots returned an awaitable: crawl() runs a plain function only (use "
                        "acrawl() for an async def one), and acrawl() awaits an async def function only")
    return cast(tuple[int, bytes], value)  # its shape is checked where it is used


def _start(fetch: Fetch, url: str, user_agent: str, then: Callable[[_Answer], None] | None = None) -> _Answer:
    """Run ``fetch(url, user_agent)`` in a daemon thread of its own; ``then(answer)`` when it ends."""
    answer = _Answer()

    def run() -> None:
        try:
            answer.value = fetch(url, user_agent)
        except Exception as exc:
            answer.error = exc
        answer.ready.set()
        if then is not None:
            then(answer)

    threading.Thread(target=run, name=f"diskfrontier-robots {url}", daemon=True).start()
    return answer


def _given_up(url: str, seconds: float) -> tuple[int, bytes]:
    log.warning("robots.txt %s: no answer within %gs, taken as no answer (the fetch is left to end on its own)",
                url, seconds)
    return 0, b""


def run_fetch(fetch: Fetch, url: str, user_agent: str, seconds: float,
              stop: threading.Event | None = None) -> tuple[int, bytes] | None:
    """``fetch(url, user_agent)`` run in a thread of its own: its answer, (0, b"") if none came within
    ``seconds``, or None as soon as ``stop`` is set. Its error is raised here."""
    answer = _start(fetch, url, user_agent)
    end = time.monotonic() + seconds
    while not answer.ready.wait(max(0.0, min(_TICK, end - time.monotonic()))):
        if stop is not None and stop.is_set():
            return None
        if time.monotonic() >= end:
            return _given_up(url, seconds)
    return answer.result()


async def await_fetch(fetch: Fetch, url: str, user_agent: str, seconds: float,
                      stop: threading.Event | None = None) -> tuple[int, bytes] | None:
    """``run_fetch`` for a task: a coroutine function ``fetch`` runs as a task of the loop, a plain one in
    a thread of its own (never the loop's default executor, whose threads ``asyncio.run`` waits for at
    its end); given up on, the task is cancelled and not waited for."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any]
    if inspect.iscoroutinefunction(fetch):
        future = asyncio.ensure_future(fetch(url, user_agent))
    else:
        future = loop.create_future()

        def deliver(answer: _Answer) -> None:
            if not future.done():
                future.set_result(answer)

        def then(answer: _Answer) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has ended: no one waits any more
                loop.call_soon_threadsafe(deliver, answer)

        _start(fetch, url, user_agent, then)
    end = loop.time() + seconds
    try:
        while not future.done():
            if stop is not None and stop.is_set():
                return None
            left = end - loop.time()
            if left <= 0:
                return _given_up(url, seconds)
            await asyncio.wait({future}, timeout=min(_TICK, left))
    finally:
        if not future.done():
            future.cancel()
            future.add_done_callback(_dropped)
    value = future.result()
    return value.result() if isinstance(value, _Answer) else _checked(value)


def _dropped(future: asyncio.Future[Any]) -> None:
    """A fetch given up on has ended: its answer or error is dropped (asyncio would log it as never read)."""
    if not future.cancelled():
        future.exception()


__all__ = ["DEFAULT_TIMEOUT", "Fetch", "await_fetch", "fetch_with_urllib", "run_fetch"]
