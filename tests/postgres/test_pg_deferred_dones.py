"""What PostgreSQL adds to contract/test_deferred_dones.py: a pop and the done before it are one call of the
crawl's functions, and a done that the pop carrying it could not apply is counted, its request still leased."""

from __future__ import annotations

import threading
import time

import psycopg
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


def test_a_read_in_another_thread_waits_for_the_dones_a_pop_carries(open_crawl, postgres_url, crawl_name):
    f = open_crawl()
    f.push(Request("https://a.example/"))
    f.push(Request("https://b.example/"))
    first = f.pop()
    assert first is not None
    f.done(first)  # waits for the next step
    blocker = psycopg.connect(postgres_url)  # holds the done's host row: the pop carrying it waits there
    watcher = psycopg.connect(postgres_url, autocommit=True)  # each look a transaction of its own: a fresh view
    popped: list = []
    popper = threading.Thread(target=lambda: popped.append(f.pop()))
    try:
        blocker.execute(psycopg.sql.SQL("SELECT 1 FROM {}.hosts WHERE name = %s FOR UPDATE").format(
            psycopg.sql.Identifier(f"df_{crawl_name}")), (first.slot,))
        popper.start()
        deadline = time.monotonic() + 30
        while watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                              "query LIKE %s", ("%FROM pop(%",)).fetchall() == [(0,)]:
            assert time.monotonic() < deadline, "the pop never waited for the row"
            time.sleep(0.01)
        threading.Timer(0.3, blocker.rollback).start()  # let the pop go on a little later
        assert f.stats()["done"] == 1  # this thread's read: the done the other thread's pop carries is applied
    finally:
        blocker.rollback()  # (whatever happened above: the pop is not left waiting)
        popper.join(timeout=30)
        blocker.close()
        watcher.close()
    assert popped and popped[0] is not None
