"""Redis memory per seen URL: the exact seen set (default settings), the earlier layout, and the Bloom filter.

    python benchmarks/bench_redis_memory.py               # 2x10^5 and 10^7 URLs (about 10 minutes here)
    python benchmarks/bench_redis_memory.py --quick       # 2x10^5 and 10^6 URLs
    python benchmarks/bench_redis_memory.py --sizes 200000,10000000 --probe 200000

The benchmark starts its own redis-server (a free loopback port, a temporary directory, ``--save ''``,
no AOF) and, for each row, flushes it, reads ``INFO memory`` ``used_memory``, fills one crawl, and reads
it again once the server is idle: the difference divided by the URLs is the figure. Every crawl is
opened with the default settings but ``dedupe``:

* ``exact``: the default (64-bit keys in intset buckets that grow with the crawl);
* ``hash``: the layout of crawls made before it (listpack hash buckets, their number fixed by
  ``expected_urls``, left at its default of 10^7), at the smallest size only;
* ``bloom``: a scalable series of Bloom filters, at the default ``error_rate=1e-7`` and at 1e-3 (whose
  false positives are frequent enough to count).

The scripts are loaded (a crawl that runs each of them, then dropped) before the first reading: the server keeps
them once, whatever the crawls hold. At the smallest size the URLs are pushed with
``push_many`` over 100 hosts and then drained (``pop_many`` + ``done_many``), so that only the
seen set is left, as a finished crawl holds it; at the larger sizes their fingerprints are
marked seen with ``mark_seen`` in batches (the same seen set, without storing requests). A Bloom
row then asks ``has_seen`` for ``--probe`` fingerprints never added and counts how many it calls
seen: the measured false-positive rate.

Crawlee's figures are quoted beside, from its source and API documentation: what is published is its
filters' settings, not their memory or measured error.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import time
from collections.abc import Iterator
from typing import Any

import benchresults
from bench_redis import RedisServer, settle

CRAWL = "mem"
HOSTS = 100
BATCH = 10_000
CRAWLEE_SOURCES = (
    "crawlee.dev/python/api/class/RedisStorageClient: queue_dedup_strategy 'bloom' uses \"Redis Bloom filters for "
    "probabilistic deduplication\"; queue_bloom_error_rate default 1e-7",
    "apify/crawlee-python src/crawlee/storage_clients/_redis/_request_queue_client.py: BF.RESERVE of two filters "
    "per queue (added_bloom_filter, handled_bloom_filter), error 1e-7, capacity 100000, EXPANSION 10; needs the "
    "RedisBloom module (Redis 8 or Redis Stack)",
)


def fingerprints(start: int, count: int, salt: bytes) -> list[bytes]:
    """``count`` SHA-1 fingerprints (as Scrapy's are), distinct for distinct (salt, number)."""
    return [hashlib.sha1(salt + i.to_bytes(8, "big"), usedforsecurity=False).digest()
            for i in range(start, start + count)]


def url_batches(n: int) -> Iterator[list[Any]]:
    from diskfrontier import Request

    for at in range(0, n, BATCH):
        yield [Request(f"https://h{i % HOSTS}.example/{i}") for i in range(at, min(n, at + BATCH))]


def fill(server: RedisServer, dedupe: str, n: int, error_rate: float, drain: bool) -> dict[str, Any]:
    """One crawl of ``n`` seen URLs: bytes of Redis memory per URL, and how long the fill took."""
    from diskfrontier import RedisFrontier, Request

    server.flush()
    with RedisFrontier(server.url, crawl="warm-up", dedupe=dedupe) as warm:  # loads the scripts a fill runs:
        warm.push(Request("https://warm.example/"))                          # not a cost per URL
        warm.done_many(warm.pop_many(10))
        warm.mark_seen([b"warm"])
        warm.has_seen(b"warm")
        warm.drop_crawl()
    before = settle(server)
    start = time.perf_counter()
    with RedisFrontier(server.url, crawl=CRAWL, dedupe=dedupe, error_rate=error_rate) as frontier:
        if drain:
            for batch in url_batches(n):
                frontier.push_many(batch)
            while got := frontier.pop_many(2000):
                frontier.done_many(got)
        else:
            for at in range(0, n, BATCH):
                frontier.mark_seen(fingerprints(at, min(BATCH, n - at), b"in"))
        stats = frontier.stats()
    seconds = time.perf_counter() - start
    used = settle(server) - before
    layout = {k: v for k, v in stats.items() if k in ("seen_layout", "seen_buckets", "bloom_filters")}
    return {"dedupe": dedupe, "n": n, "seen": stats["seen"], "bytes": used, "per_url": used / n,
            "seconds": seconds, "how": "push_many + drain" if drain else "mark_seen", **layout}


def probe(server: RedisServer, count: int) -> int:
    """How many of ``count`` fingerprints never added ``has_seen`` calls seen (the crawl is left as it is)."""
    from diskfrontier import RedisFrontier

    false = 0
    with RedisFrontier(server.url, crawl=CRAWL) as frontier:
        for at in range(0, count, BATCH):
            false += sum(frontier.has_seen(x) for x in fingerprints(at, min(BATCH, count - at), b"never"))
    return false


def run(server: RedisServer, sizes: list[int], probes: int, with_hash: bool) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        plan: list[tuple[str, float]] = [("exact", 1e-7)]
        if with_hash and n == min(sizes):
            plan.append(("hash", 1e-7))
        plan += [("bloom", 1e-7), ("bloom", 1e-3)]
        for dedupe, rate in plan:
            row = fill(server, dedupe, n, rate, drain=n == min(sizes))
            row["error_rate"] = rate if dedupe == "bloom" else None
            if dedupe == "bloom":
                row["probed"] = probes
                row["false_positives"] = probe(server, probes)
                row["measured_rate"] = row["false_positives"] / probes
            rows.append(row)
            shown = "" if dedupe != "bloom" else (f", error_rate {rate:g}: {row['false_positives']:,} of {probes:,} "
                                                  f"never-added fingerprints reported seen")
            print(f"  {dedupe:5} {n:>12,} URLs ({row['how']}): {row['per_url']:6.2f} B/URL in "
                  f"{row['seconds']:.0f} s{shown}", file=sys.stderr)
    return rows


LABELS = {"exact": "diskfrontier exact (default)", "hash": "diskfrontier, earlier layout (hash buckets)",
          "bloom": "diskfrontier bloom"}


def memory_table(rows: list[dict[str, Any]], probes: int) -> dict[str, Any]:
    cells = []
    for r in rows:
        rate = r["error_rate"]
        label = LABELS[r["dedupe"]] + (f", error_rate {rate:g}" if rate is not None else "")
        buckets = (f"{r['bloom_filters']} filters" if "bloom_filters" in r else f"{r['seen_buckets']:,} buckets")
        measured = None if rate is None else f"{r['false_positives']:,} / {r['probed']:,} = {r['measured_rate']:.2g}"
        cells.append([label, r["n"], r["how"], r["per_url"], buckets, measured, r["seconds"]])
    cells.append(["Crawlee RedisStorageClient, queue_dedup_strategy='bloom' (RedisBloom), error 1e-7", None,
                  "BF.RESERVE 1e-7, capacity 100,000, EXPANSION 10; two filters per queue",
                  "no published figure (not measurable here: Debian's redis-server has no RedisBloom)", None,
                  "no published measurement", None])
    return benchresults.table(
        "Redis memory per seen URL (INFO used_memory after - before, fresh server), default settings but dedupe",
        [("seen set", None), ("URLs", "{:,}"), ("filled with", None), ("bytes per URL", "{:.2f}"),
         ("buckets / filters", None), ("false positives (measured)", None), ("seconds", "{:.0f}")],
        cells,
        [f"False positives: has_seen of {probes:,} fingerprints never added, after the fill.",
         "exact: two URLs share a 64-bit key with odds of about n**2 / 2**65 (3e-6 at 10^7, 3e-4 at 10^8).",
         *("Crawlee, quoted: " + source for source in CRAWLEE_SOURCES)])


def print_table(t: dict[str, Any]) -> None:
    """The table as text: a column per figure, cells shown with the column's format."""
    def shown(cell: Any, form: str | None) -> str:
        if cell is None:
            return "-"
        return form.format(cell) if form is not None and isinstance(cell, (int, float)) else str(cell)

    rows = [[shown(c, f) for c, f in zip(row, t["formats"], strict=True)] for row in t["rows"]]
    widths = [max(len(x) for x in column) for column in zip(t["columns"], *rows, strict=True)]
    print(f"\n{t['title']}")
    for row in [t["columns"], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    for note in t["notes"]:
        print(f"  * {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="200000,10000000", help="URL counts, comma-separated")
    parser.add_argument("--quick", action="store_true", help="sizes 200000,1000000")
    parser.add_argument("--probe", type=int, default=200_000, help="never-added fingerprints a Bloom row probes")
    parser.add_argument("--no-hash", action="store_true", help="leave out the earlier layout's rows")
    benchresults.add_argument(parser, "bench_redis_memory")
    args = parser.parse_args()
    sizes = [200_000, 1_000_000] if args.quick else sorted(int(x) for x in args.sizes.split(","))
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    with RedisServer(binary, None) as server:
        print(server.describe(), file=sys.stderr)
        rows = run(server, sizes, args.probe, not args.no_hash)
        describe = server.describe()
    tables = [memory_table(rows, args.probe)]
    print(describe)
    for t in tables:
        print_table(t)
    benchresults.write(args.results, "bench_redis_memory", {**vars(args), "sizes": sizes}, tables,
                       {"rows": rows, "server": describe})


if __name__ == "__main__":
    main()
