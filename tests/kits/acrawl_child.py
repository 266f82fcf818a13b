"""An asyncio application crawling with diskfrontier.acrawl() and httpx, for the tests to stop with signals.

Usage: acrawl_child.py TARGET START_URL OUT_FILE [NAME=VALUE ...]

TARGET: a job directory, or a Redis URL with ``crawl="NAME"``. NAME=VALUE: acrawl() arguments
(workers, duration, max_requests, retries, backoff; JSON values), ``crawl`` and ``slow=SECONDS``
(each page but the start page takes that long after its fetch, awaited). ``asyncio.run(main())``
opens the target as an AsyncFrontier, and acrawl() runs in that loop with an
httpx.AsyncClient made by ``setup``. The handler fetches, pushes the links it finds and raises on
an HTTP error. At the end OUT_FILE gets JSON: the run's stats, the URLs whose handler returned,
the handler calls that found the client closed, whether the client was closed at the end and
whether the SIGINT and SIGTERM handlers were given back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
from collections.abc import AsyncIterator

import httpx

from diskfrontier import AsyncFrontier, Request, acrawl

LINK = re.compile(r'<a href="([^"]+)" data-priority="(-?\d+)">')


async def main() -> None:
    target, start, out_file, *pairs = sys.argv[1:]
    options = {name: json.loads(value) for name, _, value in (pair.partition("=") for pair in pairs)}
    slow = options.pop("slow", 0)
    crawl = options.pop("crawl", None)
    base = start.split("/page/")[0]
    returned: list[str] = []
    closed_during_call: list[str] = []
    clients: list[httpx.AsyncClient] = []

    @contextlib.asynccontextmanager
    async def setup() -> AsyncIterator[httpx.AsyncClient]:
        async with httpx.AsyncClient(timeout=30) as client:
            clients.append(client)
            yield client

    async def handler(request: Request, frontier: AsyncFrontier, client: httpx.AsyncClient) -> None:
        if client.is_closed:
            closed_during_call.append(request.url)
        response = await client.get(request.url)
        response.raise_for_status()
        if slow and request.url != start:
            await asyncio.sleep(slow)
        await frontier.push_many(Request(base + href, priority=int(priority))
                                 for href, priority in LINK.findall(response.text))
        returned.append(request.url)

    handlers_before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    async with AsyncFrontier(target, crawl, delay=0.002, per_host=8) as frontier:
        await frontier.push(Request(start))
        stats = await acrawl(frontier, handler, setup=setup, progress=False, **options)
        handlers_after = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    with open(out_file, "w") as f:
        json.dump({"stats": [dict(run.__dict__) for run in stats.runs], "returned": returned,
                   "closed_during_call": closed_during_call, "clients": len(clients),
                   "client_closed_at_end": all(client.is_closed for client in clients),
                   "handlers_restored": handlers_after == handlers_before}, f)


if __name__ == "__main__":
    asyncio.run(main())
