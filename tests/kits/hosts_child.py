"""A child for the hosts-and-time crash test: random pushes, pops, dones, retries,
re-fetches and host settings on a job directory, each announced before the call ("B")
and confirmed after it ("A") on stdout, until the parent kills it with SIGKILL."""

from __future__ import annotations

import json
import math
import random
import sys
import time

from diskfrontier import Frontier, Request

HOSTS = ["h0.example", "h1.example", "h2.example", "h3.example"]


def say(tag: str, **fields: object) -> None:
    sys.stdout.write(tag + " " + json.dumps(fields) + "\n")
    sys.stdout.flush()


def main() -> None:
    job, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    frontier = Frontier(job)
    held: list[Request] = []
    n = 0
    while True:
        roll = rng.random()
        if roll < 0.35 or not (held or len(frontier)):
            url = f"https://{rng.choice(HOSTS)}/s{seed}/{n}"
            n += 1
            due = time.time() + 3600 if rng.random() < 0.2 else None
            say("B", op="push", url=url, due=due)
            frontier.push(Request(url), not_before=due)
            say("A", op="push", url=url, due=due)
        elif roll < 0.55 or not held:
            request = frontier.pop()
            if request is not None:
                held.append(request)
                say("A", op="pop", url=request.url)
        elif roll < 0.85:
            request = held.pop(rng.randrange(len(held)))
            what = rng.choice(["done", "retry-now", "retry-later", "refetch"])
            say("B", op=what, url=request.url, attempts=request.attempts)
            if what == "done":
                frontier.done(request)
            elif what == "refetch":
                frontier.done(request, refetch_after=3600)
            else:
                frontier.retry(request, delay=0 if what == "retry-now" else 3600)
            say("A", op=what, url=request.url, attempts=request.attempts, due=request.not_before)
        else:
            host = rng.choice(HOSTS)
            setting = rng.choice(["delay", "block", "unblock", "budget"])
            value: object = None
            if setting == "delay":
                value = rng.choice([None, 0.0, 1.5, 3600.0])
            elif setting == "block":
                value = rng.choice([time.time() + 3600, math.inf])
            elif setting == "budget":
                value = rng.choice([None, 0, 5, 1000])
            say("B", op=setting, host=host, value=_json(value))
            if setting == "delay":
                frontier.set_delay(host, value)  # type: ignore[arg-type]
            elif setting == "block":
                frontier.block(host, value)  # type: ignore[arg-type]
            elif setting == "unblock":
                frontier.unblock(host)
            else:
                frontier.set_budget(host, value)  # type: ignore[arg-type]
            say("A", op=setting, host=host, value=_json(value))


def _json(value: object) -> object:
    return "inf" if value == math.inf else value


if __name__ == "__main__":
    main()
