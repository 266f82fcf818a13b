"""A crawl for the dashboard's tests and screenshot: crawl() over a site on loopback addresses
(127.0.0.2 and up), with a few pages that always fail, until the site is crawled or SIGINT.

Usage: dashboard_crawl_child.py JOBDIR [--pages N] [--workers N] [--page-delay S] [--host-delay S]
       [--fail-every K] [--publish] [--block HOST_INDEX]

It prints "crawling" once the seed is pushed. --publish: the frontier publishes its
JOBDIR/status.json (its watcher thread, as every holder does by default); without it the frontier
is opened with watch=False and publishes nothing; --block: the site's host of that index is
blocked for an hour at the start.
"""

from __future__ import annotations

import argparse
import re
import time
import urllib.request

from diskfrontier import Frontier, Request, crawl
from diskfrontier.run.demo import MultiHostSite

LINK = re.compile(r'<a href="([^"]+)" data-priority="(-?\d+)">')
PAGE = re.compile(r"/page/(\d+)$")


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
            Frontier(args.jobdir, delay=args.host_delay, per_host=2, watch=args.publish) as frontier:

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
        print("crawling", flush=True)
        crawl(frontier, handler, workers=args.workers, retries=1, backoff=0.05, progress=False)


if __name__ == "__main__":
    main()
