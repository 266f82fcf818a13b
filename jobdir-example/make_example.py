"""Make jobdir-example/job: a small job directory, as a batch script would.

    python jobdir-example/make_example.py

Deterministic: the same requests, the same pops and dones, every time (only the
timestamps in frontier.json and requests.cursor, and the random id
that both name, differ). The result is committed so
that the README and the tests can inspect a real job directory.
"""

from __future__ import annotations

import os
import shutil

from diskfrontier import Frontier, Request

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "job")


def main() -> None:
    shutil.rmtree(JOB, ignore_errors=True)
    with Frontier(JOB) as frontier:
        # seeds: one per section of a shop, the home page first
        frontier.push(Request("https://shop.example/", priority=10))
        for section in ("shoes", "hats", "bags"):
            frontier.push(Request(f"https://shop.example/{section}/", priority=5))
        # a crawl step: take the home page, "find" product links, finish it
        home = frontier.pop()
        frontier.push_many(
            Request(f"https://shop.example/{section}/item-{n}.html", priority=0, meta={"section": section})
            for section in ("shoes", "hats", "bags") for n in range(1, 6)
        )
        frontier.push(Request("https://shop.example/shoes/"))  # a duplicate: refused
        frontier.push(Request("https://shop.example/api/search", method="POST", body=b'{"q": "red"}', priority=1))
        frontier.done(home)
        # one section page is fetched and finished, another is in flight when we stop:
        # close() puts it back in the queue
        frontier.done(frontier.pop())
        frontier.pop()
    print(f"wrote {JOB}")


if __name__ == "__main__":
    main()
