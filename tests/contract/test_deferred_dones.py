"""A done that rides on the next step (``ack="deferred"``, the default of both server backends): one round trip
a pop and the done before it; every other step, a read, the renewal thread and the close send the dones first;
a lost lease is counted; a process killed between a done and its next step loses no request and hands one out
at most once more, after its lease, and never to two live clients at once."""

from __future__ import annotations

import threading
import time

import pytest
from backends import make_factory
from deferredkit import done_frees_its_host, run_kills

from diskfrontier import Request
from diskfrontier.access.servers import release_leases
from diskfrontier.access.targets import open_target

SERVERS = ("redis", "postgres")


@pytest.fixture(params=SERVERS)
def open_crawl(request, tmp_path, crawl_name):
    factory = make_factory(request.param, tmp_path, request, crawl_name)
    yield factory
    factory.close_all()


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
    assert not f.holds(r)
    deadline = time.monotonic() + 30
    while other.stats()["done"] != 1:
        assert time.monotonic() < deadline, "the done was never sent"
        time.sleep(0.01)
    assert other.finished


def test_leases_are_renewed_while_dones_come_all_the_time(open_crawl):
    lease = 1.5
    f = open_crawl(lease=lease)
    f.push(Request("https://held.example/"))
    held = f.pop()
    assert held is not None
    pushed = 0
    ends = time.monotonic() + 3 * lease  # a done every few milliseconds, for three leases
    while time.monotonic() < ends:
        r = f.pop()
        if r is None or r.url == held.url:
            assert r is None, "the request held was handed out again: its lease was not renewed"
            f.push_many(Request(f"https://h{i % 7}.example/{pushed + i}") for i in range(200))
            pushed += 200
            continue
        f.done(r)
    stats = f.stats()
    assert (stats["reclaimed"], stats["acks_lost"]) == (0, 0)
    assert f.holds(held)
    f.done(held)


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


def test_a_lease_lost_under_a_deferred_done_is_counted_and_changes_nothing(open_crawl):
    worker, other = open_crawl(lease=30), open_crawl()
    worker.push(Request("https://a.example/"))
    held = worker.pop()
    assert held is not None
    assert release_leases(open_crawl.url, open_crawl.crawl, client=worker.client_id, force=True).released == 1
    taken = other.pop()
    assert taken is not None and taken.url == held.url
    worker.done(held)  # deferred: the loss is known when the next step reads the answer
    stats = worker.stats()
    assert (stats["acks_lost"], stats["acks_failed"], stats["done"], stats["in_flight"]) == (1, 0, 0, 1)
    other.done(taken)
    assert other.stats()["done"] == 1 and other.finished


def test_two_threads_of_one_client_pop_and_finish_every_request_once(open_crawl):
    f = open_crawl()
    n = 300
    f.push_many(Request(f"https://h{i % 5}.example/{i}") for i in range(n))
    handed: list[Request | None] = []
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
                handed.append(None)
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


def test_a_done_carried_by_a_pop_frees_its_host_for_that_pop(open_crawl):
    done_frees_its_host(open_crawl(per_host=1), 1)


@pytest.mark.slow
@pytest.mark.crash
def test_a_sigkill_between_done_and_the_next_step_loses_nothing_and_delivers_at_most_once_more(open_crawl):
    run_kills(open_crawl.kind, open_crawl.url, open_crawl.crawl,
              lambda crawl: open_target(open_crawl.url, crawl))
