"""Leases that follow the worker: a client renews what it holds in the background; a killed or frozen
client's requests go to others within one lease, and its late done() changes nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from typing import cast

import pytest
import redis

from diskfrontier import LeaseExpired, RedisFrontier, Request

LEASE = 1.0


def test_a_request_worked_on_for_many_leases_stays_with_its_client(redis_url, crawl_name):
    with RedisFrontier(redis_url, crawl=crawl_name, lease=LEASE) as worker, \
            RedisFrontier(redis_url, crawl=crawl_name, lease=LEASE) as other:
        worker.push(Request("https://slow.example/page"))
        held = worker.pop()
        assert held is not None
        deadline = time.monotonic() + 4 * LEASE
        while time.monotonic() < deadline:
            assert other.pop() is None, "a lease renewed in the background was taken back"
            time.sleep(LEASE / 10)
        worker.done(held)  # still its own: no LeaseExpired
        assert worker.stats()["reclaimed"] == 0 and other.pop() is None


HOLDER = textwrap.dedent("""
    import sys, time
    from diskfrontier import RedisFrontier
    f = RedisFrontier(sys.argv[1], crawl=sys.argv[2], lease=float(sys.argv[3]))
    held = [f.pop() for _ in range(3)]
    print("holding", flush=True)
    time.sleep(3600)
""")


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSTOP"])
def test_a_killed_or_frozen_clients_requests_go_to_others_within_one_lease(redis_url, crawl_name, how):
    with RedisFrontier(redis_url, crawl=crawl_name, lease=LEASE) as other:
        other.push_many(Request(f"https://h{i}.example/") for i in range(3))
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, redis_url, crawl_name, str(LEASE)],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "holding"
            time.sleep(2 * LEASE)  # it renews while it runs
            assert other.pop() is None
            os_signal = signal.SIGKILL if how == "SIGKILL" else signal.SIGSTOP
            server = redis.Redis.from_url(redis_url)
            seconds, micros = server.time()
            leases = cast(list[tuple[bytes, float]], server.zrange(f"df:{{{crawl_name}}}:lease", 0, -1,
                                                                   withscores=True))
            assert len(leases) == 3
            stopped = time.monotonic()
            proc.send_signal(os_signal)
            # the earliest its leases may run out, as they stood when it was stopped (a renewal a
            # busy machine delayed brings it closer)
            runs_out = min(score for _, score in leases) - (seconds + micros / 1e6)
            taken: list[Request] = []
            while len(taken) < 3:
                request = other.pop(timeout=LEASE)
                if request is not None:
                    taken.append(request)
                assert time.monotonic() - stopped < 10 * LEASE, "the requests never came back"
            waited = time.monotonic() - stopped
            assert waited >= runs_out - 0.1, (waited, runs_out)  # not before its last renewal ran out
            assert sorted(r.url for r in taken) == [f"https://h{i}.example/" for i in range(3)]
            for request in taken:
                other.done(request)
            assert other.stats()["reclaimed"] == 3
        finally:
            if how == "SIGSTOP":
                proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()


def test_a_client_that_comes_back_late_gets_lease_expired_and_changes_nothing(redis_url, crawl_name):
    with RedisFrontier(redis_url, crawl=crawl_name, lease=LEASE) as worker, \
            RedisFrontier(redis_url, crawl=crawl_name, lease=LEASE) as other:
        worker.push(Request("https://late.example/"))
        held = worker.pop()
        assert held is not None
        assert worker._renewal is not None
        worker._renewal.stop()  # as if frozen: nothing renews its lease now
        taken = other.pop(timeout=5 * LEASE)
        assert taken is not None and taken.url == held.url
        with pytest.raises(LeaseExpired):
            worker.done(held)
        other.done(taken)
        assert other.stats()["done"] == 1 and len(other) == 0
