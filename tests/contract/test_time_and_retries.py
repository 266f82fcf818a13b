"""Retries, delays, not_before, re-fetches and pop(timeout) wake-ups, on both backends.

Redis measures time on its server's clock: the bounds below leave it a few hundredths of a second.
"""

from __future__ import annotations

import math
import threading
import time

import pytest

from diskfrontier import NotInFlight, Request


def test_retry_counts_attempts_and_waits_its_delay(frontier_factory):
    f = frontier_factory()
    f.push(Request("https://a.example/x"))
    r = f.pop()
    before = time.time()
    f.retry(r, delay=0.4)
    assert f.pop() is None and len(f) == 1 and not f.finished
    again = f.pop(timeout=10)
    assert again is not None and time.time() - before >= 0.35  # the server's clock may differ by a little
    assert again.url == r.url and again.attempts == 1
    f.retry(again)
    third = f.pop()
    assert third.attempts == 2
    f.done(third, refetch_after=3600)
    assert len(f) == 1 and f.pop() is None
    f.close()
    f = frontier_factory()
    assert f.pop() is None and f.next_ready() is not None and f.next_ready() > time.time() + 3000


def test_retry_gives_the_request_back_with_one_more_attempt_and_its_changes(frontier_factory):
    f = frontier_factory()
    f.push(Request("https://a.example/", meta={"k": 1}))
    first = f.pop()
    first.meta["k"] = 2
    f.retry(first, delay=0.2)
    assert first.attempts == 1 and f.pop() is None and len(f) == 1
    with pytest.raises(NotInFlight):
        f.done(first)  # it was given back
    second = f.pop(timeout=5)
    assert second.attempts == 1 and second.meta == {"k": 2}
    f.retry(second)
    assert f.pop() is not None
    f.close()
    assert frontier_factory().pop().attempts == 2  # the in-flight one came back with its count


def test_not_before_holds_a_request_back(frontier_factory):
    f = frontier_factory()
    due = time.time() + 0.3
    f.push(Request("https://a.example/later"), not_before=due)
    f.push(Request("https://a.example/now"))
    assert f.pop().url.endswith("/now")
    assert f.pop() is None and not f.finished
    assert 0 < f.next_ready() - time.time() <= 0.35
    later = f.pop(timeout=5)
    assert later.url.endswith("/later") and time.time() >= due - 0.05
    assert later.not_before == pytest.approx(due)


def test_done_with_refetch_brings_the_request_back_later_with_attempts_from_zero(frontier_factory):
    f = frontier_factory()
    f.push(Request("https://a.example/feed"))
    request = f.pop()
    f.retry(request)
    request = f.pop()
    assert request.attempts == 1
    f.done(request, refetch_after=0.2)
    assert f.pop() is None and len(f) == 1 and not f.finished
    again = f.pop(timeout=5)
    assert again.url == "https://a.example/feed" and again.attempts == 0
    assert f.hosts()[0].done == 1
    f.done(again)
    assert f.finished and f.hosts()[0].done == 2


def test_a_waiting_pop_wakes_on_a_push_and_on_a_retry(frontier_factory):
    f = frontier_factory()
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(f.pop(timeout=30)))
    waiter.start()
    time.sleep(0.05)
    f.push(Request("https://a.example/1"))
    waiter.join(30)
    assert got[0].url == "https://a.example/1"
    waiter = threading.Thread(target=lambda: got.append(f.pop(timeout=30)))
    waiter.start()
    time.sleep(0.05)
    f.retry(got[0])
    waiter.join(30)
    assert got[1].url == "https://a.example/1" and got[1].attempts == 1


def test_pop_none_returns_once_the_crawl_is_finished(frontier_factory):
    f = frontier_factory()
    f.push(Request("https://a.example/"))
    held = f.pop()
    got = []
    waiter = threading.Thread(target=lambda: got.append(f.pop(timeout=None)))
    waiter.start()
    time.sleep(0.1)
    assert waiter.is_alive()  # nothing pending, one in flight: the crawl is not finished
    f.done(held)
    waiter.join(10)
    assert not waiter.is_alive() and got == [None] and f.finished


def test_pop_timeout_returns_none_when_nothing_becomes_ready(frontier_factory):
    f = frontier_factory()
    f.push(Request("https://a.example/"), not_before=time.time() + 60)
    started = time.monotonic()
    assert f.pop(timeout=0.1) is None
    assert time.monotonic() - started >= 0.1


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf, "1", True])
def test_bad_times_are_refused_and_leave_the_request_in_flight(frontier_factory, bad):
    f = frontier_factory()
    f.push(Request("https://a.example/"))
    request = f.pop()
    with pytest.raises(ValueError):
        f.retry(request, delay=bad)
    with pytest.raises(ValueError):
        f.done(request, refetch_after=bad)
    with pytest.raises(ValueError):
        f.pop(timeout=bad)
    with pytest.raises(ValueError):
        f.push(Request("https://a.example/2"), not_before=bad)
    f.done(request)  # still in flight after the refusals
