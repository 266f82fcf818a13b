"""Slots, per-host limits, delays, blocks, budgets and the host list, on both backends."""

from __future__ import annotations

import math
import time

import pytest
from backends import drain, urls

from diskfrontier import Request


def test_the_slot_is_the_host_unless_given_and_is_kept(frontier_factory):
    pushed = [Request("https://User:pw@Shop.Example:8443/a?x=1"), Request("http://[::1]:8080/b"),
              Request("https://cdn.example/c", slot="shop-group")]
    f = frontier_factory()
    f.push_many(pushed)
    assert sorted(h.host for h in f.hosts()) == ["::1", "shop-group", "shop.example"]
    f.close()
    slots = {r.url: r.slot for r in drain(frontier_factory())}
    assert slots == {pushed[0].url: "shop.example", pushed[1].url: "::1", pushed[2].url: "shop-group"}


def test_per_host_hands_out_one_request_per_host_until_it_is_done(frontier_factory):
    f = frontier_factory(per_host=1)
    for host in ("a.example", "b.example", "c.example"):
        f.push_many(urls(host, 5))
    first = [f.pop() for _ in range(3)]
    assert sorted(r.slot for r in first) == ["a.example", "b.example", "c.example"]
    assert f.pop() is None
    f.done(first[0])
    assert f.pop().slot == first[0].slot


def test_next_ready_while_only_per_host_holds_requests_back_is_not_now(frontier_factory):
    """Nothing can be handed out while the one request in flight holds its host back: a job directory says
    None (only a done or a close frees it); Redis says when that request's lease runs out (the request then
    comes back by waiting alone), never "now"."""
    f = frontier_factory(per_host=1)
    f.push_many(urls("a.example", 2))
    held = f.pop()
    before = time.time()
    assert f.pop() is None
    when = f.next_ready()
    if frontier_factory.kind == "jobdir":
        assert when is None
    else:
        assert when is not None and when >= before + 0.9 * f.lease
    f.done(held)
    assert f.next_ready() is not None and f.next_ready() <= time.time() + 0.5


def test_per_host_and_delay_hold_for_every_host(frontier_factory):
    f = frontier_factory(per_host=1, delay=0.2)
    f.push_many(Request(f"https://h{i % 2}.example/{i}") for i in range(4))
    a, b = f.pop(), f.pop()
    assert {a.slot, b.slot} == {"h0.example", "h1.example"}
    assert f.pop() is None  # one in flight per host
    f.done(a)
    assert f.pop() is None  # its delay has not passed
    c = f.pop(timeout=5)
    assert c.slot == a.slot


def test_priority_wins_among_ready_hosts(frontier_factory):
    f = frontier_factory(per_host=1)
    f.push(Request("https://a.example/low", priority=0))
    f.push(Request("https://b.example/high", priority=5))
    f.push(Request("https://b.example/high2", priority=5))
    assert f.pop().url == "https://b.example/high2"  # LIFO within a host and priority
    assert f.pop().url == "https://a.example/low"  # b is busy: the best of the ready hosts


@pytest.mark.parametrize(("order", "want"), [("lifo", [2, 1, 0]), ("fifo", [0, 1, 2])])
def test_within_a_host_order_is_priority_then_lifo_or_fifo(frontier_factory, order, want):
    f = frontier_factory(order=order, per_host=1)
    f.push_many(urls("a.example", 3))
    f.push(Request("https://a.example/top", priority=1))
    got = [r.url for r in drain(f)]
    assert got == ["https://a.example/top"] + [f"https://a.example/p/{i}" for i in want]


def test_block_unblock_and_budget(frontier_factory):
    f = frontier_factory()
    f.push_many(Request(f"https://a.example/{i}") for i in range(3))
    f.push(Request("https://b.example/0"))
    f.block("a.example", math.inf)
    f.set_budget("b.example", 0)
    assert f.pop() is None and f.next_ready() is None
    assert f.pop(timeout=None) is None  # nothing could become ready by waiting
    f.close()
    f = frontier_factory()  # the settings are kept
    assert f.pop() is None
    f.unblock("a.example")
    f.set_budget("a.example", 2)
    got = [f.pop(), f.pop(), f.pop()]
    assert [r is not None for r in got] == [True, True, False]
    info = {h.host: h for h in f.hosts()}
    assert info["a.example"].budget == 2 and info["a.example"].in_flight == 2 and info["a.example"].pending == 1
    assert info["b.example"].budget == 0 and info["b.example"].pending == 1
    f.set_delay("a.example", 5.0)
    assert {h.host: h for h in f.hosts()}["a.example"].delay == 5.0


def test_a_block_until_a_time_ends_by_itself(frontier_factory):
    f = frontier_factory()
    f.push(Request("https://a.example/"))
    f.block("a.example", time.time() + 0.3)
    assert f.pop() is None and f.host("a.example").blocked_until is not None
    assert f.pop(timeout=5) is not None


def test_a_budget_counts_done_requests_across_reopens(frontier_factory):
    f = frontier_factory()
    f.push_many(urls("a.example", 5))
    f.set_budget("a.example", 3)
    for _ in range(2):
        f.done(f.pop())
    f.close()
    f = frontier_factory()
    assert f.hosts()[0].done == 2
    request = f.pop()
    assert request is not None and f.pop() is None
    f.retry(request)  # a retry does not use the budget up
    f.done(f.pop())
    assert f.pop() is None and len(f) == 2


def test_a_delay_set_after_a_hand_out_counts_from_it(frontier_factory):
    f = frontier_factory()
    f.push_many(Request(f"https://a.example/{i}") for i in range(2))
    handed = time.time()
    first = f.pop()
    f.set_delay("a.example", 30.0)  # a Crawl-delay read from the first response
    f.done(first)
    assert f.pop() is None and handed + 29 < f.next_ready() < time.time() + 31
    f.set_delay("a.example", 0.0)  # a lowered delay frees the host at once
    assert f.pop() is not None


def test_a_host_without_a_delay_is_ready_at_once_after_a_hand_out(frontier_factory):
    f = frontier_factory()
    f.push_many([Request("https://a.example/1"), Request("https://a.example/2")])
    f.done(f.pop())
    assert f.host("a.example").ready_at == 0.0  # ready: no time to wait for


def test_a_request_waiting_for_a_time_on_a_host_held_for_ever_is_not_waited_for(frontier_factory):
    due = 60.0  # seconds until both are due: a pop that waited for them would take that long
    f = frontier_factory()
    f.push(Request("https://blocked.example/0"), not_before=time.time() + due)
    f.push(Request("https://spent.example/0"), not_before=time.time() + due)
    f.block("blocked.example", math.inf)
    f.set_budget("spent.example", 0)
    assert f.next_ready() is None
    started = time.monotonic()
    assert f.pop(timeout=None) is None and time.monotonic() - started < due / 2  # at once, not when due
    f.push(Request("https://free.example/0"), not_before=time.time() + 20 * due)
    assert f.next_ready() > time.time() + 10 * due


def test_hosts_count_pending_in_flight_and_done(frontier_factory):
    f = frontier_factory()
    f.push_many(Request(f"https://h{i % 2}.example/{i}") for i in range(5))
    f.done(f.pop())
    held = f.pop()
    info = {h.host: (h.pending, h.in_flight, h.done) for h in f.hosts()}
    assert sum(p for p, _, _ in info.values()) == 3
    assert sum(i for _, i, _ in info.values()) == 1 and sum(d for _, _, d in info.values()) == 1
    assert info[held.slot][1] == 1
    for host in f.hosts():  # one host found alone is the host in the list
        assert f.host(host.host) == host
    assert f.host("never.example") is None
    f.set_budget("never.example", 3)  # a setting alone makes a host worth showing
    assert f.host("never.example").budget == 3 and f.host("never.example").pending == 0
    with pytest.raises(ValueError):
        f.host("")


@pytest.mark.parametrize("call", ["set_delay", "block", "set_budget", "unblock", "host"])
def test_a_bad_host_name_is_refused(frontier_factory, call):
    f = frontier_factory()
    args = {"set_delay": (1.0,), "block": (time.time() + 1,), "set_budget": (1,), "unblock": (), "host": ()}[call]
    with pytest.raises((TypeError, ValueError)):
        getattr(f, call)(None, *args)
