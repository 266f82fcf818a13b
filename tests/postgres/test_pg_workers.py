"""Many processes on one PostgreSQL crawl: real SIGKILLs of a worker holding leases, and a server restart
without a shutdown checkpoint (``pg_ctl restart -m immediate``) under load."""

from __future__ import annotations

import time

import pytest
from killcampaign import polite_campaign, start_worker
from pgserver import PgServer
from serverload import Load

from diskfrontier import PostgresFrontier, PostgresUnavailable

pytestmark = pytest.mark.crash


@pytest.mark.slow
def test_four_workers_one_killed_twice_lose_nothing_and_keep_politeness(postgres_url, crawl_name, tmp_path):
    total, hosts, delay = 6_000, 100, 0.02
    campaign, closest = polite_campaign(
        lambda **settings: PostgresFrontier(postgres_url, crawl=crawl_name, **settings),
        lambda log, hold: start_worker("postgres", postgres_url, crawl_name, log, hold), str(tmp_path),
        total=total, hosts=hosts, delay=delay, victim_dones=150, patience=120, wait=300)

    with PostgresFrontier(postgres_url, crawl=crawl_name) as check:
        stats = check.stats()
        print(f"\nkill campaign: {total} requests, {hosts} hosts, {len(campaign.dead)} workers killed, "
              f"{len(set().union(*campaign.held_at_kill))} held at the kills, {campaign.reclaimed} handed out again, "
              f"{stats['reclaimed']} leases taken back, done {stats['done']}, lost 0, "
              f"closest hand-outs of one host {closest * 1000:.1f} ms apart (delay {delay * 1000:.0f} ms)")
        assert check.finished and stats["done"] == total
        assert campaign.reclaimed <= stats["reclaimed"] <= campaign.reclaimed + 8 * len(campaign.dead)


@pytest.mark.slow
def test_a_server_restarted_without_a_checkpoint_under_load_loses_nothing_acknowledged():
    server = PgServer()  # a cluster of its own, in a folder the server's user can reach
    try:
        server.start()
        url = server.create_database("restart")
        _restart_under_load(server, url)
    finally:
        server.stop()
        server.remove()


def _restart_under_load(server: PgServer, url: str) -> None:
    crawl = "durable"
    with PostgresFrontier(url, crawl=crawl, order="fifo"):
        pass
    load = Load(lambda **settings: PostgresFrontier(url, crawl=crawl, **settings), PostgresUnavailable)
    load.start()

    def work_goes_on(since: int) -> None:
        """Wait until 20 more dones were acknowledged since ``since`` of them (the clients reconnect by
        themselves: a call is tried again for up to a minute)."""
        deadline = time.monotonic() + 120
        while len(load.acked_done) < since + 20:
            assert time.monotonic() < deadline and not load.errors, (len(load.acked_done), since, load.errors[:3])
            time.sleep(0.05)

    before: list[int] = []
    try:
        work_goes_on(0)
        for _ in range(2):  # each restart under load, and work going on after it
            before.append(len(load.acked_done))
            server.restart_immediate()
            work_goes_on(before[-1])
    finally:
        load.end(120)
    assert len(load.acked_done) >= before[-1] + 20
    with PostgresFrontier(url, crawl=crawl) as f:
        load.check_nothing_lost(f)
        print(f"\nrestart under load: 2 restarts (-m immediate), {len(load.acked_push)} pushes and "
              f"{len(load.acked_done)} dones acknowledged, {len(load.uncertain)} dones uncertain, lost 0")
