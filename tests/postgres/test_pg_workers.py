"""Many processes on one PostgreSQL crawl: real SIGKILLs of a worker holding leases, and a server restart
without a shutdown checkpoint (``pg_ctl restart -m immediate``) under load."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import defaultdict
from itertools import pairwise

import pytest
from pgserver import PgServer
from pgworkers import start_worker
from redisworkers import not_begun, outstanding, read_log

from diskfrontier import PostgresFrontier, PostgresUnavailable, Request

pytestmark = pytest.mark.crash


@pytest.mark.slow
def test_four_workers_one_killed_twice_lose_nothing_and_keep_politeness(postgres_url, crawl_name, tmp_path):
    total, hosts, delay = 6_000, 100, 0.02
    with PostgresFrontier(postgres_url, crawl=crawl_name, delay=delay, lease=2.0, order="fifo") as seed:
        assert seed.push_many(Request(f"https://h{i % hosts}.example/{i}") for i in range(total)) == total
    logs = {name: str(tmp_path / f"{name}.log") for name in ("a", "b", "c", "late")}
    workers = [start_worker(postgres_url, crawl_name, logs[name], 2) for name in ("a", "b", "c")]
    held_at_kill: list[set[str]] = []
    dead: set[str] = set()
    reclaimable = 0  # kills that left a request whose done was not begun: its lease must run out and be taken back
    while reclaimable < 2:  # two kills that land while the victim holds leases
        name = f"victim-{len(dead) + 1}"
        logs[name] = str(tmp_path / f"{name}.log")
        victim = start_worker(postgres_url, crawl_name, logs[name], 8)
        assert victim.stderr is not None
        deadline = time.monotonic() + 120
        while True:  # kill it once it has done some work and holds leases
            lines = read_log(logs[name]) if os.path.exists(logs[name]) else []
            done = sum(1 for line in lines if line[0] == "D")
            if done >= 150 and not_begun(lines):
                victim.send_signal(signal.SIGKILL)
                victim.wait()
                break
            assert victim.poll() is None, victim.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the victim never held leases after 150 dones"
            time.sleep(0.001)
        dead.add(name)
        held = outstanding(read_log(logs[name]))
        reclaimable += bool(not_begun(read_log(logs[name])))
        if held:
            held_at_kill.append(held)
        assert len(dead) < 10
    workers.append(start_worker(postgres_url, crawl_name, logs["late"], 2))  # a fresh one joins late
    for worker in workers:
        _, err = worker.communicate(timeout=300)
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
    assert missing <= begun, sorted(missing - begun)[:3]  # only a done under way at a kill may lack its answer
    assert all(len(d) == 1 for d in dones.values())  # each acknowledged once
    assert {url for url, p in pops.items() if len(p) > 1} <= set().union(*held_at_kill)  # re-handed: only theirs
    reclaimed = sum(len(p) - 1 for p in pops.values())
    assert reclaimed >= 1

    # No request held by two live workers at once: a live holder's time runs from its pop to its done.
    for url, handed in pops.items():
        spans = []
        for name, start, _ in handed:
            if name in dead:
                continue
            ends = [d[2] for d in dones[url] if d[0] == name]
            spans.append((start, ends[0] if ends else float("inf")))
        spans.sort()
        for (_, end1), (start2, _) in pairwise(spans):
            assert start2 >= end1, f"{url} was held by two live workers at once"

    # Politeness across processes: two hand-outs of one host, each known only to lie between its pop's call
    # and return, must be at least the delay apart.
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

    with PostgresFrontier(postgres_url, crawl=crawl_name) as check:
        stats = check.stats()
        print(f"\nkill campaign: {total} requests, {hosts} hosts, {len(dead)} workers killed, "
              f"{len(set().union(*held_at_kill))} held at the kills, {reclaimed} handed out again, "
              f"{stats['reclaimed']} leases taken back, done {stats['done']}, lost 0, "
              f"closest hand-outs of one host {closest * 1000:.1f} ms apart (delay {delay * 1000:.0f} ms)")
        assert check.finished and stats["done"] == total
        assert reclaimed <= stats["reclaimed"] <= reclaimed + 8 * len(dead)


@pytest.mark.slow
def test_a_server_restarted_without_a_checkpoint_under_load_loses_nothing_acknowledged():
    server = PgServer()  # a cluster of its own, in a folder the server's user can reach
    try:
        server.start()
        url = server.create_database("restart")
        _restart_under_load(server, url)
    finally:
        server.stop()
        server.remove()


def _restart_under_load(server: PgServer, url: str) -> None:
    crawl = "durable"
    acked_push: set[str] = set()
    acked_done: set[str] = set()
    uncertain: set[str] = set()  # a done that raised PostgresUnavailable: it may or may not have landed
    errors: list[str] = []
    stop = threading.Event()

    def pusher() -> None:
        f = PostgresFrontier(url, crawl=crawl)
        n = 0
        while not stop.is_set():
            request = Request(f"https://h{n % 5}.example/{n}")
            try:
                f.push(request)
                acked_push.add(request.url)
                n += 1
            except PostgresUnavailable:
                time.sleep(0.01)
            except Exception as exc:  # anything else is a failure of the test
                errors.append(repr(exc))
        f.close()

    def worker() -> None:
        f = PostgresFrontier(url, crawl=crawl, lease=1.0)
        while not stop.is_set():
            try:
                request = f.pop()
            except PostgresUnavailable:
                time.sleep(0.01)
                continue
            except Exception as exc:
                errors.append(repr(exc))
                continue
            if request is None:
                time.sleep(0.001)
                continue
            try:
                f.done(request)
                acked_done.add(request.url)
            except PostgresUnavailable:
                uncertain.add(request.url)
            except Exception as exc:
                errors.append(repr(exc))
        f.close()

    with PostgresFrontier(url, crawl=crawl, order="fifo"):
        pass
    threads = [threading.Thread(target=pusher), threading.Thread(target=worker), threading.Thread(target=worker)]
    for t in threads:
        t.start()
    def work_goes_on(since: int) -> None:
        """Wait until 20 more dones were acknowledged since ``since`` of them (the clients reconnect by
        themselves: a call is tried again for up to a minute)."""
        deadline = time.monotonic() + 120
        while len(acked_done) < since + 20:
            assert time.monotonic() < deadline and not errors, (len(acked_done), since, errors[:3])
            time.sleep(0.05)

    before: list[int] = []
    try:
        work_goes_on(0)
        for _ in range(2):  # each restart under load, and work going on after it
            before.append(len(acked_done))
            server.restart_immediate()
            work_goes_on(before[-1])
    finally:
        stop.set()
        for t in threads:
            t.join(120)
    assert not errors, errors[:3]
    assert len(acked_done) >= before[-1] + 20
    with PostgresFrontier(url, crawl=crawl) as f:
        stats = f.stats()
        pending = [r.url for r in f.pending_requests()]  # leased ones included
        assert len(pending) == len(set(pending)) == stats["pending"] + stats["in_flight"]
        assert not (set(pending) & acked_done)  # an acknowledged done never comes back
        lost = acked_push - set(pending) - acked_done - uncertain
        assert not lost, f"{len(lost)} acknowledged pushes are gone: {sorted(lost)[:3]}"
        assert len(acked_done) <= stats["done"] <= len(acked_done) + len(uncertain)
        print(f"\nrestart under load: 2 restarts (-m immediate), {len(acked_push)} pushes and {len(acked_done)} "
              f"dones acknowledged, {len(uncertain)} dones uncertain, lost 0")
