"""``ChangingSite``: a loopback site whose pages change at known rates, for revisit tests and benchmarks.

Pages are spread over several hosts (127.0.0.2, 127.0.0.3, ... on one port). Each page belongs to a
class with a period: its content changes every ``period`` seconds (each page at its own phase), or
never (``None``). Every response carries an ``ETag`` (the page and its version) and a ``Last-Modified``
(when that version appeared), and the site honours ``If-None-Match`` and ``If-Modified-Since`` with 304.
Page N links to 2N+1 and 2N+2, so a crawl of page 0 finds them all.

The site keeps a log of what it served (each fetch: when, which page, which version, 200 or 304), from
which ``report`` tells how a crawl kept up: the versions it captured, how stale its copies were, the
share of revisits of unchanged pages answered 304.
"""

from __future__ import annotations

import email.utils
import http.server
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from .demosites import bind_all

_PAGE = re.compile(r"/page/(\d+)")


@dataclass(frozen=True)
class PageClass:
    """A share of the pages (0 to 1) that change every ``period`` seconds (None: never)."""

    share: float
    period: float | None


@dataclass
class Served:
    """One fetch the site answered."""

    at: float
    page: int
    version: int
    status: int
    conditional: bool


class _Handler(http.server.BaseHTTPRequestHandler):
    site: ChangingSite

    def do_GET(self) -> None:
        host = str(self.server.server_address[0])  # type: ignore[index]  # an (address, port) pair here
        match = _PAGE.fullmatch(self.path)
        n = int(match.group(1)) if match else -1
        site = self.site
        if not 0 <= n < site.pages or site.host_of(n) != host:
            self.send_error(404)
            return
        now = site.clock()
        version = site.version(n, now)
        etag = f'"{n}-{version}"'
        modified = email.utils.formatdate(site.epoch + site.version_start(n, version), usegmt=True)
        asked_etag = self.headers.get("If-None-Match")
        asked_since = self.headers.get("If-Modified-Since")
        conditional = asked_etag is not None or asked_since is not None
        fresh = asked_etag == etag if asked_etag is not None else (
            asked_since is not None and _not_after(modified, asked_since))
        site.note(Served(now, n, version, 304 if fresh else 200, conditional))
        if fresh:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        links = "".join(f'<a href="{site.url(c)}">page {c}</a>\n' for c in (2 * n + 1, 2 * n + 2) if c < site.pages)
        data = f"<html><body><h1>page {n}, version {version}</h1>\n{links}</body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", modified)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def _not_after(modified: str, since: str) -> bool:
    try:
        return email.utils.parsedate_to_datetime(modified) <= email.utils.parsedate_to_datetime(since)
    except (TypeError, ValueError):
        return False


class ChangingSite:
    """``pages`` pages on ``hosts`` hosts, each of one of ``classes`` (by share, in order)."""

    def __init__(self, pages: int, classes: Sequence[PageClass], hosts: int = 4) -> None:
        if abs(sum(c.share for c in classes) - 1.0) > 1e-9:
            raise ValueError("the shares of the page classes must add up to 1")
        self.pages, self.classes = pages, list(classes)
        self.addresses = [f"127.0.0.{2 + i}" for i in range(hosts)]
        self.served: list[Served] = []
        self._lock = threading.Lock()
        self.started = time.monotonic()
        self.epoch = time.time() - (time.monotonic() - self.started)  # the site's time 0 as a wall-clock time
        handler = type("Handler", (_Handler,), {"site": self})
        self.servers = bind_all(self.addresses, handler)
        self.port = self.servers[0].server_address[1]
        self.threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in self.servers]
        bounds, total = [], 0.0
        for page_class in self.classes:
            total += page_class.share
            bounds.append(total)
        self._class_of = [self._pick(n, bounds) for n in range(pages)]

    def _pick(self, n: int, bounds: list[float]) -> int:
        spot = ((n * 2654435761) % 2**32) / 2**32  # spread the classes over the page numbers
        for index, bound in enumerate(bounds):
            if spot < bound:
                return index
        return len(bounds) - 1

    def clock(self) -> float:
        """Seconds since the site started (its time)."""
        return time.monotonic() - self.started

    def period_of(self, n: int) -> float | None:
        return self.classes[self._class_of[n]].period

    def class_of(self, n: int) -> int:
        return self._class_of[n]

    def _phase(self, n: int) -> float:
        period = self.period_of(n)
        return 0.0 if period is None else ((n * 40503) % 1000) / 1000 * period

    def version(self, n: int, at: float) -> int:
        """Page ``n``'s version at site time ``at``."""
        period = self.period_of(n)
        return 0 if period is None else int((at + self._phase(n)) // period)

    def version_start(self, n: int, version: int) -> float:
        """When (site time) page ``n``'s ``version`` appeared (0 for the first)."""
        period = self.period_of(n)
        return 0.0 if period is None else max(0.0, version * period - self._phase(n))

    def host_of(self, n: int) -> str:
        return self.addresses[n % len(self.addresses)]

    def url(self, n: int) -> str:
        return f"http://{self.host_of(n)}:{self.port}/page/{n}"

    def note(self, served: Served) -> None:
        with self._lock:
            self.served.append(served)

    def log(self) -> list[Served]:
        with self._lock:
            return list(self.served)

    def report(self, since: float = 0.0, until: float | None = None, samples: int = 200) -> dict[str, float]:
        """How a crawl kept up between site times ``since`` and ``until`` (now: None).

        ``fetches``; ``captured``: versions fetched (200) for the first time; ``versions``: versions
        that existed; ``not_modified_share``: of the conditional fetches of a page whose version had
        not changed, the share answered 304; and for each page class ``staleness_<i>``: the mean, over
        ``samples`` moments and the class's pages, of how long the crawl's copy had been out of date
        (0 when it was current).
        """
        until = self.clock() if until is None else until
        log = [s for s in self.log() if since <= s.at <= until]
        seen: dict[int, list[tuple[float, int]]] = {}
        captured: set[tuple[int, int]] = set()
        unchanged_revisits = unchanged_304 = 0
        last_version: dict[int, int] = {}
        for s in sorted(self.log(), key=lambda s: s.at):
            if s.at > until:
                break
            if s.at >= since:
                if s.status == 200 and (s.page, s.version) not in captured:
                    captured.add((s.page, s.version))
                if s.conditional and last_version.get(s.page) == s.version:
                    unchanged_revisits += 1
                    unchanged_304 += s.status == 304
            last_version[s.page] = s.version
            seen.setdefault(s.page, []).append((s.at, s.version))
        existing = sum(self.version(n, until) - self.version(n, since) + 1 for n in range(self.pages))
        out: dict[str, float] = {
            "fetches": float(len(log)),
            "captured": float(len(captured)),
            "versions": float(existing),
            "not_modified_share": unchanged_304 / unchanged_revisits if unchanged_revisits else 0.0,
        }
        for index in range(len(self.classes)):
            members = [n for n in range(self.pages) if self._class_of[n] == index]
            total = count = 0.0
            for k in range(samples):
                moment = since + (until - since) * (k + 0.5) / samples
                for n in members:
                    fetched = [v for at, v in seen.get(n, ()) if at <= moment]
                    if not fetched:
                        continue  # not yet fetched at all: not a copy to be stale
                    held = fetched[-1]
                    current = self.version(n, moment)
                    total += 0.0 if held == current else moment - self.version_start(n, held + 1)
                    count += 1
            out[f"staleness_{index}"] = total / count if count else 0.0
        return out

    def __enter__(self) -> ChangingSite:
        self.started = time.monotonic()
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()
