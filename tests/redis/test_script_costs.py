"""What a pop carrying a done runs on the server: the crawl's counters written once for the dones and once
for the leases, no index read that its checked counts say is empty, its host's ready entry taken in one
command and the done's host counts read and written once (counted with ``INFO commandstats``, which counts
each command a script runs)."""

from __future__ import annotations

import collections
import time

import redis

from diskfrontier import Request

CYCLES = 20


def commands(url: str) -> collections.Counter[str]:
    """Calls of each command since the server's statistics were reset (the scripts' own commands counted)."""
    client = redis.Redis.from_url(url)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return collections.Counter({name.removeprefix("cmdstat_"): int(entry["calls"]) for name, entry in stats.items()})


def reset(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.config_resetstat()
    finally:
        client.close()


def test_a_pop_carrying_a_done_writes_the_counters_twice_and_reads_no_empty_index(open_crawl, redis_url):
    f = open_crawl()
    f.push_many(Request(f"https://h{i % 4}.example/{i}") for i in range(2 * CYCLES))
    request = f.pop()
    reset(redis_url)
    for _ in range(CYCLES):
        assert request is not None
        f.done(request)
        request = f.pop()
    counted = commands(redis_url)
    assert counted["evalsha"] == CYCLES  # one script a cycle, each carrying the done before it
    assert counted["hincrby"] == 0  # before: 7 a cycle (5 of the crawl's counters, 2 of the host's)
    # a script checks the eviction policy at most every 0.1 s (INFO, and an HSET of when): not a cycle's cost
    policy = counted["info"]
    # meta for the done and for the lease, the done's host, the popped host, owner
    assert counted["hset"] == 5 * CYCLES + policy
    # the waiting hosts only: nothing is delayed, and once the done is applied nothing is leased
    assert counted["zrangebyscore"] == CYCLES
    assert counted["zpopmin"] == CYCLES and counted["zrange"] == CYCLES  # the ready entry; the host's next request
    inner = sum(n for name, n in counted.items() if name not in ("evalsha", "config|resetstat", "hello"))
    assert inner - 2 * policy == 27 * CYCLES, counted  # before: 34
    stats = f.stats()
    assert (stats["done"], stats["in_flight"], stats["pending"]) == (CYCLES, 1, CYCLES - 1)


def test_the_counters_a_pop_writes_at_once_agree_with_what_it_took_back(open_crawl):
    """The pop's HSET of pending and in flight counts the leases its own step took back (a guard of the
    counts it computes instead of adding to them: the next step's checks would find any difference)."""
    f, other = open_crawl(lease=0.2, renew=False), open_crawl()
    f.push_many(Request(f"https://h{i % 2}.example/{i}") for i in range(6))
    lost = [f.pop(), f.pop()]
    assert all(lost)
    request = other.pop()
    assert request is not None
    other.done(request)  # rides on the next pop, which also takes back the two leases run out
    time.sleep(0.3)
    again = other.pop()
    assert again is not None
    stats = other.stats()
    assert (stats["done"], stats["in_flight"], stats["pending"], stats["reclaimed"]) == (1, 1, 4, 2)
