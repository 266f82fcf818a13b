"""A crawl for the dashboard's tests and screenshot: crawl() over a site on loopback addresses
(127.0.0.2 and up), with a few pages that always fail, until the site is crawled or SIGINT.

Usage: dashboard_crawl_child.py JOBDIR [--pages N] [--workers N] [--page-delay S] [--host-delay S]
       [--fail-every K] [--publish] [--block HOST_INDEX]

It prints "crawling" once the seed is pushed. --publish: a thread writes the snapshot of the
open frontier to JOBDIR/status.json (atomically, every half second), as the holder of a job
directory does; --block: the site's host of that index is blocked for an hour at the start.
"""

from __future__ import annotations

import argparse
import re
import threading
import time
import urllib.request

from diskfrontier import Frontier, Request, crawl
from diskfrontier.demo import MultiHostSite
from diskfrontier.files.atomic import write_json_atomic
from diskfrontier.snapshot import LATEST_FAILURES, snapshot

LINK = re.compile(r'<a href="([^"]+)" data-priority="(-?\d+)">')
PAGE = re.compile(r"/page/(\d+)$")


def publish(frontier: Frontier, path: str, stop: threading.Event) -> None:
    """The holder's status.json, written every half second until ``stop``."""
    while not stop.wait(0.5):
        shot = snapshot(frontier.stats(), frontier.hosts(), frontier.failed()[-LATEST_FAILURES:],
                        frontier.next_ready(), source=frontier.path)
        write_json_atomic(f"{frontier.path}/status.json", shot)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("jobdir")
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--page-delay", type=float, default=0.01)
    parser.add_argument("--host-delay", type=float, default=0.01)
    parser.add_argument("--fail-every", type=int, default=37)
    parser.add_argument("--publish", action="store_true")
    parser.add_argument("--block", type=int, default=None)
    args = parser.parse_args()
    with MultiHostSite(args.pages, hosts=6, share=0.35, delay=args.page_delay) as site, \
            Frontier(args.jobdir, delay=args.host_delay, per_host=2) as frontier:

        def handler(request: Request, frontier: Frontier) -> None:
            number = int(PAGE.search(request.url).group(1))  # type: ignore[union-attr]
            if number and number % args.fail_every == 0:
                raise RuntimeError(f"HTTP 500 Internal Server Error from {request.url.split('/')[2]}")
            with urllib.request.urlopen(request.url, timeout=30) as response:  # noqa: S310 - our loopback site
                page = response.read().decode()
            frontier.push_many(Request(url, priority=int(p)) for url, p in LINK.findall(page))

        frontier.push(Request(site.url(0), priority=1))
        if args.block is not None:
            frontier.block(site.addresses[args.block], time.time() + 3600)
        stop = threading.Event()
        publisher = threading.Thread(target=publish, args=(frontier, args.jobdir, stop), daemon=True)
        if args.publish:
            publisher.start()
        print("crawling", flush=True)
        try:
            crawl(frontier, handler, workers=args.workers, retries=1, backoff=0.05, progress=False)
        finally:
            stop.set()
            if args.publish:
                publisher.join()


if __name__ == "__main__":
    main()
