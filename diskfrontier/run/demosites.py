"""The loopback sites of the demo crawl, of the tests and of the benchmarks: real HTTP servers on 127.0.0.x.

``SyntheticSite`` (one address) and ``MultiHostSite`` (several, one host each) serve pages ``/page/N``:
page N links to pages 2N+1 and 2N+2 (new work), to N // 2 (a duplicate the frontier refuses) and to page 0
(another duplicate); pages whose number is a multiple of 10 are linked with a higher priority.
``LinkedSite`` is a site of relative links, missing pages and a robots.txt, as a real one has.
"""

from __future__ import annotations

import http.server
import re
import threading
import time
from collections import Counter
from collections.abc import Callable

__all__ = ["LinkedSite", "MultiHostSite", "SyntheticSite"]


def _send_page(handler: http.server.BaseHTTPRequestHandler, n: int, pages: int, href: Callable[[int], str]) -> None:
    """Answer with page ``n``: links to 2n+1 and 2n+2 (new), n // 2 and 0 (duplicates), every tenth at priority 1."""
    links = [c for c in (2 * n + 1, 2 * n + 2, n // 2, 0) if c < pages]
    body = "".join(f'<a href="{href(c)}" data-priority="{1 if c % 10 == 0 else 0}">page {c}</a>\n' for c in links)
    data = f"<html><body><h1>page {n}</h1>\n{body}</body></html>".encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "text/html")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class _SiteHandler(http.server.BaseHTTPRequestHandler):
    site: SyntheticSite

    def do_GET(self) -> None:
        self.site._fetched(self.path)
        if self.site.delay:
            time.sleep(self.site.delay)
        match = re.fullmatch(r"/page/(\d+)", self.path)
        if match is None or int(match.group(1)) >= self.site.pages:
            self.send_error(404)
            return
        _send_page(self, int(match.group(1)), self.site.pages, lambda c: f"/page/{c}")

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # many workers connect at once: a short backlog drops them (1 s SYN retries)

    def handle_error(self, request: object, client_address: object) -> None:
        # A crawler killed mid-response leaves a broken pipe: that is the point of the demo.
        pass


class SyntheticSite:
    """The demo site on an ephemeral port of 127.0.0.1.

    ``delay`` seconds are spent on each response; ``fetches`` counts the requests of each
    path served so far (the tests read it to see what a crawl fetched, and how often).
    """

    def __init__(self, pages: int, delay: float = 0.0) -> None:
        self.pages = pages
        self.delay = delay
        self.fetches: Counter[str] = Counter()
        self._lock = threading.Lock()
        handler = type("Handler", (_SiteHandler,), {"site": self})
        self.server = _QuietServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _fetched(self, path: str) -> None:
        with self._lock:
            self.fetches[path] += 1

    def fetched(self) -> Counter[str]:
        """A copy of the fetch counts per path."""
        with self._lock:
            return Counter(self.fetches)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> SyntheticSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class _MultiHostHandler(http.server.BaseHTTPRequestHandler):
    site: MultiHostSite

    def do_GET(self) -> None:
        host = str(self.server.server_address[0])  # type: ignore[index]  # an (address, port) pair here
        n = self.site.page_number(self.path)
        if n is None or self.site.host_of_page(n) != host:
            self.send_error(404)
            return
        if self.site.record(host, self.path):
            self.send_response(503)
            self.send_header("Retry-After", str(self.site.retry_after))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.site.delay:
            time.sleep(self.site.delay)
        _send_page(self, n, self.site.pages, self.site.url)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class MultiHostSite:
    """The synthetic site spread over several hosts: 127.0.0.2, 127.0.0.3, ... on one port.

    Page N links to 2N+1 and 2N+2 (new), N // 2 and 0 (duplicates), each on its own host:
    ``share`` of the pages (80% by default) are on the first host, the rest spread over
    the others, so that one host holds most of the links. ``delay`` seconds are spent on
    each response. ``unavailable`` paths answer 503 with ``Retry-After: retry_after`` the
    first time they are asked for. ``log`` keeps ``(host, path, time.monotonic())`` of every
    request served.
    """

    def __init__(self, pages: int, hosts: int = 8, *, share: float = 0.8, delay: float = 0.0,
                 unavailable: frozenset[str] = frozenset(), retry_after: int = 1) -> None:
        if not 2 <= hosts <= 250:
            raise ValueError(f"hosts must be 2 to 250, got {hosts}")
        self.pages, self.delay, self.share = pages, delay, share
        self.unavailable, self.retry_after = set(unavailable), retry_after
        self.addresses = [f"127.0.0.{2 + i}" for i in range(hosts)]
        self.log: list[tuple[str, str, float]] = []
        self._lock = threading.Lock()
        handler = type("Handler", (_MultiHostHandler,), {"site": self})
        self.servers = bind_all(self.addresses, handler)
        self.port = self.servers[0].server_address[1]
        self.threads = [threading.Thread(target=server.serve_forever, daemon=True) for server in self.servers]

    def host_of_page(self, n: int) -> str:
        """The address that serves page ``n``."""
        if (n * 7919) % 1000 < self.share * 1000:
            return self.addresses[0]
        return self.addresses[1 + n % (len(self.addresses) - 1)]

    def url(self, n: int) -> str:
        return f"http://{self.host_of_page(n)}:{self.port}/page/{n}"

    @property
    def base(self) -> str:
        """The URL of the first host (page 0 is there)."""
        return f"http://{self.addresses[0]}:{self.port}"

    def page_number(self, path: str) -> int | None:
        match = re.fullmatch(r"/page/(\d+)", path)
        if match is None or int(match.group(1)) >= self.pages:
            return None
        return int(match.group(1))

    def record(self, host: str, path: str) -> bool:
        """Log a request; True if it is to be answered 503 (the first ask of an unavailable path)."""
        with self._lock:
            self.log.append((host, path, time.monotonic()))
            if path in self.unavailable:
                self.unavailable.discard(path)
                return True
            return False

    def fetched(self) -> Counter[str]:
        """Requests served per path so far."""
        with self._lock:
            return Counter(path for _host, path, _t in self.log)

    def __enter__(self) -> MultiHostSite:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()


def bind_all(addresses: list[str], handler: type) -> list[_QuietServer]:
    """A server on each address, all on one free port."""
    for _attempt in range(20):
        first = _QuietServer((addresses[0], 0), handler)
        port = first.server_address[1]
        servers = [first]
        try:
            for address in addresses[1:]:
                servers.append(_QuietServer((address, port), handler))
        except OSError:
            for server in servers:
                server.server_close()
            continue
        return servers
    raise OSError(f"could not find a port free on all of {addresses}")


class _LinkedHandler(http.server.BaseHTTPRequestHandler):
    site: LinkedSite

    def do_GET(self) -> None:
        site = self.site
        site.record(self.path)
        if site.delay:
            time.sleep(site.delay)
        if site.status_for_all is not None:
            self.send_error(site.status_for_all)
            return
        if self.path == "/robots.txt":
            status, body = site.robots
            if status != 200:
                self.send_error(status)
                return
            self._send(body.encode(), "text/plain")
            return
        match = re.fullmatch(r"/docs/(\d+)\.html", self.path)
        n = int(match.group(1)) if match else -1
        if not 0 <= n < site.pages or n in site.missing:
            self.send_error(404)
            return
        self._send(site.page(n).encode(), "text/html")

    def _send(self, data: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class LinkedSite:
    """A small site on one loopback ``address`` whose pages link with relative URLs.

    Page N (``/docs/N.html``) links to ``2N+1.html`` and ``2N+2.html`` (relative to ``/docs/``),
    to its parent ``../docs/(N-1)//2.html`` and to ``/docs/0.html`` (duplicates), so that a page is
    found only through its parent, and to a page of another site
    (``http://elsewhere.invalid/``), which a same-site crawl leaves alone. Pages in ``missing``
    answer 404. ``robots`` is the (status, text) of ``/robots.txt``; ``status_for_all`` answers
    every request with that status (a host that is down). ``log`` keeps (path, time.monotonic())
    of every request served.
    """

    def __init__(self, pages: int, *, address: str = "127.0.0.1", missing: frozenset[int] = frozenset(),
                 robots: tuple[int, str] = (404, ""), status_for_all: int | None = None, delay: float = 0.0) -> None:
        self.pages, self.missing, self.robots = pages, set(missing), robots
        self.status_for_all, self.delay = status_for_all, delay
        self.log: list[tuple[str, float]] = []
        self._lock = threading.Lock()
        handler = type("Handler", (_LinkedHandler,), {"site": self})
        self.server = _QuietServer((address, 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        address, port = self.server.server_address[:2]
        return f"http://{address!s}:{port}"

    def page(self, n: int) -> str:
        links = [f"{c}.html" for c in (2 * n + 1, 2 * n + 2)] + [f"../docs/{max(n - 1, 0) // 2}.html", "/docs/0.html",
                                                                  "http://elsewhere.invalid/"]
        body = "".join(f'<a href="{href}">{href}</a>\n' for href in links)
        return f"<html><body><h1>page {n}</h1>\n{body}</body></html>"

    def record(self, path: str) -> None:
        with self._lock:
            self.log.append((path, time.monotonic()))

    def fetched(self) -> Counter[str]:
        """Requests served per path so far."""
        with self._lock:
            return Counter(path for path, _t in self.log)

    def __enter__(self) -> LinkedSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
