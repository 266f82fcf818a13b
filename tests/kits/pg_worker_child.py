"""A crawler worker on a shared PostgreSQL crawl, for the multi-process crash tests.

Usage: pg_worker_child.py URL CRAWL LOG HOLD

Pops up to HOLD requests at once, "works" on them, marks each done, until the crawl is finished.
Each step is one line appended to LOG with the time.time() bounds of the call:
"P url start end" (popped), "B url" (done begun), "D url start end" (done returned),
"U url" (a done that raised PostgresUnavailable: it may or may not have landed).
"""

from __future__ import annotations

import os
import sys
import time

from diskfrontier import PostgresFrontier, PostgresUnavailable


def main() -> None:
    url, crawl, log_path, hold = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def say(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    frontier = PostgresFrontier(url, crawl=crawl, lease=2.0)
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
            except PostgresUnavailable:
                say(f"U {request.url}")
                continue
            say(f"D {request.url} {start!r} {time.time()!r}")
    frontier.close()
    say("END")


if __name__ == "__main__":
    main()
