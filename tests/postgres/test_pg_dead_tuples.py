"""A long transaction holds vacuum back: the rows pops and dones remove or change stay in the tables and their
indexes, dead, until the oldest snapshot ends, and an index read from its front walks all of them at every pop
(the loss of SKIP LOCKED queues under a held horizon). A pop here reads a host's queue from the host's best
request and the next best from below the one it took, and looks for a host from where its client's last pop
took one: the index entries a pop reads stay a few however many dead ones lie in front of them. The counters
take a row a step and change none, so that no step walks a counter's older versions."""

from __future__ import annotations

import time

import psycopg
import pytest

from diskfrontier import PostgresFrontier, Request


def _index_reads(url: str, schema: str) -> dict[str, int]:
    """Index entries the scans of each index of ``schema`` have read (the server's statistics, flushed when a
    backend ends)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT indexrelname, idx_tup_read FROM pg_stat_user_indexes WHERE schemaname = %s",
                            (schema,)).fetchall()
    return {name: int(reads) for name, reads in rows}


def _held_run(url: str, crawl: str, hosts: int, count: int) -> tuple[dict[str, float], float, float]:
    """``count`` pops and dones of a FIFO crawl of ``hosts`` hosts while another transaction holds a snapshot
    older than all of them: the index entries read a pop, by index, and the seconds a pop and a done took in
    the first and in the last quarter."""
    fast = url + "?options=-c%20synchronous_commit%3Doff"  # what is measured is the work, not the fsync
    schema = f"df_{crawl}"
    frontier = PostgresFrontier(fast, crawl=crawl, order="fifo", renew=False)
    frontier.push_many(Request(f"https://h{i % hosts}.example/{i}") for i in range(count + 10))
    with psycopg.connect(url) as holder:  # the long transaction
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute(f'SET LOCAL search_path TO "{schema}"')
        before = holder.execute("SELECT count(*) FROM requests").fetchone()
        holder.execute("SELECT txid_current()")
        frontier.close()  # its backends' statistics so far are flushed as they end
        time.sleep(0.5)
        reads_before = _index_reads(url, schema)
        frontier = PostgresFrontier(fast, crawl=crawl, renew=False)
        took = []
        for _ in range(count):
            started = time.perf_counter()
            request = frontier.pop()
            assert request is not None
            frontier.done(request)
            took.append(time.perf_counter() - started)
        frontier.close()
        assert holder.execute("SELECT count(*) FROM requests").fetchone() == before  # the horizon was held
        holder.rollback()
    deadline = time.monotonic() + 10
    while (_index_reads(url, schema)["requests_queue"] - reads_before["requests_queue"]) < count:
        assert time.monotonic() < deadline, "the server's statistics never showed the pops' reads"
        time.sleep(0.1)
    after = _index_reads(url, schema)
    quarter = count // 4
    return ({name: (after[name] - reads_before.get(name, 0)) / count for name in after},
            sum(took[:quarter]) / quarter, sum(took[-quarter:]) / quarter)


@pytest.mark.slow
def test_a_pop_reads_a_few_entries_of_its_hosts_queue_however_many_dead_ones_lie_before_them(postgres_url,
                                                                                             crawl_name):
    count = 1500
    reads, first, last = _held_run(postgres_url, crawl_name, 1, count)  # one host: one deep queue
    print(f"\nvacuum held back, one host, {count} pops and dones: {reads['requests_queue']:.1f} queue index "
          f"entries read a pop; pop+done {first * 1e6:.0f} us in the first quarter, {last * 1e6:.0f} us in the last")
    assert reads["requests_queue"] <= 4, f"{reads['requests_queue']:.0f} entries a pop: the dead ones were walked"


@pytest.mark.slow
def test_a_pop_reads_a_few_entries_of_the_hosts_order_however_many_dead_ones_lie_before_them(postgres_url,
                                                                                             crawl_name):
    count = 1500
    reads, first, last = _held_run(postgres_url, crawl_name, 20, count)
    print(f"\nvacuum held back, 20 hosts, {count} pops and dones: {reads['hosts_best']:.1f} host order index "
          f"entries and {reads['hosts_pkey']:.1f} host key entries read a pop; pop+done {first * 1e6:.0f} us in "
          f"the first quarter, {last * 1e6:.0f} us in the last ({last / first:.2f}x)")
    # a pop from the front would read every host's dead entries: about count / 2 a pop on average
    assert reads["hosts_best"] <= count / 15, f"{reads['hosts_best']:.0f} entries a pop: the dead ones were walked"


def _row_changes(url: str, schema: str, table: str) -> tuple[int, int, int]:
    """(rows inserted, updated, deleted) in ``table`` of ``schema`` (the server's statistics)."""
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables "
                             "WHERE schemaname = %s AND relname = %s", (schema, table)).fetchone()
    assert found is not None, f"no statistics for {schema}.{table}"
    return found[0], found[1], found[2]


def test_the_counters_take_rows_and_change_none_while_vacuum_is_held_back(postgres_url, crawl_name, sql):
    """Under a held horizon a counter changed in place gains a version at each step, and each step's lookup of
    it walks them all; here a step inserts, and only a fold (a client's beat) deletes, in bulk."""
    count = 300
    schema = f"df_{crawl_name}"
    frontier = PostgresFrontier(postgres_url, crawl=crawl_name, renew=False)
    frontier.push_many(Request(f"https://h{i % 5}.example/{i}") for i in range(count))
    with psycopg.connect(postgres_url) as holder:  # the long transaction
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT txid_current()")
        for _ in range(count):
            request = frontier.pop()
            assert request is not None
            frontier.done(request)
        frontier.close()
        holder.rollback()
    deadline = time.monotonic() + 10
    while sum(_row_changes(postgres_url, schema, "counters")[:2]) < count:
        assert time.monotonic() < deadline, "the server's statistics never showed the dones' counters"
        time.sleep(0.1)
    inserted, updated, deleted = _row_changes(postgres_url, schema, "counters")
    print(f"\n{count} pops and dones: {inserted} counter rows inserted, {updated} updated, {deleted} deleted")
    assert updated == 0, f"{updated} counter rows were changed in place"
    with PostgresFrontier(postgres_url, crawl=crawl_name, renew=False) as again:  # its open's beat folds them
        assert again.stats()["done"] == count
    [rows] = sql("SELECT count(*), count(DISTINCT name) FROM counters")
    assert rows[0] == rows[1], f"{rows[0]} rows for {rows[1]} counters after a fold"
