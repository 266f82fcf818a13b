"""Many processes on one Redis crawl: real SIGKILLs of a worker holding leases, and of Redis itself."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import defaultdict
from itertools import pairwise

import pytest
from redisserver import RedisServer
from redisworkers import not_begun, outstanding, read_log, start_worker

from diskfrontier import RedisFrontier, RedisUnavailable, Request

pytestmark = pytest.mark.crash


@pytest.mark.slow
def test_four_workers_one_killed_twice_lose_nothing_and_keep_politeness(redis_url, crawl_name, tmp_path):
    total, hosts, delay = 12_000, 100, 0.02
    with RedisFrontier(redis_url, crawl=crawl_name, delay=delay, lease=2.0, order="fifo") as seed:
        assert seed.push_many(Request(f"https://h{i % hosts}.example/{i}") for i in range(total)) == total
    logs = {name: str(tmp_path / f"{name}.log") for name in ("a", "b", "c", "late")}
    workers = [start_worker(redis_url, crawl_name, logs[name], 2) for name in ("a", "b", "c")]
    held_at_kill: list[set[str]] = []
    dead: set[str] = set()
    reclaimable = 0  # kills that left a request whose done was not begun: its lease must run out and be taken back
    while reclaimable < 2:  # two kills that land while the victim holds leases
        name = f"victim-{len(dead) + 1}"
        logs[name] = str(tmp_path / f"{name}.log")
        victim = start_worker(redis_url, crawl_name, logs[name], 8)
        assert victim.stderr is not None
        deadline = time.monotonic() + 60
        while True:  # kill it once it has done some work and holds leases
            lines = read_log(logs[name]) if os.path.exists(logs[name]) else []
            done = sum(1 for line in lines if line[0] == "D")
            if done >= 300 and not_begun(lines):
                victim.send_signal(signal.SIGKILL)
                victim.wait()
                break
            assert victim.poll() is None, victim.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the victim never held leases after 300 dones"
            time.sleep(0.001)
        dead.add(name)
        held = outstanding(read_log(logs[name]))
        reclaimable += bool(not_begun(read_log(logs[name])))  # else it began every done before the kill
        if held:  # else it finished them between the look and the kill: kill another
            held_at_kill.append(held)
        assert len(dead) < 10
    workers.append(start_worker(redis_url, crawl_name, logs["late"], 2))  # a fresh one joins late
    for worker in workers:
        _, err = worker.communicate(timeout=180)
        assert worker.returncode == 0, err.decode()[-3000:]

    pops: dict[str, list[tuple[str, float, float]]] = defaultdict(list)  # url -> [(worker, start, end)]
    dones: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    for name, path in logs.items():
        for line in read_log(path):
            if line[0] == "P":
                pops[line[1]].append((name, float(line[2]), float(line[3])))
            elif line[0] == "D":
                dones[line[1]].append((name, float(line[2]), float(line[3])))
    everything = {f"https://h{i % hosts}.example/{i}" for i in range(total)}
    missing = everything - set(dones)
    begun = {line[1] for name in dead for line in read_log(logs[name]) if line[0] == "B"}
    # every request done, none lost: only a done under way at a kill may lack its confirmation
    assert missing <= begun, sorted(missing - begun)[:3]
    assert all(len(d) == 1 for d in dones.values())  # each acknowledged once
    assert {url for url, p in pops.items() if len(p) > 1} <= set().union(*held_at_kill)  # re-handed: only theirs
    reclaimed = sum(len(p) - 1 for p in pops.values())
    assert reclaimed >= 1

    # No request held by two live workers at once: a live holder's time runs from its pop to its done.
    for url, handed in pops.items():
        if len(handed) < 2:
            continue
        spans = []
        for name, start, _ in handed:
            if name in dead:
                continue
            ends = [d[2] for d in dones[url] if d[0] == name]
            spans.append((start, ends[0] if ends else float("inf")))
        spans.sort()
        for (_, end1), (start2, _) in pairwise(spans):
            assert start2 >= end1, f"{url} was held by two live workers at once"

    # Politeness across processes: two hand-outs of one host, each known only to lie between its
    # pop's call and return, must be at least the delay apart.
    by_host: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for url, handed in pops.items():
        for _, start, end in handed:
            by_host[url.split("/")[2]].append((start, end))
    closest = float("inf")
    for times in by_host.values():
        times.sort()
        for (a1, b1), (a2, b2) in pairwise(times):
            closest = min(closest, max(b2 - a1, b1 - a2))
    assert closest >= delay - 1e-4, f"two hand-outs of one host only {closest:.4f}s apart"

    with RedisFrontier(redis_url, crawl=crawl_name) as check:
        stats = check.stats()
        assert check.finished and stats["done"] == total
        # pops whose reply the victim got but had not logged when it was killed (up to 8 at once) are reclaimed too
        assert reclaimed <= stats["reclaimed"] <= reclaimed + 8 * len(dead)


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
