"""A crawler worker on a shared Redis crawl, for the multi-process crash test.

Usage: redis_worker_child.py URL CRAWL LOG HOLD

Pops up to HOLD requests, "works" on them, marks them done, until the crawl is finished.
Each step is one line appended to LOG with the time.time() bounds of the call:
"P url start end" (popped), "B url" (done begun), "D url start end" (done returned).
"""

from __future__ import annotations

import os
import sys
import time

from diskfrontier import RedisFrontier


def main() -> None:
    url, crawl, log_path, hold = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def say(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    frontier = RedisFrontier(url, crawl=crawl, lease=2.0)
    while True:
        held = []
        while len(held) < hold:
            start = time.time()
            request = frontier.pop(timeout=None if not held else 0.0)
            end = time.time()
            if request is None:
                break
            say(f"P {request.url} {start!r} {end!r}")
            held.append(request)
        if not held:
            break
        time.sleep(0.002 * len(held))  # the work
        for request in held:
            say(f"B {request.url}")
            start = time.time()
            frontier.done(request)
            say(f"D {request.url} {start!r} {time.time()!r}")
    frontier.close()
    say("END")


if __name__ == "__main__":
    main()
