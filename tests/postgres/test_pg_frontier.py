"""The PostgreSQL backend's own promises: a crawl reopened keeps everything, clients share one crawl (nothing
handed to two of them, a host's delay held across them), leases run out and are taken back, a later format is
refused, a crawl's functions are brought up to date at open, and rows changed from outside are named."""

from __future__ import annotations

import math
import threading
import time

import pytest
from popkit import take

from diskfrontier import (
    CrawlDamaged,
    FormatError,
    FrontierError,
    LeaseExpired,
    PostgresFrontier,
    PostgresUnavailable,
    Request,
)
from diskfrontier.contract.values import RobotsEntry


def urls(host: str, n: int) -> list[Request]:
    return [Request(f"https://{host}/p/{i}") for i in range(n)]


def test_a_crawl_reopened_keeps_its_requests_hosts_settings_and_counters(open_crawl):
    first = open_crawl(order="fifo", delay=0.0)
    assert first.made
    first.push_many(urls("a.example", 5) + urls("b.example", 3))
    done, retried, failed, held = first.pop(), first.pop(), first.pop(), first.pop()
    first.done(done)
    first.retry(retried, delay=3600)
    first.fail(failed, "HTTP 500")
    first.set_delay("b.example", 2.5)
    first.block("c.example", math.inf)
    first.set_robots("a.example", RobotsEntry(200, b"User-agent: *\n", 1_700_000_000.0))
    first.pause()
    paused = first.paused_since
    first.close()
    again = open_crawl()
    assert not again.made and again.order == "fifo"
    stats = again.stats()
    assert (stats["pending"], stats["in_flight"], stats["delayed"], stats["done"], stats["failed"]) == (6, 0, 1, 1, 1)
    assert (stats["pushed"], stats["retried"], stats["seen"]) == (8, 1, 8)
    assert again.paused_since == paused and again.pop() is None
    again.resume()
    # given back at the close at a new place, after those pushed before it (FIFO); b.example's delay holds b/1
    assert [r.url for r in again.pop_many(10)] == ["https://a.example/p/4", "https://b.example/p/0", held.url]
    assert again.host("b.example").delay == 2.5 and again.host("c.example").blocked_until == math.inf
    assert again.robots("a.example") == RobotsEntry(200, b"User-agent: *\n", 1_700_000_000.0)
    assert [f.request.url for f in again.failed()] == [failed.url]


def test_two_clients_on_one_crawl_never_get_the_same_request(open_crawl):
    a, b = open_crawl(), open_crawl()
    a.push_many(Request(f"https://h{i % 9}.example/{i}") for i in range(400))
    got: dict[str, list[str]] = {"a": [], "b": []}

    def work(name: str, frontier: PostgresFrontier) -> None:
        while (request := frontier.pop(timeout=1.0)) is not None:
            got[name].append(request.url)
            frontier.done(request)

    threads = [threading.Thread(target=work, args=(name, f)) for name, f in (("a", a), ("b", b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    both = got["a"] + got["b"]
    assert len(both) == 400 and len(set(both)) == 400
    assert got["a"] and got["b"]  # both worked
    assert a.finished and b.stats()["done"] == 400


def test_a_hosts_delay_holds_across_clients(open_crawl):
    b = open_crawl()  # opened before the delay was set
    a = open_crawl(delay=0.3)
    assert b.stats()["delay"] == 0.3 and open_crawl().delay == 0.3  # a crawl setting: every client's
    a.push_many(urls("slow.example", 3))
    started = time.time()
    first = a.pop()
    assert first is not None and b.pop() is None  # the host is not ready for the other client either
    second = b.pop(timeout=10)
    assert second is not None and time.time() - started >= 0.3 - 0.02
    assert b.host("slow.example").in_flight == 2


def test_a_lease_that_runs_out_is_taken_back_and_the_late_done_refused(open_crawl):
    a = open_crawl(lease=0.5, renew=False)
    b = open_crawl(lease=5.0)
    a.push(Request("https://a.example/x"))
    held = a.pop()
    assert b.pop() is None
    again = b.pop(timeout=10)
    assert again is not None and again.url == held.url
    with pytest.raises(LeaseExpired):
        a.done(held)
    b.done(again)
    stats = b.stats()
    assert stats["reclaimed"] == 1 and stats["done"] == 1 and b.finished


def test_renewed_leases_outlive_their_length(open_crawl):
    a = open_crawl(lease=0.6)
    b = open_crawl()
    a.push(Request("https://a.example/x"))
    held = a.pop()
    time.sleep(1.5)  # more than two leases: the renewal thread kept it
    assert b.pop() is None
    a.done(held)
    assert b.stats()["reclaimed"] == 0


def test_a_crawl_of_a_later_format_is_refused_by_name(open_crawl, sql):
    open_crawl().close()
    sql("UPDATE meta SET value = '99' WHERE name = 'format'")
    with pytest.raises(FormatError, match=r"format 99.*reads up to format 2: upgrade diskfrontier"):
        open_crawl()


def test_a_crawl_of_format_1_is_brought_to_format_2_at_open_with_its_counts(open_crawl, sql):
    f = open_crawl()
    f.push_many(Request(f"https://a.example/{i}") for i in range(3))
    f.done(f.pop())
    f.close()
    # format 1's counters: one row a counter and part, added to in place under this key
    sql("SELECT fold_counters()")
    sql("ALTER TABLE counters ADD PRIMARY KEY (name, part)")
    sql("UPDATE meta SET value = '1' WHERE name = 'format'")
    sql("UPDATE meta SET value = '\"older\"' WHERE name = 'code'")
    f = open_crawl()
    assert sql("SELECT value FROM meta WHERE name = 'format'") == [(2,)]
    assert sql("SELECT count(*) FROM pg_constraint WHERE conrelid = 'counters'::regclass") == [(0,)]
    f.done(f.pop())
    f.done(f.pop())
    stats = f.stats()
    assert (stats["pushed"], stats["done"], stats["seen"]) == (3, 3, 3)


def test_an_open_installs_this_versions_functions_once(open_crawl, sql):
    from diskfrontier.pgfrontier import sql as scripts

    open_crawl().close()
    sql("UPDATE meta SET value = '\"older\"' WHERE name = 'code'")
    sql("DROP FUNCTION stats()")  # what an older version may have lacked
    f = open_crawl()
    assert sql("SELECT value FROM meta WHERE name = 'code'") == [(scripts.code_version(),)]
    assert f.stats()["pending"] == 0


def test_a_damaged_record_is_named_with_its_table_and_row(open_crawl, sql):
    f = open_crawl()
    f.push(Request("https://a.example/x"))
    [(row,)] = sql("SELECT id FROM requests")
    sql("UPDATE requests SET record = '\\xc1'::bytea")  # 0xc1: never used by msgpack
    with pytest.raises(CrawlDamaged, match=rf"leases row {row}: does not hold a request diskfrontier stored"):
        f.pop()


def test_counts_that_disagree_with_the_rows_are_named(open_crawl, sql):
    f = open_crawl()
    f.push(Request("https://a.example/x"))
    sql("DELETE FROM requests")  # the hosts row still counts it
    with pytest.raises(CrawlDamaged, match=r"hosts row a\.example counts ready requests"):
        f.pop()


def test_a_missing_crawl_a_bad_name_and_an_unreachable_server_are_named(postgres_url, crawl_name):
    with pytest.raises(FrontierError, match="there is no crawl"):
        PostgresFrontier(postgres_url, crawl=crawl_name, create=False)
    with pytest.raises(ValueError, match="crawl must be"):
        PostgresFrontier(postgres_url, crawl="no spaces")
    with pytest.raises(ValueError, match="ack must be 'deferred' or 'wait', got 'pipelined'"):
        PostgresFrontier(postgres_url, crawl=crawl_name, ack="pipelined")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    started = time.monotonic()
    with pytest.raises(PostgresUnavailable, match=r"cannot be reached.*Connection refused"):
        PostgresFrontier(f"postgresql://nobody@127.0.0.1:{port}/none", crawl=crawl_name)
    with pytest.raises(PostgresUnavailable, match='invalid integer value "notaport"'):
        PostgresFrontier("postgresql://nobody@127.0.0.1:notaport/none", crawl=crawl_name)
    assert time.monotonic() - started < 5  # told at once, not after the pool's wait for a connection


def test_drop_by_host_and_by_match_and_drop_crawl(open_crawl, postgres_url, crawl_name):
    f = open_crawl()
    f.push_many(urls("a.example", 4) + urls("b.example", 4))
    f.push(Request("https://b.example/later"), not_before=time.time() + 3600)
    assert f.drop(host="a.example", dry_run=True).count == 4 and len(f) == 9
    assert f.drop(host="a.example").count == 4
    dropped = f.drop(match=r"/p/[12]$|later", show=5)
    assert dropped.count == 3 and sorted(dropped.urls) == ["https://b.example/later", "https://b.example/p/1",
                                                          "https://b.example/p/2"]
    assert sorted(r.url for r in f.pending_requests()) == ["https://b.example/p/0", "https://b.example/p/3"]
    assert f.stats()["dropped"] == 7 and f.push(Request("https://a.example/p/0")) is False  # still seen
    assert f.drop_crawl() > 5
    with pytest.raises(FrontierError, match="there is no crawl"):
        PostgresFrontier(postgres_url, crawl=crawl_name, create=False)


def test_a_postgresql_url_opens_as_a_frontier_and_as_a_view(postgres_url, crawl_name):
    from diskfrontier.access.targets import open_target, open_view

    with open_target(postgres_url, crawl_name, lease=60.0, order="fifo") as shared:
        assert isinstance(shared, PostgresFrontier) and shared.lease == 60.0
        shared.push_many(urls("a.example", 3))
        shared.fail(take(shared), "gone")
        held = take(shared)
        shared.set_delay("a.example", 4.0)
        with open_view(postgres_url, crawl_name) as view:
            assert view.order == "fifo" and view.pending_count() == 2  # the leased one read as pending
            assert sorted(r.url for r in view.pending_requests()) == [held.url, "https://a.example/p/2"]
            assert [f.error for f in view.failed()] == ["gone"] and view.seen_estimate() == 3
            [row] = view.host_rows()
            assert (row.host, row.pending, row.in_flight, row.done, row.delay) == ("a.example", 1, 1, 1, 4.0)
        with open_view(postgres_url, crawl_name, pop_order=True) as view:
            assert [r.url for r in view.pending_requests()] == ["https://a.example/p/2"]  # not the leased one
    with pytest.raises(ValueError, match="PostgreSQL URL names a server"):
        open_target(postgres_url)


def test_verify_finds_a_busy_crawl_sound_and_names_each_row_that_disagrees(open_crawl, sql, postgres_url,
                                                                          crawl_name):
    from diskfrontier.pgfrontier.verify import verify_crawl

    f = open_crawl(order="fifo")
    f.push_many(urls("a.example", 4) + urls("b.example", 2))
    f.push(Request("https://b.example/later"), not_before=time.time() + 3600)
    f.fail(f.pop(), "gone")
    f.retry(f.pop(), delay=3600)
    f.pop()  # leased
    report = verify_crawl(postgres_url, crawl_name)
    assert report.sound, report.findings
    assert report.rows == 7
    sql("UPDATE hosts SET ready_n = ready_n + 2 WHERE name = 'b.example'")
    [(row,)] = sql("SELECT id FROM requests WHERE host = (SELECT id FROM hosts WHERE name = 'a.example') "
                   "ORDER BY id LIMIT 1")
    sql("UPDATE requests SET record = '\\xc1'::bytea WHERE id = %s", (row,))
    found = dict(verify_crawl(postgres_url, crawl_name).findings)
    assert found["hosts row b.example ready_n"] == "is 4, and its rows are 2"
    assert found[f"requests row {row}"].startswith("does not hold a request diskfrontier stored")
    assert len(found) == 2


def test_a_call_racing_the_close_is_told_the_frontier_was_closed(open_crawl):
    from diskfrontier import FrontierClosed

    f = open_crawl()
    f.push(Request("https://a.example/"))
    f._shared.db.close()  # the pool closed under a call that passed the frontier's own check
    started = time.monotonic()
    with pytest.raises(FrontierClosed, match="was closed meanwhile"):
        f.stats()
    assert time.monotonic() - started < 5  # not tried again as a lost connection would be
