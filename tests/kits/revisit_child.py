"""A crawl() or acrawl() that revisits a changing site (diskfrontier.run.changingsite), for the tests to kill.

Usage: revisit_child.py JOBDIR START_URL SECONDS (sync|async) POLICY_JSON

JOBDIR may be a Redis URL: the crawl "revisits" there (its leases 2 s long, so that what a killed run held
comes back soon).

Seeds START_URL, follows the links of every page, revisits with ``Revisit(**POLICY_JSON)`` and sends the
stored validators back; stops after SECONDS. Prints "crawling" once started.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import urllib.error
import urllib.request

from diskfrontier import Fetched, Frontier, RedisFrontier, Request, Revisit, acrawl, crawl
from diskfrontier.run.revisit import conditional_headers

LINK = re.compile(r'<a href="([^"]+)">')


def get(request: Request) -> tuple[Fetched, list[Request]]:
    """Fetch a page with the validators of its last fetch; what it got, and the pages it links to."""
    ask = urllib.request.Request(request.url, headers=conditional_headers(request))  # noqa: S310 - loopback http
    try:
        with urllib.request.urlopen(ask, timeout=10) as answer:  # noqa: S310 - loopback http
            body = answer.read()
            status, etag, modified = answer.status, answer.headers.get("ETag"), answer.headers.get("Last-Modified")
    except urllib.error.HTTPError as error:
        if error.code == 304:
            return Fetched(304), []
        raise
    links = [Request(url) for url in LINK.findall(body.decode())]
    return Fetched(status, body=body, etag=etag, last_modified=modified), links


def fetch(request: Request, frontier) -> Fetched:
    fetched, links = get(request)
    frontier.push_many(links)
    return fetched


def main() -> None:
    job, start, seconds, mode, policy = sys.argv[1:]
    revisit = Revisit(**json.loads(policy))
    opened = RedisFrontier(job, crawl="revisits", lease=2.0) if job.startswith("redis://") else Frontier(job)
    with opened as frontier:
        frontier.push(Request(start))
        print("crawling", flush=True)
        if mode == "sync":
            crawl(frontier, fetch, workers=4, duration=float(seconds), revisit=revisit, progress=False)
        else:
            async def handler(request: Request, frontier) -> Fetched:
                fetched, links = await asyncio.to_thread(get, request)
                await frontier.push_many(links)
                return fetched

            asyncio.run(acrawl(frontier, handler, workers=4, duration=float(seconds), revisit=revisit,
                               progress=False))


if __name__ == "__main__":
    main()
