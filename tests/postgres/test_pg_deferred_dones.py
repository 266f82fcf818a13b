"""What PostgreSQL adds to contract/test_deferred_dones.py: a pop and the done before it are one call of the
crawl's functions, and a done that the pop carrying it could not apply is counted, its request still leased."""

from __future__ import annotations

import threading

import pytest

from diskfrontier import FrontierError, Request


def count_calls(frontier) -> list[str]:
    """The calls this thread makes from now on (each one step: a function of the crawl, one transaction)."""
    made: list[str] = []
    db = frontier._shared.db
    call, me = db.call, threading.get_ident()

    def counted(what, step, **options):
        if threading.get_ident() == me:
            made.append(what)
        return call(what, step, **options)

    db.call = counted
    return made


def test_a_pop_and_the_done_before_it_are_one_call(open_crawl):
    f = open_crawl()
    f.push_many(Request(f"https://h{i % 3}.example/{i}") for i in range(20))
    request = f.pop()
    made = count_calls(f)
    for _ in range(10):
        f.done(request)
        request = f.pop()
        assert request is not None
    assert made == ["pop"] * 10  # ack="wait": a "done" before each
    stats = f.stats()
    assert (stats["done"], stats["in_flight"], stats["acks_lost"]) == (10, 1, 0)


def test_a_done_whose_pop_failed_is_counted_and_its_request_comes_back(open_crawl, sql):
    f = open_crawl(lease=1.0)
    f.push_many(Request(f"https://a.example/{i}") for i in range(2))
    held = f.pop()
    assert held is not None
    sql("ALTER FUNCTION pop RENAME TO pop_gone")  # the next pop, carrying the done, fails
    f.done(held)
    with pytest.raises(FrontierError, match="lost its functions"):
        f.pop()
    sql("ALTER FUNCTION pop_gone RENAME TO pop")
    stats = f.stats()
    assert (stats["acks_failed"], stats["done"], stats["in_flight"]) == (1, 0, 1)
    other = f.pop()
    assert other is not None and other.url != held.url
    f.done(other)
    again = f.pop(timeout=30)  # its lease runs out (nothing renews a lease handed in): it comes back
    assert again is not None and again.url == held.url
    f.done(again)
    assert f.stats()["reclaimed"] == 1 and f.finished
