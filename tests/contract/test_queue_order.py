"""Pushes, dedupe, priorities, LIFO/FIFO order, in-flight requests and reopening, on both backends."""

from __future__ import annotations

import threading

import pytest
from backends import assert_queue_order, drain
from reference import Reference

from diskfrontier import NotInFlight, Request
from diskfrontier.contract.values import SHARED_STATS


def test_push_dedupes_and_dont_filter_bypasses(frontier_factory):
    f = frontier_factory()
    assert f.push(Request("https://a.example/")) is True
    assert f.push(Request("https://a.example/")) is False
    assert f.push(Request("https://a.example/#frag")) is False  # the same canonical URL
    assert f.push(Request("https://a.example/", dont_filter=True)) is True
    f.close()
    f = frontier_factory()
    assert f.push(Request("https://a.example/")) is False  # remembered across a reopen
    assert len(f) == 2
    assert f.has_seen(Request("https://a.example/").fingerprint)
    assert not f.has_seen(Request("https://b.example/").fingerprint)


def test_push_many_counts_what_it_queued_and_mark_seen_what_was_new(frontier_factory):
    f = frontier_factory()
    assert f.push_many(Request(f"https://a.example/{i % 4}") for i in range(10)) == 4
    fresh, old = Request("https://b.example/"), Request("https://a.example/0")
    assert f.mark_seen([fresh.fingerprint, old.fingerprint]) == 1
    assert f.push(fresh) is False and len(f) == 4


def test_priority_then_lifo_order_across_hosts(frontier_factory):
    f = frontier_factory()
    priority = {f"https://h{i % 2}.example/{i}": i % 3 for i in range(9)}
    for url, p in priority.items():
        f.push(Request(url, priority=p))
    want = [f"https://h{int(n) % 2}.example/{n}" for n in ["8", "5", "2", "7", "4", "1", "6", "3", "0"]]
    assert_queue_order(frontier_factory.kind, [r.url for r in drain(f)], want, priority)


def test_fifo_order_is_fixed_when_made(frontier_factory):
    f = frontier_factory(order="fifo")
    f.push_many(Request(f"https://h{i % 3}.example/{i}") for i in range(6))
    f.close()
    f = frontier_factory()
    assert f.order == "fifo"
    want = [f"https://h{i % 3}.example/{i}" for i in range(6)]
    assert_queue_order(frontier_factory.kind, [r.url for r in drain(f)], want, dict.fromkeys(want, 0))


@pytest.mark.parametrize("order", ["lifo", "fifo"])
def test_the_order_is_the_reference_models(frontier_factory, order):
    f = frontier_factory(order=order)
    model = Reference(order)
    priorities = {}
    for i in range(30):
        url, priority = f"https://h{i % 4}.example/{i}", (i * 7) % 3 - 1
        priorities[url] = priority
        assert f.push(Request(url, priority=priority)) == model.push(url, priority)
    popped = [model.pop() for _ in range(30)]
    want = [url for url in popped if url is not None]
    assert len(want) == len(popped)  # the model had all 30
    assert_queue_order(frontier_factory.kind, [r.url for r in drain(f)], want, priorities)


def test_done_is_final_and_what_is_held_at_close_comes_back(frontier_factory):
    f = frontier_factory()
    f.push_many(Request(f"https://a.example/{i}") for i in range(3))
    first = f.pop()
    assert f.holds(first) and first in f.in_flight
    f.done(first)
    assert not f.holds(first)
    with pytest.raises(NotInFlight):
        f.done(first)
    held = f.pop()
    assert len(f) == 1
    f.close()
    f = frontier_factory()
    assert len(f) == 2
    urls = {r.url for r in drain(f)}
    assert held.url in urls and first.url not in urls and f.finished


def test_done_many_finishes_them_all(frontier_factory):
    f = frontier_factory()
    f.push_many(Request(f"https://a.example/{i}") for i in range(5))
    taken = [f.pop() for _ in range(5)]
    f.done_many(taken)
    assert f.finished and len(f) == 0 and f.pop() is None


def test_a_request_round_trips_with_every_field(frontier_factory):
    f = frontier_factory()
    sent = Request("https://a.example/api?q=1", method="POST", headers={"X-A": "1", "Accept": ["a", "b"]},
                   body=b"\x00\xffdata", priority=-7, meta={"depth": 2, "tags": ["x"], "blob": b"\x01"},
                   slot="pool-1")
    f.push(sent)
    f.close()
    got = frontier_factory().pop()
    assert got.to_dict() == sent.to_dict()
    assert got.fingerprint == sent.fingerprint and got.slot == "pool-1" and got.attempts == 0


def test_stats_have_the_shared_keys_and_count_alike(frontier_factory):
    f = frontier_factory()
    f.push_many(Request(f"https://a.example/{i}") for i in range(5))
    f.push(Request("https://a.example/0"))
    f.done(f.pop())
    f.retry(f.pop())
    f.fail(f.pop(), "gone")
    f.pop()
    stats = f.stats()
    assert set(SHARED_STATS) <= set(stats)
    counts = {key: stats[key] for key in ("pending", "in_flight", "seen", "hosts", "order", "pushed",
                                          "duplicates", "retried", "failed", "delayed", "done")}
    assert counts == {"pending": 2, "in_flight": 1, "seen": 5, "hosts": 1, "order": "lifo", "pushed": 5,
                      "duplicates": 1, "retried": 1, "failed": 1, "delayed": 0, "done": 1}


def test_threads_share_one_frontier_and_nothing_is_handed_out_twice(frontier_factory):
    f = frontier_factory()
    f.push_many(Request(f"https://h{i % 7}.example/{i}") for i in range(600))
    seen: list[str] = []
    lock = threading.Lock()

    def work():
        while (r := f.pop()) is not None:
            with lock:
                seen.append(r.url)
            f.done(r)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 600 and len(set(seen)) == 600 and f.finished
