"""A crawler worker on a shared Redis crawl, for the multi-process crash test.

Usage: redis_worker_child.py URL CRAWL LOG HOLD

Pops up to HOLD requests at once, "works" on them, marks each done, until the crawl is finished.
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

    # ack="wait": a "D" line is written once the done is in Redis (by default it rides on the next step, and a
    # kill before that step hands the request out once more, which the tests would count as done twice)
    frontier = RedisFrontier(url, crawl=crawl, lease=2.0, ack="wait")
    while True:
        start = time.time()
        held = frontier.pop_many(hold)  # one script call for up to HOLD requests
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
            frontier.done(request)
            say(f"D {request.url} {start!r} {time.time()!r}")
    frontier.close()
    say("END")


if __name__ == "__main__":
    main()
