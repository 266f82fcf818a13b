"""A polite concurrent crawl with diskfrontier.crawl(), for the tests to stop with signals.

Usage: crawl_child.py JOBDIR START_URL STATS_FILE [NAME=VALUE ...]

NAME=VALUE: crawl() arguments (workers, duration, max_requests, retries, backoff; JSON values)
and ``slow=SECONDS`` (each page takes that long after its fetch). The handler fetches with
urllib, pushes the links it finds and raises on an HTTP error (crawl() retries it).
At the end the run's stats are written to STATS_FILE as JSON.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request

from diskfrontier import Frontier, Request, crawl

LINK = re.compile(r'<a href="([^"]+)" data-priority="(-?\d+)">')


def main() -> None:
    jobdir, start, stats_file, *pairs = sys.argv[1:]
    options = {name: json.loads(value) for name, _, value in (pair.partition("=") for pair in pairs)}
    slow = options.pop("slow", 0)
    frontier = Frontier(jobdir, delay=0.002, per_host=4)

    def handler(request: Request, frontier: Frontier) -> None:
        with urllib.request.urlopen(request.url, timeout=30) as response:  # noqa: S310 - the test's own http site
            page = response.read().decode()
        if slow:
            time.sleep(slow)
        frontier.push_many(Request(url, priority=int(priority)) for url, priority in LINK.findall(page))

    frontier.push(Request(start))
    stats = crawl(frontier, handler, progress=False, **options)
    frontier.close()
    with open(stats_file, "w") as f:
        json.dump([{**run.__dict__} for run in stats.runs], f)


if __name__ == "__main__":
    main()
