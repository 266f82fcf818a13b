"""A long transaction holds vacuum back: the rows pops and dones remove stay in the tables and their indexes,
dead, until the oldest snapshot ends, and a queue read from its front walks all of them at every pop (the
loss of SKIP LOCKED queues under a held horizon). A pop here reads its host's queue from the host's best
request, and the next best from below the one it took: the index entries it reads stay a few a pop however
many dead ones lie in front of them."""

from __future__ import annotations

import time

import psycopg
import pytest

from diskfrontier import PostgresFrontier, Request


def _index_reads(url: str, schema: str, index: str) -> int:
    """Index entries the scans of ``index`` have read (the server's statistics, flushed when a backend ends)."""
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT idx_tup_read FROM pg_stat_user_indexes WHERE schemaname = %s AND "
                             "indexrelname = %s", (schema, index)).fetchone()
    assert found is not None
    return int(found[0])


@pytest.mark.slow
def test_a_pop_reads_a_few_queue_entries_however_many_dead_ones_a_held_horizon_keeps(postgres_url, crawl_name):
    fast = postgres_url + "?options=-c%20synchronous_commit%3Doff"  # what is measured is the work, not the fsync
    count = 1500
    schema = f"df_{crawl_name}"
    frontier = PostgresFrontier(fast, crawl=crawl_name, order="fifo", renew=False)
    frontier.push_many(Request(f"https://one.example/{i}") for i in range(count + 10))  # one host: one deep queue
    with psycopg.connect(postgres_url) as holder:  # the long transaction: a snapshot older than every pop
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute(f'SET LOCAL search_path TO "{schema}"')
        before = holder.execute("SELECT count(*) FROM requests").fetchone()
        holder.execute("SELECT txid_current()")
        frontier.close()  # its backends' statistics so far are flushed as they end
        time.sleep(0.5)
        reads_before = _index_reads(postgres_url, schema, "requests_queue")
        frontier = PostgresFrontier(fast, crawl=crawl_name, renew=False)
        took = []
        for _ in range(count):
            started = time.perf_counter()
            request = frontier.pop()
            assert request is not None
            frontier.done(request)
            took.append(time.perf_counter() - started)
        frontier.close()
        assert holder.execute("SELECT count(*) FROM requests").fetchone() == before  # the horizon was held
        dead = holder.execute("SELECT count(*) FROM leases").fetchone()  # still counted: none was there to it
        holder.rollback()
    deadline = time.monotonic() + 10
    while (reads := _index_reads(postgres_url, schema, "requests_queue") - reads_before) < count:
        assert time.monotonic() < deadline, f"the statistics show {reads} reads for {count} pops"
        time.sleep(0.1)
    quarter = count // 4
    first, last = sum(took[:quarter]) / quarter, sum(took[-quarter:]) / quarter
    print(f"\nvacuum held back, one host, {count} pops and dones: {reads / count:.1f} queue index entries read a pop; "
          f"pop+done {first * 1e6:.0f} us in the first quarter, {last * 1e6:.0f} us in the last")
    assert dead == (0,)
    assert reads <= 4 * count, f"{reads / count:.0f} queue index entries read a pop: the dead ones were walked"
