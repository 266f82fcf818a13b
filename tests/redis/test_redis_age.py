"""Nothing of a Redis crawl grows with its age: a finished request's keys and fields go with its done.

A job directory needs checkpoints and compactions to keep its costs to its size (tests/jobdir/test_upkeep.py);
a Redis crawl deletes a done request's body, lease and place in the same script as its done, so what it holds
is what is pending and in flight, plus the seen set. Shown here by the crawl's keys and hash fields after many
cycles (a pop, a done, a push of a new URL), and by its memory against a crawl that only marked as many URLs
seen: the cycles cost what the seen set costs, and nothing more.
"""

from __future__ import annotations

import redis
from popkit import take

from diskfrontier import RedisFrontier, Request


def _used(client: redis.Redis, crawl: str) -> int:
    """Bytes the crawl's keys take (MEMORY USAGE of each, every element counted): the server's own buffers,
    which an append-only log fills with every write, are left out."""
    return sum(client.memory_usage(key, samples=0) or 0 for key in client.scan_iter(f"df:{{{crawl}}}:*"))


def _cycles(frontier: RedisFrontier, start: int, count: int) -> None:
    inflight = []
    for n in range(start, start + count):
        inflight.append(take(frontier))
        if len(inflight) > 3:
            frontier.done(inflight.pop(0))
        frontier.push(Request(f"https://h{n % 20}.example/{n}"))
    for request in inflight:
        frontier.done(request)


def test_a_redis_crawl_holds_what_is_pending_and_seen_whatever_its_age(redis_url):
    client = redis.Redis.from_url(redis_url)
    cycles = 20_000
    aged = RedisFrontier(redis_url, crawl="aged", ack="wait")  # its keys are read at once by another connection
    aged.push_many(Request(f"https://h{n % 20}.example/{n}") for n in range(500))
    _cycles(aged, 500, 2_000)  # every structure made once
    keys_before = sorted(k.decode() for k in client.scan_iter("df:{aged}:*") if b":k:" not in k)
    used_before = _used(client, "aged")
    _cycles(aged, 2_500, cycles)
    used_aged = _used(client, "aged") - used_before
    keys_after = sorted(k.decode() for k in client.scan_iter("df:{aged}:*") if b":k:" not in k)
    assert keys_after == keys_before  # no key a request of its own: hosts were all made before
    stats = aged.stats()
    assert stats["pending"] == 500 and stats["in_flight"] == 0
    assert client.hlen("df:{aged}:req") == 500  # a done request's body went with its done
    assert client.zcard("df:{aged}:lease") == 0
    aged.close()

    control = RedisFrontier(redis_url, crawl="control")
    control.push_many(Request(f"https://h{n % 20}.example/{n}") for n in range(500))
    control.mark_seen([Request(f"https://h{n % 20}.example/{n}").fingerprint for n in range(500, 2_500)])
    used_before = _used(client, "control")
    control.mark_seen([Request(f"https://h{n % 20}.example/{n}").fingerprint for n in range(2_500, 2_500 + cycles)])
    used_control = _used(client, "control") - used_before
    control.close()
    # the cycles grew the crawl's memory by what as many seen URLs grow it, give or take a tenth and a page
    print(f"\nmemory grown by {cycles:,} cycles: {used_aged:,} B; by as many URLs marked seen: {used_control:,} B")
    assert used_aged <= 1.1 * used_control + 4096
