"""What only the Redis backend has: leases, several clients, the server's settings, outages and
keys changed behind its back. Against a real redis-server."""

from __future__ import annotations

import gc
import logging
import math
import os
import subprocess
import sys
import time

import pytest
import redis
from redisserver import RedisServer
from timing import Window, with_longer_times

from diskfrontier import (
    FrontierClosed,
    FrontierError,
    LeaseExpired,
    NotInFlight,
    RedisFrontier,
    RedisMisconfigured,
    RedisUnavailable,
    Request,
)
from diskfrontier.redisfrontier.seen import key64, reduced_fingerprint


def test_a_run_out_lease_is_taken_back_and_the_late_done_is_refused(open_crawl):
    def attempt(lease: float) -> None:
        crawl = f"-{lease:g}"  # a crawl of its own each try
        slow = open_crawl(crawl=crawl, lease=lease, renew=False)  # slow: a client that renews nothing
        fast = open_crawl(crawl=crawl, lease=30)
        slow.push(Request("https://a.example/x"))
        window = Window(lease)
        held = slow.pop()
        stolen = fast.pop()
        window.step()  # fast asked within the lease (or a busy machine made it late: a longer lease)
        assert stolen is None  # leased to slow
        again = fast.pop(timeout=60 * lease)  # waits until the lease runs out
        assert again is not None and again.url == held.url and window.since_opened() >= lease
        with pytest.raises(LeaseExpired):
            slow.done(held)
        assert fast.stats()["in_flight"] == 1  # the late done did not acknowledge fast's copy
        fast.done(again)
        stats = fast.stats()
        assert stats["done"] == 1 and stats["reclaimed"] == 1 and fast.finished
        with pytest.raises(NotInFlight):
            slow.done(held)  # forgotten after the refusal

    with_longer_times(attempt, 0.3)


def test_extend_keeps_a_lease_and_a_run_out_lease_not_yet_taken_counts(open_crawl):
    def attempt(lease: float) -> None:
        crawl = f"-{lease:g}"
        worker, other = open_crawl(crawl=crawl, lease=lease, renew=False), open_crawl(crawl=crawl)
        worker.push_many([Request("https://a.example/1"), Request("https://a.example/2")])
        window = Window(lease)
        first, second = worker.pop(), worker.pop()
        for _ in range(3):
            time.sleep(lease / 2)
            worker.extend(first, lease)
            window.step()  # each extend within the lease before it
        taken = other.pop()
        window.step()
        assert taken is not None  # second's lease ran out and was taken back; first's was renewed
        assert other.pop() is None
        window.step()
        worker.done(first)
        with pytest.raises(LeaseExpired):
            worker.done(second)
        late = open_crawl(crawl=crawl, lease=lease, renew=False)
        late.push(Request("https://b.example/"))
        r = late.pop()
        time.sleep(1.5 * lease)
        late.done(r)  # run out, but nobody took it back: still this client's
        assert late.stats()["reclaimed"] == 1

    with_longer_times(attempt, 0.3)


def test_close_gives_leases_back_at_once_at_their_place(open_crawl):
    a = open_crawl(order="fifo")
    a.push_many(Request(f"https://a.example/{i}") for i in range(3))
    held = [a.pop(), a.pop()]
    a.close()
    b = open_crawl()
    assert [b.pop().url for _ in range(3)] == [held[0].url, held[1].url, "https://a.example/2"]
    with pytest.raises(FrontierClosed):
        a.pop()


def test_politeness_is_shared_by_clients(open_crawl):
    a, b = open_crawl(delay=0.3, per_host=1), open_crawl()
    assert b.delay == 0.3 and b.per_host == 1  # the crawl's settings
    a.push_many(Request(f"https://h.example/{i}") for i in range(3))
    first = a.pop()
    assert b.pop() is None  # per_host=1 across clients
    a.done(first)
    assert b.pop() is None  # the delay, across clients
    t0 = time.time()
    second = b.pop(timeout=5)
    assert second is not None and time.time() - t0 > 0.1
    c = open_crawl(per_host=0)  # 0: no limit, for everyone
    assert c.per_host is None and a.stats()["per_host"] is None


def test_changed_crawl_settings_apply_at_once_to_hosts_already_placed(open_crawl):
    first = open_crawl(delay=60.0, per_host=1)
    first.push_many(Request(f"https://h{i}.example/{k}") for i in range(3) for k in range(4))
    held = [first.pop() for _ in range(3)]
    assert len({r.slot for r in held}) == 3 and first.pop() is None  # each host waits a minute, one in flight
    wider = open_crawl(per_host=2)
    assert wider.pop() is None  # the delay still holds them
    faster = open_crawl(delay=0.0)  # a lowered delay wakes them now, not a minute later
    held += [faster.pop() for _ in range(3)]
    assert all(held) and faster.pop() is None  # two in flight each
    widest = open_crawl(per_host=3, ack="wait")  # a raised per_host frees them without waiting for a done
    held += [widest.pop() for _ in range(3)]
    assert all(held) and widest.pop() is None
    open_crawl(per_host=4)  # every host ready again, keyed by priority: LIFO puts h2's request first
    widest.done(next(r for r in widest.in_flight if r.slot == "h0.example"))
    idle = open_crawl(prefer="idle")  # keyed again by requests in flight: h0 has the fewest
    assert idle.pop().slot == "h0.example"


def test_close_gives_back_what_a_pop_under_way_in_another_thread_leases(open_crawl):
    import threading

    a = open_crawl(lease=300)
    a.push_many(Request(f"https://h{i}.example/") for i in range(5000))
    taken: list = []
    errors: list = []
    go = threading.Event()

    def popper():
        go.set()
        try:
            while True:
                got = a.pop_many(1)
                taken.extend(got)
                if not got:
                    return
        except FrontierClosed as exc:
            errors.append(exc)

    thread = threading.Thread(target=popper)
    thread.start()
    go.wait()
    while len(taken) < 50:
        time.sleep(0.001)
    a.close()
    thread.join(10)
    assert errors and 50 <= len(taken) < 5000
    b = open_crawl()
    assert b.stats()["in_flight"] == 0 and len(b) == 5000  # nothing left leased until its lease runs out


def test_settings_of_the_crawl_are_checked(open_crawl, redis_url, crawl_name):
    open_crawl(order="fifo")
    with pytest.raises(FrontierError, match="FIFO"):
        open_crawl(order="lifo")
    with pytest.raises(FrontierError, match="no crawl"):
        RedisFrontier(redis_url, crawl=crawl_name + "-missing", create=False)
    watcher = redis.Redis.from_url(redis_url)
    gc.collect()  # connections of objects earlier tests left to the collector close now, not during the count
    clients = len(watcher.client_list())
    failures = []  # their tracebacks keep the half-made objects alive: no garbage collector's help
    for _ in range(5):  # an open that fails leaves no connection behind
        with pytest.raises(FrontierError, match="FIFO") as failure:
            RedisFrontier(redis_url, crawl=crawl_name, order="lifo")
        failures.append(failure)
    assert len(watcher.client_list()) == clients
    watcher.close()
    with pytest.raises(ValueError):
        RedisFrontier(redis_url, crawl="bad{name}")
    with pytest.raises(ValueError):
        RedisFrontier(redis_url, crawl=crawl_name, lease=0)


def test_bad_input_and_foreign_keys_are_named(open_crawl, redis_server, crawl_name):
    f = open_crawl()
    with pytest.raises(FrontierError, match="cannot be stored"):
        f.push(Request("https://a.example/", meta={"x": object()}))
    with pytest.raises(ValueError):
        f.push(Request("https://a.example/"), not_before=math.nan)
    with pytest.raises(TypeError):
        f.push("https://a.example/")
    assert len(f) == 0
    f.push(Request("https://a.example/ok"))
    client = redis_server.client()
    key = f"df:{{{crawl_name}}}:req"
    (rid,) = client.hkeys(key)
    client.hset(key, rid, b"\x00\x00\x00\x00\x00\x00\x00garbage")
    with pytest.raises(FrontierError, match="does not hold a request"):
        f.pop()
    client.hset(f"df:{{{crawl_name}}}:meta", "v", "99")
    with pytest.raises(FrontierError, match="format 99"):
        open_crawl()
    client.delete(f"df:{{{crawl_name}}}:meta")
    with pytest.raises(FrontierError, match="gone"):
        f.push(Request("https://a.example/2"))


def test_a_forked_child_cannot_use_its_parents_frontier(open_crawl):
    f = open_crawl()
    f.push(Request("https://a.example/"))
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            f.pop()
            code = 1
        except FrontierError:
            code = 0
        f.close()  # does nothing in the child: the parent's leases stay the parent's
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert f.pop() is not None


def test_an_evicting_server_is_refused_and_aof_off_is_warned(tmp_path, caplog):
    server = RedisServer(str(tmp_path / "lru"), aof=False, extra=("--maxmemory-policy", "allkeys-lru"))
    server.start()
    try:
        with pytest.raises(RedisMisconfigured, match="allkeys-lru"):
            RedisFrontier(server.url, crawl="c")
        server.client().config_set("maxmemory-policy", "noeviction")
        with caplog.at_level(logging.WARNING, logger="diskfrontier"):
            RedisFrontier(server.url, crawl="c").close()
        assert "appendonly off" in caplog.text
    finally:
        server.stop()


def test_aof_off_is_warned_once_a_process_by_the_clients_that_may_make_a_crawl_and_never_by_reading_commands(
        tmp_path, caplog):
    server = RedisServer(str(tmp_path / "noaof"), aof=False)
    server.start()
    try:
        with caplog.at_level(logging.WARNING, logger="diskfrontier"):
            for _ in range(3):
                with RedisFrontier(server.url, crawl="c") as f:
                    f.push(Request("https://a.example/"))
        assert caplog.text.count("appendonly off") == 1, caplog.text

        def command(*args: str) -> subprocess.CompletedProcess[str]:
            done = subprocess.run([sys.executable, "-m", "diskfrontier", *args, server.url, "--crawl", "c"],
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            return done
        for args in (("clients",), ("inspect",), ("failed",), ("pause",), ("resume",), ("hosts",)):
            assert "appendonly" not in command(*args).stderr, args
        pushed = subprocess.run([sys.executable, "-m", "diskfrontier", "push", server.url, "--crawl", "c",
                                 "https://b.example/"], capture_output=True, text=True, timeout=120)
        assert pushed.returncode == 0 and pushed.stderr.count("appendonly off") == 1, pushed.stderr
    finally:
        server.stop()


def test_an_outage_raises_redis_unavailable_and_nothing_acknowledged_is_lost(tmp_path):
    server = RedisServer(str(tmp_path / "r"), aof=True, fsync="always")
    server.start()
    try:
        f = RedisFrontier(server.url, crawl="c", ack="wait")  # done() itself meets the outage
        f.push_many(Request(f"https://a.example/{i}") for i in range(10))
        held = f.pop()
        assert held is not None
        server.kill()
        for call in (lambda: f.push(Request("https://a.example/new")), f.pop, lambda: f.done(held), f.stats):
            with pytest.raises(RedisUnavailable, match="could not be reached"):
                call()
        server.start()
        f.done(held)  # the lease is still this client's
        assert len(f) == 9 and f.stats()["done"] == 1
        f.close()
    finally:
        server.stop()
    with pytest.raises(RedisUnavailable):
        RedisFrontier("redis://127.0.0.1:1/0", crawl="c")


@pytest.mark.parametrize("dedupe", ["exact", "hash"])
def test_pending_requests_and_seen_fingerprints_read_the_whole_crawl(open_crawl, dedupe):
    f = open_crawl(dedupe=dedupe)
    kept = (lambda fp: fp) if dedupe == "hash" else (lambda fp: reduced_fingerprint(key64(fp)))  # set64: 64 bits
    f.push_many(Request(f"https://a.example/{i}", priority=i) for i in range(5))
    custom = Request("https://a.example/custom", fingerprint=b"my-own-key")
    f.push(custom)
    f.done(f.pop())
    f.pop()  # leased
    assert len(list(f.pending_requests())) == 5 and len(list(f.pending_requests(leased=False))) == 4
    fingerprints = set(f.seen_fingerprints())
    assert len(fingerprints) == 6 and kept(b"my-own-key") in fingerprints
    assert kept(Request("https://a.example/3").fingerprint) in fingerprints
    assert f.mark_seen([Request("https://b.example/").fingerprint, b"my-own-key"]) == 1
    assert f.push(Request("https://b.example/")) is False
    assert f.drop_crawl() > 0
    with pytest.raises(FrontierClosed):
        f.pop()


def test_a_priority_changed_out_of_range_is_named(open_crawl):
    f = open_crawl()
    f.push(Request("https://a.example/"))
    r = f.pop()
    r.priority = 2**31
    with pytest.raises(ValueError, match="priority"):
        f.retry(r)
    r.priority = 0
    f.retry(r)  # still leased: nothing was changed by the refused call
    assert f.pop().attempts == 1
