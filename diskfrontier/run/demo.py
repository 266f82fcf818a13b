"""A real crawl over a synthetic site served on loopback addresses, with ``crawl()``, as a batch script would.

The site has ``pages`` pages. Page N links to pages 2N+1 and 2N+2 (new work), to N // 2
(a duplicate the frontier refuses) and to page 0 (another duplicate); pages whose number
is a multiple of 10 are linked with a higher priority. Every response is appended to
``demo-fetches.log`` in the job directory, so a test can count fetches per page. The sites are
``demosites``'s (imported from here too, by their older path).
"""

from __future__ import annotations

import os
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from ..core.errors import PermanentError
from ..jobdir.frontier import Frontier
from ..request.model import Request
from .crawl import crawl
from .demosites import LinkedSite, MultiHostSite, SyntheticSite

__all__ = ["DemoResult", "LinkedSite", "MultiHostSite", "SyntheticSite", "run_demo"]

_LINK = re.compile(r'<a href="([^"]+)" data-priority="(-?\d+)">')


@dataclass
class DemoResult:
    """What one demo run did."""

    fetched: int
    pending: int
    seen: int
    stopped_by: str
    seconds: float
    retried: int = 0
    failed: int = 0
    runs: int = 1
    failed_at_once: int = 0  # of failed: broken links (404), failed with no retry


_STOPPED = {"finished": "finished", "stalled": "finished", "duration": "time limit", "max_requests": "max requests",
            "SIGINT": "interrupted", "SIGTERM": "interrupted", "interrupted": "interrupted"}


def run_demo(
    jobdir: str, pages: int = 300, seconds: float | None = None,
    on_page: Callable[[int, int], None] | None = None, *,
    workers: int = 8, every: float | None = None, times: int = 1, hosts: int = 4,
    failing: float = 0.03, delay: float = 0.005, broken: int = 2, progress: bool | None = False,
    progress_every: float = 5.0,
) -> DemoResult:
    """Crawl the synthetic site into ``jobdir`` with ``crawl()`` until it is exhausted, ``seconds``
    pass (a run's duration), or Ctrl-C (the pages in hand are finished; a second one stops at once).

    The site is served on ``hosts`` loopback addresses (127.0.0.2, ...), half the pages on the
    first, so politeness shows (``delay`` seconds between hand-outs of a host, at most two of
    its requests at a time); ``failing`` of the pages answer 503 the first time they are asked
    for, so retries show; ``broken`` links lead to pages that answer 404, which fail at once
    (``PermanentError``). ``every``/``times``: repeated runs. ``on_page(finished, pending)``
    is called after each page with the pages finished over every run and the requests waiting.
    ``progress``, ``progress_every``: ``crawl()``'s own progress on stderr (None: a plain line every
    ``progress_every`` seconds when stderr is not a terminal).
    """
    started = time.monotonic()
    log_path = os.path.join(jobdir, "demo-fetches.log")
    flaky = frozenset(f"/page/{n}" for n in range(pages) if (n * 2654435761) % 1000 < failing * 1000 and n)
    lock = threading.Lock()
    fetched = 0
    with MultiHostSite(pages, hosts=hosts, share=0.5, unavailable=flaky) as site, \
            Frontier(jobdir, delay=delay, per_host=2) as frontier, open(log_path, "a", buffering=1) as fetch_log:
        # Links are stored without the site's port (a resumed run serves it on a new one), so
        # the fingerprints stay the same from run to run.
        frontier.push(Request(_portless(site.url(0)), priority=1))
        # broken links (pages past the last one answer 404): each is tried once and recorded as failed
        frontier.push_many(Request(_portless(site.url(pages + k))) for k in range(broken))

        def handler(request: Request, frontier: Frontier) -> None:
            nonlocal fetched
            host, path = request.url[7:].split("/", 1)
            try:
                with urllib.request.urlopen(f"http://{host}:{site.port}/{path}", timeout=10) as response:
                    html = response.read().decode()
            except urllib.error.HTTPError as exc:
                if exc.code == 404:  # a broken link will not mend: failed at once, not retried
                    raise PermanentError(f"HTTP 404 for /{path}") from None
                raise
            frontier.push_many(Request(_portless(href), priority=int(prio), meta={"from": f"/{path}"})
                               for href, prio in _LINK.findall(html))
            with lock:
                fetch_log.write(f"/{path}\n")
                fetched += 1
                if on_page is not None:
                    stats = frontier.stats()
                    on_page(stats["seen"] - stats["pending"] - stats["in_flight"], stats["pending"])

        result = crawl(frontier, handler, workers=workers, duration=seconds, every=every, times=times,
                       retries=3, backoff=0.05, progress=progress,
                       progress_every=progress_every)
        stats = frontier.stats()
        pending, seen = stats["pending"] + stats["in_flight"], stats["seen"]
    return DemoResult(fetched, pending, seen, _STOPPED.get(result.stopped_by, result.stopped_by),
                      time.monotonic() - started, result.retried, result.failed, len(result.runs),
                      result.failed_at_once)


def _portless(url: str) -> str:
    """``url`` without its port: http://127.0.0.3:8123/page/7 -> http://127.0.0.3/page/7."""
    scheme, _, rest = url.partition("://")
    hostport, _, path = rest.partition("/")
    return f"{scheme}://{hostport.split(':')[0]}/{path}"
