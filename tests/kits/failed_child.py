"""A child for the failed-requests crash test: random pushes, pops, dones, retries, fails,
requeue_failed calls and compactions on a job directory, each announced before the call
("B") and confirmed after it ("A") on stdout, until the parent kills it with SIGKILL.

Usage: failed_child.py JOBDIR SEED ROUND
"""

from __future__ import annotations

import json
import random
import sys

from diskfrontier import Frontier, Request

HOSTS = ["h0.example", "h1.example", "h2.example"]


def say(tag: str, **fields: object) -> None:
    sys.stdout.write(tag + " " + json.dumps(fields, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def error_text(rng: random.Random, n: int) -> str:
    """Short, long (cut at 4,000 bytes by fail) or multi-byte error texts."""
    roll = rng.random()
    if roll < 0.2:
        return f"E{n} " + "€" * rng.randrange(1300, 1500)
    if roll < 0.3:
        return ""
    return f"E{n} ConnectionError: refused ü\n  at line {rng.randrange(100)}"


def main() -> None:
    job, seed, round_no = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed * 1000 + round_no)
    frontier = Frontier(job)
    held: list[Request] = []
    n = 0
    while True:
        weights = [5, 5 if len(frontier) else 0, 7 if held else 0, 1, 0.4 if not held else 0]
        what = rng.choices(["push", "pop", "finish", "requeue", "compact"], weights)[0]
        if what == "push":
            url = f"https://{rng.choice(HOSTS)}/r{round_no}/{n}"
            n += 1
            say("B", op="push", url=url)
            frontier.push(Request(url))
            say("A", op="push", url=url)
        elif what == "pop":
            request = frontier.pop()
            if request is not None:
                held.append(request)
                say("A", op="pop", url=request.url)
        elif what == "finish":
            request = held.pop(rng.randrange(len(held)))
            what = rng.choice(["done", "retry", "fail", "fail"])
            error = error_text(rng, n) if what == "fail" else None
            n += 1
            attempts = request.attempts  # as they were before the call, in both lines
            say("B", op=what, url=request.url, attempts=attempts, error=error)
            if what == "done":
                frontier.done(request)
            elif what == "retry":
                frontier.retry(request)
            else:
                assert error is not None
                frontier.fail(request, error)
            say("A", op=what, url=request.url, attempts=attempts, error=error)
        elif what == "requeue":
            limit = rng.choice([1, 2, 3, None])
            say("B", op="requeue", limit=limit)
            count = frontier.requeue_failed(limit)
            say("A", op="requeue", limit=limit, count=count)
        else:
            say("B", op="compact")
            frontier.compact()
            say("A", op="compact")

if __name__ == "__main__":
    main()
