"""A crawler worker on a shared Redis or PostgreSQL crawl, for the multi-process crash tests.

Usage: worker_child.py BACKEND URL CRAWL LOG HOLD      (BACKEND: redis or postgres)

Pops up to HOLD requests at once, "works" on them, marks each done, until the crawl is finished.
Each step is one line appended to LOG with the time.time() bounds of the call:
"P url start end" (popped), "B url" (done begun), "D url start end" (done returned),
"U url" (PostgreSQL only: a done that raised PostgresUnavailable, which may or may not have landed).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from diskfrontier import PostgresFrontier, PostgresUnavailable, RedisFrontier


def open_frontier(backend: str, url: str, crawl: str) -> tuple[Any, tuple[type[Exception], ...]]:
    """The worker's frontier, and the errors of a done that it logs as "U" and goes on (any other ends it)."""
    # ack="wait": a "D" line is written once the done is in the crawl (by default it rides on the next step, and
    # a kill before that step hands the request out once more, which the tests would count as done twice)
    if backend == "redis":
        return RedisFrontier(url, crawl=crawl, lease=2.0, ack="wait"), ()
    if backend == "postgres":
        return PostgresFrontier(url, crawl=crawl, lease=2.0, ack="wait"), (PostgresUnavailable,)
    raise SystemExit(f"unknown backend {backend!r}: redis or postgres")


def main() -> None:
    backend, url, crawl, log_path, hold = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def say(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    frontier, unsure = open_frontier(backend, url, crawl)
    while True:
        start = time.time()
        held = frontier.pop_many(hold)  # one call for up to HOLD requests
        if not held:
            one = frontier.pop(timeout=None)  # wait until one is ready, or the crawl is finished
            if one is None:
                break
            held = [one]
        end = time.time()
        for request in held:
            say(f"P {request.url} {start!r} {end!r}")
        time.sleep(0.002 * len(held))  # the work
        for request in held:
            say(f"B {request.url}")
            start = time.time()
            try:
                frontier.done(request)
            except unsure:
                say(f"U {request.url}")
                continue
            say(f"D {request.url} {start!r} {time.time()!r}")
    frontier.close()
    say("END")


if __name__ == "__main__":
    main()
