"""Failure kinds and host backoff: what a crawl spends on 404s and on a host that answers 503 to everything.

Workload (the same for both ways): ``crawl()`` over two loopback hosts. The good one
(``diskfrontier.run.demo.LinkedSite`` on 127.0.0.1) has ``--pages`` pages linked with relative
URLs, some of which answer 404 (``--missing``); links are followed up to 5 deep. The bad one
(127.0.0.2) answers every request with a 503 after ``--bad-delay`` seconds (an overloaded
server); ``--bad`` of its URLs are seeds. ``workers=8``, ``per_host=2``, ``retries=3``,
``backoff=0.2`` s; each run is capped at ``--duration`` seconds. The ways:

    before   the handler raises an HTTPError for a 404 (retried like any error) and no host is
             ever blocked (host_errors=None): what crawl() did before failure kinds
    after    the handler raises PermanentError for a 404 (failed at once), and a host is blocked
             after 5 failures in a row (host_errors=5), for --host-backoff seconds doubled for
             each failure after that, at most 4 times that (scaled down from the defaults,
             60 s and 1 h, so that a run takes seconds)

Printed and written to ``benchmarks/results/bench_failures.json``: the run's tallies
(done, retried, failed, failed at once, host blocks), requests tried and seconds spent on the
bad host (in the handler, and from its first to its last request), tries per 404 page.

    python benchmarks/bench_failures.py
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from typing import Any
from urllib.parse import urljoin, urlsplit

import benchresults

from diskfrontier import Frontier, PermanentError, Request, crawl
from diskfrontier.run.demo import LinkedSite

LINK = re.compile(r'href="([^"#]+)"')
MAX_DEPTH = 5


def run(way: str, args: argparse.Namespace) -> dict[str, Any]:
    """One crawl; its tallies and what it cost on the bad host."""
    missing = frozenset(range(5, args.pages, max(1, args.pages // args.missing)))
    spent: Counter[str] = Counter()
    lock = threading.Lock()
    with LinkedSite(args.pages, missing=missing) as good, \
            LinkedSite(args.pages, address="127.0.0.2", status_for_all=503, delay=args.bad_delay) as bad, \
            tempfile.TemporaryDirectory() as work, Frontier(f"{work}/job", per_host=2) as frontier:

        def handler(request: Request, frontier: Frontier) -> None:
            started = time.monotonic()
            try:
                with urllib.request.urlopen(request.url, timeout=10) as response:  # noqa: S310 - http only
                    html = response.read().decode("utf-8", "replace")
            except urllib.error.HTTPError as exc:
                if exc.code == 404 and way == "after":
                    raise PermanentError(f"HTTP {exc.code}") from None
                raise
            finally:
                with lock:
                    spent[request.slot] += time.monotonic() - started
            depth = request.meta.get("depth", 0) + 1
            site = urlsplit(request.url).netloc
            links = (urljoin(request.url, href) for href in LINK.findall(html))
            frontier.push_many(Request(url, meta={"depth": depth}) for url in links
                               if urlsplit(url).netloc == site and depth <= MAX_DEPTH)

        frontier.push(Request(good.base + "/docs/0.html"))
        frontier.push_many(Request(f"{bad.base}/docs/{n}.html") for n in range(args.bad))
        extra: dict[str, Any] = {"host_errors": None} if way == "before" else {
            "host_errors": 5, "host_backoff": args.host_backoff, "host_backoff_max": 4 * args.host_backoff}
        started = time.monotonic()
        stats = crawl(frontier, handler, workers=8, retries=3, backoff=0.2, duration=args.duration,
                      progress=False, **extra)
        seconds = time.monotonic() - started
        bad_log = [t for _path, t in bad.log]
        tried_404 = [good.fetched()[f"/docs/{n}.html"] for n in missing if good.fetched()[f"/docs/{n}.html"]]
        host = frontier.host("127.0.0.2")
    return {
        "way": way, "stopped_by": stats.stopped_by, "seconds": seconds, "done": stats.done,
        "retried": stats.retried, "failed": stats.failed, "failed_at_once": stats.failed_at_once,
        "host_blocks": stats.host_blocks, "bad_tries": len(bad_log), "bad_handler_s": spent["127.0.0.2"],
        "bad_span_s": (max(bad_log) - min(bad_log)) if bad_log else 0.0,
        "bad_pending": host.pending if host else 0, "pages_404": len(tried_404),
        "tries_per_404": (sum(tried_404) / len(tried_404)) if tried_404 else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=63, help="pages of the good site (default 63: 5 links deep)")
    parser.add_argument("--missing", type=int, default=6, help="about how many of them answer 404")
    parser.add_argument("--bad", type=int, default=40, help="URLs of the host that answers 503")
    parser.add_argument("--bad-delay", type=float, default=0.05, help="seconds the bad host takes to answer")
    parser.add_argument("--host-backoff", type=float, default=1.0, help="the first block of the bad host (s)")
    parser.add_argument("--duration", type=float, default=10.0, help="each run's cap (s)")
    benchresults.add_argument(parser, "bench_failures")
    args = parser.parse_args()
    rows = [run(way, args) for way in ("before", "after")]
    columns = [("way", None), ("stopped by", None), ("run s", "{:.1f}"), ("done", "{:,}"), ("retried", "{:,}"),
               ("failed", "{:,}"), ("failed at once", "{:,}"), ("host blocks", "{:,}"), ("bad host tries", "{:,}"),
               ("bad host s (handler)", "{:.2f}"), ("bad host s (first-last)", "{:.2f}"),
               ("bad host pending", "{:,}"), ("404 pages", "{:,}"), ("tries per 404", "{:.1f}")]
    keys = ["way", "stopped_by", "seconds", "done", "retried", "failed", "failed_at_once", "host_blocks",
            "bad_tries", "bad_handler_s", "bad_span_s", "bad_pending", "pages_404", "tries_per_404"]
    print(f"{'':<22}" + "".join(f"{row['way']:>12}" for row in rows))
    for (title, fmt), key in zip(columns[1:], keys[1:], strict=True):
        cells = [(fmt or "{}").format(row[key]) for row in rows]
        print(f"{title:<22}" + "".join(f"{cell:>12}" for cell in cells))
    note = (f"good site: {args.pages} pages on 127.0.0.1; bad host 127.0.0.2 answers 503 to everything after "
            f"{args.bad_delay} s, {args.bad} of its URLs seeded; each run capped at {args.duration} s")
    print(note)
    table = benchresults.table("404s and a host that answers 503 to everything, before and after failure kinds",
                               columns, [[row[k] for k in keys] for row in rows], [note])
    benchresults.write(args.results, "bench_failures", vars(args), [table], {row["way"]: row for row in rows})
    sys.stdout.flush()


if __name__ == "__main__":
    main()
