"""A steady crawl on a job directory whose checkpoints and compactions run often, for the kill campaign to SIGKILL.

Usage: upkeep_child.py JOBDIR LOG SEED ROUND ORDER RUNNER [STEP COUNT]

It logs in crash_child.py's format (intent lines "?P url prio", "?M ...", "?O", "?D url", "?C", "?K",
acknowledgements "P ...", "M ...", "O url", "D url", "C", "K"; "R" starts each run), so that
crashkit.read_log drives the reference model from it. Unlike crash_child it keeps about as many
requests pending as it started with (a pop and a done for each push), so that most of the journal
becomes finished work and the upkeep checkpoints and compacts it over and over, in RUNNER ("process"
or "thread"). Each step of a checkpoint or a swap (``jobdir/maintenance/steps.py``) is logged as
"S name"; with STEP and COUNT the child kills itself with SIGKILL when STEP is reached the COUNT-th time.
"""

from __future__ import annotations

import os
import random
import signal
import sys

from diskfrontier import Frontier, Maintenance, Request
from diskfrontier.jobdir import watcher
from diskfrontier.jobdir.maintenance import steps

watcher.POLL = 0.02  # the upkeep looks at the frontier as often as the runs between kills are short


def main() -> None:
    jobdir, log_path, seed, round_no, order, runner = sys.argv[1:7]
    kill_step, kill_count = (sys.argv[7], int(sys.argv[8])) if len(sys.argv) > 8 else (None, 0)
    rng = random.Random(int(seed))
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def say(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    reached: dict[str, int] = {}

    def hook(name: str) -> None:
        say(f"S {name}")
        reached[name] = reached.get(name, 0) + 1
        if name == kill_step and reached[name] >= kill_count:
            os.kill(os.getpid(), signal.SIGKILL)

    steps.HOOK = hook
    settings = Maintenance(checkpoint_records=150, checkpoint_seconds=None, compact_share=0.6,
                           compact_min_bytes=256 << 10, runner=runner)
    counter = 0

    def new_request() -> Request:
        nonlocal counter
        counter += 1
        return Request(f"https://h{counter % 7}.example/{round_no}/{counter}", priority=rng.randrange(-1, 2))

    old_urls: list[str] = []
    frontier = Frontier(jobdir, order=order, maintenance=settings)
    say("R")
    in_flight: list = []
    while True:
        roll = rng.random()
        if roll < 0.27 and len(frontier) > 2000:
            roll = 0.5  # as many pending as the crawl began with: a pop instead of a push
        if roll < 0.22:
            request = new_request()
            say(f"?P {request.url} {request.priority}")
            if frontier.push(request):
                say(f"P {request.url} {request.priority}")
                old_urls.append(request.url)
        elif roll < 0.24 and old_urls:
            url = rng.choice(old_urls)
            say(f"?X {url}")
            result = frontier.push(Request(url))
            say(f"X {url} {int(result)}")
        elif roll < 0.27:
            batch = [new_request() for _ in range(rng.randrange(1, 12))]
            say("?M " + " ".join(f"{r.url} {r.priority}" for r in batch))
            frontier.push_many(batch)
            say("M " + " ".join(f"{r.url} {r.priority}" for r in batch))
            old_urls.extend(r.url for r in batch)
        elif roll < 0.60 or roll >= 0.99504 or (roll < 0.995 and not in_flight):
            say("?O")
            popped = frontier.pop()
            if popped is not None:
                say(f"O {popped.url}")
                in_flight.append(popped)
        elif roll < 0.995:
            request = in_flight.pop(rng.randrange(len(in_flight)))
            say(f"?D {request.url}")
            frontier.done(request)
            say(f"D {request.url}")
        elif roll < 0.99502:
            say("?K")
            frontier.compact()  # with requests in flight: they stay in flight
            say("K")
        elif roll < 0.99504:
            say("?C")
            frontier.close()
            say("C")
            in_flight = []
            frontier = Frontier(jobdir, maintenance=settings)
            say("R")


if __name__ == "__main__":
    main()
