"""Many processes on one Redis crawl: real SIGKILLs of a worker holding leases, and of Redis itself."""

from __future__ import annotations

import threading
import time

import pytest
from killcampaign import kill_campaign, start_worker
from redisserver import RedisServer

from diskfrontier import RedisFrontier, RedisUnavailable, Request

pytestmark = pytest.mark.crash


@pytest.mark.slow
def test_four_workers_one_killed_twice_lose_nothing_and_keep_politeness(redis_url, crawl_name, tmp_path):
    total, hosts, delay = 12_000, 100, 0.02
    with RedisFrontier(redis_url, crawl=crawl_name, delay=delay, lease=2.0, order="fifo") as seed:
        assert seed.push_many(Request(f"https://h{i % hosts}.example/{i}") for i in range(total)) == total
    campaign = kill_campaign(lambda log, hold: start_worker("redis", redis_url, crawl_name, log, hold),
                             str(tmp_path), victim_dones=300, patience=60, late=True, wait=180)
    campaign.check({f"https://h{i % hosts}.example/{i}" for i in range(total)})
    closest = campaign.closest_of_one_host()  # politeness across processes
    assert closest >= delay - 1e-4, f"two hand-outs of one host only {closest:.4f}s apart"

    with RedisFrontier(redis_url, crawl=crawl_name) as check:
        stats = check.stats()
        assert check.finished and stats["done"] == total
        # pops whose reply the victim got but had not logged when it was killed (up to 8 at once) are reclaimed too
        assert campaign.reclaimed <= stats["reclaimed"] <= campaign.reclaimed + 8 * len(campaign.dead)


def test_redis_killed_and_restarted_under_load_loses_nothing_acknowledged(tmp_path):
    server = RedisServer(str(tmp_path / "redis"), aof=True, fsync="always")
    server.start()
    url, crawl = server.url, "durable"
    acked_push: set[str] = set()
    acked_done: set[str] = set()
    uncertain: set[str] = set()  # a done that raised RedisUnavailable: it may or may not have landed
    errors: list[str] = []
    outages = [0, 0]
    stop = threading.Event()

    def pusher():
        f = RedisFrontier(url, crawl=crawl)
        n = 0
        while not stop.is_set():
            request = Request(f"https://h{n % 5}.example/{n}")
            try:
                f.push(request)
                acked_push.add(request.url)
                n += 1
            except RedisUnavailable:
                outages[0] += 1
                time.sleep(0.01)
        f.close()

    def worker():
        # ack="wait": a done that returned is in Redis (by default it is sent with the next step)
        f = RedisFrontier(url, crawl=crawl, lease=1.0, ack="wait")
        while not stop.is_set():
            try:
                request = f.pop()
            except RedisUnavailable:
                time.sleep(0.01)
                continue
            if request is None:
                time.sleep(0.001)
                continue
            try:
                f.done(request)
                acked_done.add(request.url)
            except RedisUnavailable:
                outages[1] += 1
                uncertain.add(request.url)
                time.sleep(0.01)
            except Exception as exc:  # anything else is a failure of the test
                errors.append(repr(exc))

    with RedisFrontier(url, crawl=crawl, order="fifo"):
        pass
    threads = [threading.Thread(target=pusher), threading.Thread(target=worker), threading.Thread(target=worker)]
    for t in threads:
        t.start()
    try:
        for _ in range(2):
            time.sleep(0.7)
            server.kill()
            time.sleep(0.3)
            server.start()
        time.sleep(0.7)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors[:3]
    assert outages[0] > 0 and len(acked_done) > 50  # the kills fell under load
    with RedisFrontier(url, crawl=crawl) as f:
        stats = f.stats()
        pending = [r.url for r in f.pending_requests()]  # leased ones included
        assert len(pending) == len(set(pending)) == stats["pending"] + stats["in_flight"]
        assert not (set(pending) & acked_done)  # an acknowledged done never comes back
        lost = acked_push - set(pending) - acked_done - uncertain
        assert not lost, f"{len(lost)} acknowledged pushes are gone: {sorted(lost)[:3]}"
        assert len(acked_done) <= stats["done"] <= len(acked_done) + len(uncertain)
    server.stop()
