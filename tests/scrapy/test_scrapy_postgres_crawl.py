"""Real ``scrapy crawl`` processes with ``DISKFRONTIER_URL = "postgresql://..."``: one crawl of a loopback site
shared by several processes, one killed with SIGKILL while it holds leases, against the session's real
PostgreSQL server; and the scheduler driven by hand with nothing ready."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from scrapykit import finish, read_stats, start_crawl
from test_scrapy_scheduler import _DRIVEN_BY_HAND

from diskfrontier import PostgresFrontier
from diskfrontier.run.demo import SyntheticSite

pytestmark = pytest.mark.crash
PAGES = 400


def settings_for(url: str, *extra: str) -> tuple[str, ...]:
    return (f"DISKFRONTIER_URL={url}", "DISKFRONTIER_CRAWL=site", "DISKFRONTIER_LEASE=2", *extra)


def leases_of(url: str, pid: int) -> int:
    """How many requests of the crawl are leased to the process ``pid`` (a client id ends in its pid)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute('SELECT count(*) FROM "df_site".leases WHERE client LIKE %s', (f"%-{pid}",)).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.slow
def test_three_processes_one_killed_while_it_holds_leases_fetch_every_page(tmp_path, postgres_url):
    with SyntheticSite(PAGES, delay=0.01) as site:
        def start(n: int) -> subprocess.Popen:
            return start_crawl(str(tmp_path / f"job-{n}"), site, "diskfrontier", str(tmp_path / f"{n}.json"),
                               *settings_for(postgres_url))

        procs = [start(n) for n in range(3)]
        deadline = time.monotonic() + 120
        while len(site.fetched()) < PAGES // 4 and time.monotonic() < deadline:
            assert any(p.poll() is None for p in procs), "every process stopped before the kill"
            time.sleep(0.005)
        while not leases_of(postgres_url, procs[0].pid) and time.monotonic() < deadline:
            if len(site.fetched()) >= PAGES or procs[0].poll() is not None:
                break
            time.sleep(0.001)
        orphaned = leases_of(postgres_url, procs[0].pid)
        procs[0].kill()  # SIGKILL
        procs[0].wait()
        procs[0] = start(3)
        for proc in procs[1:]:
            log = finish(proc, timeout=180)
            assert proc.returncode == 0, log[-3000:]
        fetched = site.fetched()
    with PostgresFrontier(postgres_url, crawl="site", create=False) as frontier:
        stats = frontier.stats()
    expected = {f"/page/{n}" for n in range(PAGES)}
    again = sum(count - 1 for path, count in fetched.items() if path in expected)
    print(f"\n{PAGES} pages, 3 processes on PostgreSQL, one SIGKILLed holding {orphaned} leases: "
          f"{len(expected - set(fetched))} never fetched, {again} fetched again, {stats['reclaimed']} reclaimed")
    assert set(fetched) >= expected  # nothing lost
    assert stats["pending"] == 0 and stats["in_flight"] == 0 and stats["done"] >= PAGES
    assert orphaned >= 1 and stats["reclaimed"] >= orphaned  # the killed process's leases all came back
    dequeued = [read_stats(str(tmp_path / f"{n}.json")).get("scheduler/dequeued", 0) for n in (1, 2, 3)]
    assert sum(1 for n in dequeued if n > 0) >= 2  # the crawl was shared


def test_one_scrapy_crawl_on_postgres_fetches_every_page_once(tmp_path, postgres_url):
    with SyntheticSite(150, delay=0.0) as site:
        proc = start_crawl(str(tmp_path / "job"), site, "diskfrontier", str(tmp_path / "stats.json"),
                           *settings_for(postgres_url, "DISKFRONTIER_POLL=0.2"))
        log = finish(proc, timeout=120)
        assert proc.returncode == 0, log[-3000:]
        fetched = site.fetched()
    assert set(fetched) == {f"/page/{n}" for n in range(150)} and max(fetched.values()) == 1
    assert "crawl 'site' in PostgreSQL" in log
    with PostgresFrontier(postgres_url, crawl="site", create=False) as frontier:
        stats = frontier.stats()
    assert (stats["pending"], stats["in_flight"], stats["done"]) == (0, 0, 150)


def test_redis_settings_a_postgres_crawl_lacks_are_refused(tmp_path, postgres_url):
    with SyntheticSite(5, delay=0.0) as site:
        proc = start_crawl(str(tmp_path / "job"), site, "diskfrontier", str(tmp_path / "stats.json"),
                           *settings_for(postgres_url, "DISKFRONTIER_SHARDS=3"))
        log = finish(proc, timeout=120)
        assert not site.fetched()
    assert "shards=3 is a setting of a Redis crawl; a PostgreSQL crawl has no such setting" in log


def test_a_scheduler_on_postgres_driven_by_hand_with_nothing_ready_returns_none(postgres_url):
    script = _DRIVEN_BY_HAND.replace('target.startswith("redis://")', 'target.startswith(("redis://", "postgresql"))')
    script = script.replace("with RedisFrontier(target,", "with (PostgresFrontier if target.startswith('postgresql') "
                                                          "else RedisFrontier)(target,")
    script = script.replace("from diskfrontier import Frontier, RedisFrontier, Request",
                            "from diskfrontier import Frontier, PostgresFrontier, RedisFrontier, Request")
    done = subprocess.run([sys.executable, "-c", script, postgres_url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "nothing ready, no error"
