"""A child for the host-failure crash test: random failures of hosts and dones of their requests on a job
directory, each announced before the call ("B") and confirmed after it ("A") on stdout, until the parent
kills it with SIGKILL."""

from __future__ import annotations

import json
import random
import sys

from diskfrontier import Frontier, Request

HOSTS = ["h0.example", "h1.example", "h2.example"]
BLOCK_AFTER = 3


def say(tag: str, **fields: object) -> None:
    sys.stdout.write(tag + " " + json.dumps(fields) + "\n")
    sys.stdout.flush()


def main() -> None:
    job, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    frontier = Frontier(job)
    n = 0
    while True:
        host = rng.choice(HOSTS)
        if rng.random() < 0.75:
            say("B", op="failed", host=host)
            until = frontier.host_failed(host, block_after=BLOCK_AFTER, backoff=1000.0, backoff_max=10**6)
            say("A", op="failed", host=host, until=until)
        else:  # a request of the host, handed out and done: the streak ends
            frontier.unblock(host)
            frontier.push(Request(f"https://{host}/s{seed}/{n}"))
            n += 1
            request = frontier.pop()
            assert request is not None
            say("B", op="done", host=request.slot)
            frontier.done(request)
            say("A", op="done", host=request.slot)


if __name__ == "__main__":
    main()
