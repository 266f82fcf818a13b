"""A master of a real Redis Cluster SIGKILLed under load: its replica takes over and the crawl goes on.
What the failover lost is counted and printed; with ``wait_replicas=1`` nothing acknowledged may be lost."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import pytest

from diskfrontier import CrawlDamaged, FrontierError, LeaseExpired, RedisFrontier, Request
from diskfrontier.redisfrontier.connection import NotReplicated
from diskfrontier.redisfrontier.shards import key_slot

pytestmark = pytest.mark.crash


def run_through_a_failover(cluster, crawl: str, wait_replicas: int) -> dict[str, int]:
    """A pusher and two workers on ``crawl`` while the master of its shard 0 is killed (and restarted, as a
    replica, once its replica took over); the tallies of what was acknowledged and what is there after."""
    url = cluster.live_url()
    options: dict[str, Any] = {"wait_replicas": wait_replicas, "wait_timeout": 0.5}
    with RedisFrontier(url, crawl=crawl, shards=3, order="fifo", **options):
        pass
    acked_push: set[str] = set()
    acked_done: set[str] = set()
    unsure: set[str] = set()  # a push or done that raised: it may or may not have landed, or been replicated
    tally = {"push errors": 0, "pop errors": 0, "done errors": 0, "leases lost": 0, "not replicated": 0}
    errors: list[str] = []
    stop = threading.Event()

    def failed(kind: str, exc: FrontierError) -> None:
        if isinstance(exc, CrawlDamaged):
            errors.append(repr(exc))
        tally["not replicated" if isinstance(exc, NotReplicated) else kind] += 1
        time.sleep(0.02)

    def pusher() -> None:
        f = RedisFrontier(url, crawl=crawl, **options)
        n = 0
        while not stop.is_set():
            request = Request(f"https://h{n % 30}.example/{n}")
            n += 1
            try:
                f.push(request)
                acked_push.add(request.url)
            except FrontierError as exc:
                unsure.add(request.url)
                failed("push errors", exc)
        f.close()

    def worker() -> None:
        f = RedisFrontier(url, crawl=crawl, lease=1.0, **options)
        while not stop.is_set():
            try:
                request = f.pop()
            except FrontierError as exc:
                failed("pop errors", exc)
                continue
            if request is None:
                time.sleep(0.002)
                continue
            try:
                f.done(request)
                acked_done.add(request.url)
            except LeaseExpired:
                tally["leases lost"] += 1
            except FrontierError as exc:
                unsure.add(request.url)
                failed("done errors", exc)
        with contextlib.suppress(FrontierError):
            f.close()

    threads = [threading.Thread(target=pusher), threading.Thread(target=worker), threading.Thread(target=worker)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.8)
        victim = cluster.master_of_slot(key_slot(crawl))
        pushed_before = len(acked_push)
        victim.kill()
        tally["failover ms"] = int(cluster.wait_failover(key_slot(crawl), victim) * 1000)
        victim.start()  # back as a replica of the master that took over
        cluster.wait_replica_synced(victim)
        done_after_failover = len(acked_done)
        time.sleep(1.0)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not errors, errors[:3]
    assert pushed_before > 50 and len(acked_done) > done_after_failover  # the kill fell under load; it went on
    with RedisFrontier(cluster.live_url(), crawl=crawl) as f:
        stats = f.stats()
        there = [r.url for r in f.pending_requests()]  # leased ones included
        assert len(there) == len(set(there)) == stats["pending"] + stats["in_flight"]
        tally["acknowledged pushes"], tally["acknowledged dones"] = len(acked_push), len(acked_done)
        tally["lost pushes"] = len(acked_push - set(there) - acked_done - unsure)
        tally["dones undone"] = len(set(there) & acked_done)
    print(f"failover, wait_replicas={wait_replicas}: {tally}")
    return tally


def test_a_master_killed_under_load_the_crawl_goes_on_and_losses_are_counted(redis_cluster):
    without = run_through_a_failover(redis_cluster, "failover0", 0)
    assert without["acknowledged pushes"] > 0  # what it lost is printed: acknowledged writes not yet replicated
    with_wait = run_through_a_failover(redis_cluster, "failover1", 1)
    assert with_wait["lost pushes"] == 0 and with_wait["dones undone"] == 0
