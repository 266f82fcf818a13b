"""A client pushing URLs into a Redis crawl as fast as it can, to be killed with SIGKILL mid-way.

Usage: seen_push_child.py URL CRAWL TOTAL

Pushes ``https://h{i % 50}.example/{i}`` for i in 0..TOTAL-1 in batches of 200, each batch with
100 URLs of the batch before it again (duplicates), then marks the rest of the range seen in batches
of 500, then repeats the whole range (all duplicates), until it is killed.
"""

from __future__ import annotations

import sys

from diskfrontier import RedisFrontier, Request


def url(i: int) -> str:
    return f"https://h{i % 50}.example/{i}"


def main() -> None:
    server, crawl, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
    frontier = RedisFrontier(server, crawl=crawl)
    while True:
        for at in range(0, total // 2, 200):
            again = range(max(0, at - 100), at)
            frontier.push_many(Request(url(i)) for i in [*range(at, at + 200), *again])
        for at in range(total // 2, total, 500):
            frontier.mark_seen(Request(url(i)).fingerprint for i in range(at, min(total, at + 500)))


if __name__ == "__main__":
    main()
