"""A crawl-like workload on a job directory, for the crash tests to SIGKILL.

Usage: crash_child.py JOBDIR LOG SEED ROUND ORDER [FSYNC]

Before each call it appends an intent line to LOG ("?P url prio", "?M url prio url prio ...",
"?X url", "?O", "?D url" (one per request, also for done_many), "?C", "?K") and after the call
returns an acknowledgement ("P url prio", "M url prio ...", "X url accepted", "O url", "D url",
"C", "K"); "R" starts each run. Each line is one unbuffered write, so what LOG says reached the OS
before the kill. The parent drives the reference model (``reference.py``) with LOG alone.
"""

from __future__ import annotations

import os
import random
import sys

from diskfrontier import Frontier, Request
from diskfrontier.jobdir import closing as closing_module

# The crash tests of the saved seen index have every clean close save it.
closing_module.INDEX_MIN_NEW_KEYS = int(os.environ.get("DISKFRONTIER_TEST_INDEX_MIN_NEW_KEYS",
                                                       closing_module.INDEX_MIN_NEW_KEYS))


def main() -> None:
    jobdir, log_path, seed, round_no, order = sys.argv[1:6]
    fsync = len(sys.argv) > 6 and sys.argv[6] == "fsync"
    rng = random.Random(int(seed))
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def say(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    counter = 0

    def new_request() -> Request:
        nonlocal counter
        counter += 1
        return Request(f"https://h{counter % 7}.example/{round_no}/{counter}", priority=rng.randrange(-2, 2))

    old_urls: list[str] = []
    frontier = Frontier(jobdir, order=order, fsync=fsync)
    say("R")
    in_flight: list[Request] = []
    while True:
        roll = rng.random()
        if roll < 0.35:
            request = new_request()
            say(f"?P {request.url} {request.priority}")
            if frontier.push(request):
                say(f"P {request.url} {request.priority}")
                old_urls.append(request.url)
        elif roll < 0.40 and old_urls:
            url = rng.choice(old_urls)  # a duplicate: must be refused
            say(f"?X {url}")
            result = frontier.push(Request(url))
            say(f"X {url} {int(result)}")
        elif roll < 0.47:
            batch = [new_request() for _ in range(rng.randrange(1, 40))]
            say("?M " + " ".join(f"{r.url} {r.priority}" for r in batch))
            frontier.push_many(batch)
            say("M " + " ".join(f"{r.url} {r.priority}" for r in batch))
            old_urls.extend(r.url for r in batch)
        elif roll < 0.75:
            say("?O")
            popped = frontier.pop()
            if popped is not None:
                say(f"O {popped.url}")
                in_flight.append(popped)
        elif roll < 0.97 and in_flight:
            request = in_flight.pop(rng.randrange(len(in_flight)))
            say(f"?D {request.url}")
            frontier.done(request)
            say(f"D {request.url}")
        elif roll < 0.99:
            say("?C")
            frontier.close()
            say("C")
            in_flight = []
            frontier = Frontier(jobdir, fsync=fsync)
            say("R")
        else:
            # compact() needs nothing in flight: finish it all as one done_many group
            for request in in_flight:
                say(f"?D {request.url}")
            frontier.done_many(in_flight)
            for request in in_flight:
                say(f"D {request.url}")
            in_flight = []
            say("?K")
            frontier.compact()
            say("K")


if __name__ == "__main__":
    main()
