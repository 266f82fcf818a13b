"""A client that makes a Redis crawl of many shards, to be killed with SIGKILL while it makes them.

Usage: shard_maker_child.py URL CRAWL SHARDS
"""

from __future__ import annotations

import sys

from diskfrontier import RedisFrontier


def main() -> None:
    server, crawl, shards = sys.argv[1], sys.argv[2], int(sys.argv[3])
    RedisFrontier(server, crawl=crawl, shards=shards).close()


if __name__ == "__main__":
    main()
