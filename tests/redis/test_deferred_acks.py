"""A done that rides on the next step (``ack="deferred"``, the default): one round trip a pop and the done before
it; every other step, a read, the renewal thread and the close send the dones first; a lost lease is counted; a
process killed between a done and its next step loses no request and hands one out at most once more, after its
lease, and never to two live clients at once."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import redis

from diskfrontier import LeaseExpired, RedisFrontier, Request
from diskfrontier.redisfrontier.management import release

LEASE = 1.0


def evalsha_calls(url: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        stats = client.info("commandstats").get("cmdstat_evalsha", {})
        return int(stats.get("calls", 0))
    finally:
        client.close()


def test_a_pop_and_the_done_before_it_are_one_script_call(open_crawl, redis_url):
    f = open_crawl()
    f.push_many(Request(f"https://h{i % 3}.example/{i}") for i in range(20))
    first = f.pop()
    assert first is not None
    before = evalsha_calls(redis_url)
    request = first
    for _ in range(10):
        f.done(request)
        request = f.pop()
        assert request is not None
    assert evalsha_calls(redis_url) - before == 10  # ack="wait": 20 (a FINISH and a POP each)
    stats = f.stats()
    assert (stats["done"], stats["in_flight"], stats["acks_lost"]) == (10, 1, 0)


def test_every_read_and_every_other_step_sends_the_dones_first(open_crawl):
    f, other = open_crawl(), open_crawl()
    f.push_many(Request(f"https://a.example/{i}") for i in range(3))
    f.done(f.pop())
    assert f.stats()["done"] == 1  # a read of this client
    f.done(f.pop())
    f.push(Request("https://b.example/"))  # a step of this client (not a pop)
    assert other.stats()["done"] == 2
    r = f.pop()
    assert r is not None
    f.done(r)
    f.close()
    stats = other.stats()
    assert (stats["done"], stats["in_flight"], stats["pending"]) == (3, 0, 1)


def test_a_done_no_step_follows_is_sent_by_the_renewal_thread(open_crawl):
    f, other = open_crawl(), open_crawl()
    f.push(Request("https://a.example/"))
    r = f.pop()
    assert r is not None
    f.done(r)
    deadline = time.monotonic() + 30
    while other.stats()["done"] != 1:
        assert time.monotonic() < deadline, "the done was never sent"
        time.sleep(0.01)
    assert other.finished


def test_without_a_renewal_thread_or_with_ack_wait_a_done_is_applied_before_it_returns(open_crawl):
    other = open_crawl()
    for options in ({"renew": False}, {"ack": "wait"}):
        f = open_crawl(**options)
        f.push(Request(f"https://{len(options)}.example/{options}"))
        r = f.pop()
        assert r is not None
        done = other.stats()["done"]
        f.done(r)
        assert other.stats()["done"] == done + 1


def test_a_lease_lost_under_a_deferred_done_is_counted_and_changes_nothing(open_crawl, redis_url, crawl_name):
    worker, other = open_crawl(lease=30), open_crawl()
    worker.push(Request("https://a.example/"))
    held = worker.pop()
    assert held is not None
    assert release(redis_url, crawl_name, client=worker.client_id, force=True).released == 1
    taken = other.pop()
    assert taken is not None and taken.url == held.url
    worker.done(held)  # deferred: the loss is known when the next step reads the reply
    stats = worker.stats()
    assert (stats["acks_lost"], stats["acks_failed"], stats["done"], stats["in_flight"]) == (1, 0, 0, 1)
    other.done(taken)
    assert other.stats()["done"] == 1 and other.finished


def test_a_lease_a_renewal_found_lost_raises_at_once(open_crawl, redis_url, crawl_name):
    worker = open_crawl(lease=LEASE)
    worker.push(Request("https://a.example/"))
    held = worker.pop()
    assert held is not None
    release(redis_url, crawl_name, client=worker.client_id, force=True)
    deadline = time.monotonic() + 30
    while not worker._leases.is_lost(held):  # the renewal's next beat finds it lost
        assert time.monotonic() < deadline
        time.sleep(LEASE / 10)
    with pytest.raises(LeaseExpired):
        worker.done(held)


def test_two_threads_of_one_client_pop_and_finish_every_request_once(open_crawl):
    f = open_crawl()
    n = 300
    f.push_many(Request(f"https://h{i % 5}.example/{i}") for i in range(n))
    handed: list[Request] = []
    lock = threading.Condition()
    popped: list[str] = []
    errors: list[BaseException] = []

    def popper() -> None:
        try:
            while (r := f.pop()) is not None:
                popped.append(r.url)
                with lock:
                    handed.append(r)
                    lock.notify()
        except BaseException as exc:
            errors.append(exc)
        finally:
            with lock:
                handed.append(None)  # type: ignore[arg-type]
                lock.notify()

    def finisher() -> None:
        try:
            while True:
                with lock:
                    lock.wait_for(lambda: bool(handed))
                    r = handed.pop(0)
                if r is None:
                    return
                f.done(r)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=popper), threading.Thread(target=finisher)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    assert len(popped) == len(set(popped)) == n
    stats = f.stats()
    assert (stats["done"], stats["in_flight"], stats["pending"], stats["acks_lost"], stats["acks_failed"]) == (
        n, 0, 0, 0, 0)


CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from diskfrontier import RedisFrontier
    url, crawl, lease, kill_at = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    f = RedisFrontier(url, crawl=crawl, lease=lease)
    step = 0
    while (r := f.pop(timeout=None)) is not None:
        print("pop", r.url, time.time(), flush=True)
        step += 1
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # popped, not done
        f.done(r)
        print("done", r.url, time.time(), flush=True)
        step += 1
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # between a done that returned and the next step
    f.close()
""")


def start(url: str, crawl: str, kill_at: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, url, crawl, str(LEASE), str(kill_at)],
                            stdout=subprocess.PIPE, text=True)


def lines_of(out: str) -> list[tuple[str, str, float]]:
    return [(kind, url, float(at)) for kind, url, at in (line.split() for line in out.splitlines())]


@pytest.mark.slow
@pytest.mark.crash
def test_a_sigkill_between_done_and_the_next_step_loses_nothing_and_delivers_at_most_once_more(
        redis_url, crawl_name):
    rng = random.Random(35)
    n = 40
    for run in range(6):
        crawl = f"{crawl_name}-{run}"
        with RedisFrontier(redis_url, crawl=crawl) as seed:
            seed.push_many(Request(f"https://h{i % 4}.example/{i}") for i in range(n))
        kill_at = rng.randrange(2, 12)  # a step of the killed child's: a pop (odd) or a done (even)
        killed = start(redis_url, crawl, kill_at)
        assert killed.stdout is not None
        first = killed.stdout.readline()  # it has begun: the live one starts beside it
        live = start(redis_url, crawl, 0)
        out_killed = first + killed.stdout.read()  # (communicate() would pass over what readline() buffered)
        killed.wait(timeout=120)
        out_live, _ = live.communicate(timeout=120)
        assert killed.returncode == -signal.SIGKILL and live.returncode == 0
        dead, alive = lines_of(out_killed), lines_of(out_live)
        died_after = max(at for _kind, _url, at in dead)
        popped_dead = [url for kind, url, _at in dead if kind == "pop"]
        done_dead = [url for kind, url, _at in dead if kind == "done"]
        popped_live = {url: at for kind, url, at in alive if kind == "pop"}
        assert len(popped_live) == len([1 for kind, _u, _a in alive if kind == "pop"])  # none twice to one client
        # nothing lost: every request was popped and done by one of the two
        assert set(popped_dead) | set(popped_live) == {f"https://h{i % 4}.example/{i}" for i in range(n)}
        again = set(popped_dead) & set(popped_live)
        # handed out again only after the killed client's last step, so never to two live clients at once
        assert all(popped_live[url] > died_after for url in again), (run, again)
        # once more at most, and only what the kill cut short: the one in hand, or the last done not sent yet
        assert len(again) <= 1 and again <= {popped_dead[-1]}, (run, kill_at, again)
        assert len(set(done_dead) & again) <= 1
        with RedisFrontier(redis_url, crawl=crawl) as check:
            stats = check.stats()
            assert (stats["done"], stats["pending"], stats["in_flight"]) == (n, 0, 0), (run, stats)


@pytest.mark.parametrize("settings", [{"per_host": 1}, {"per_host": 2, "prefer": "idle"}])
def test_a_done_carried_by_a_pop_frees_its_host_for_that_pop(open_crawl, settings):
    f = open_crawl(**settings)
    f.push_many([Request("https://a.example/1"), Request("https://a.example/2"), Request("https://a.example/3"),
                 Request("https://b.example/1")])
    held = [f.pop() for _ in range(settings["per_host"] + 1)]  # a.example at its limit, then b.example
    assert all(held) and {r.slot for r in held if r is not None} == {"a.example", "b.example"}
    assert f.pop() is None  # a.example holds as many as it may
    first = next(r for r in held if r is not None and r.slot == "a.example")
    f.done(first)  # carried by the next pop, which sees a.example free again
    again = f.pop()
    assert again is not None and again.slot == "a.example"
    stats = f.stats()
    assert (stats["done"], stats["in_flight"]) == (1, len(held))
