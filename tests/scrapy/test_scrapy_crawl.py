"""Real Scrapy crawls with diskfrontier.scrapy.Scheduler: clean, interrupted with SIGINT, killed with SIGKILL.

Each crawl is a subprocess (tests/scrapy_child.py) of Scrapy's CrawlerProcess against the
synthetic site served here on 127.0.0.1; the site counts every fetch of every page.
"""

from __future__ import annotations

import signal

import pytest
from scrapykit import crawl_with_kills, finish, read_stats, start_crawl

from diskfrontier.run.demo import SyntheticSite

pytestmark = pytest.mark.crash
PAGES = 400


def test_clean_crawl_fetches_every_page_once(tmp_path):
    stats_path = str(tmp_path / "stats.json")
    with SyntheticSite(PAGES) as site:
        proc = start_crawl(str(tmp_path / "job"), site, "diskfrontier", stats_path, "unserializable=1")
        log = finish(proc)
        fetches = site.fetched()
    assert proc.returncode == 0, log[-3000:]
    stats = read_stats(stats_path)
    assert stats["finish_reason"] == "finished"
    assert {f"/page/{n}" for n in range(PAGES)} <= set(fetches) and set(fetches.values()) == {1}
    assert stats["scheduler/enqueued/disk"] == PAGES and stats["scheduler/dequeued"] == PAGES + 1
    assert stats["scheduler/unserializable"] == 1 and stats["scheduler/enqueued/memory"] == 1
    assert stats["diskfrontier/done"] == PAGES + 1 and stats["diskfrontier/pending"] == 0
    assert stats["dupefilter/filtered"] > 0
    assert log.count("Unable to serialize request") == 1 and "is not a method of the spider" in log


@pytest.mark.slow
def test_sigint_then_resume_fetches_every_page_exactly_once(tmp_path):
    run = crawl_with_kills(tmp_path, "diskfrontier", PAGES, kill_at=[80, 200], sig=signal.SIGINT)
    assert run.final_returncode == 0, run.final_log[-3000:]
    assert run.never_fetched == 0
    assert run.refetched == 0, f"a paused crawl fetched pages again: {run.fetches.most_common(3)}"
    assert "Resuming crawl" in run.final_log


@pytest.mark.slow
def test_sigkill_then_resume_loses_nothing_and_refetches_only_what_was_in_flight(tmp_path):
    run = crawl_with_kills(tmp_path, "diskfrontier", PAGES, kill_at=[60, 160, 260])
    assert run.final_returncode == 0, run.final_log[-3000:]
    assert run.final_stats["finish_reason"] == "finished"
    assert run.never_fetched == 0, "pages were lost"
    assert run.refetched <= sum(run.in_flight_at_kills), (run.refetched, run.in_flight_at_kills)
    # bounded by what was measured in flight at each kill, not by a constant a busy machine can exceed
    assert run.final_stats.get("diskfrontier/recovered", 0) > 0
    print(f"\ndiskfrontier: {run.kills} SIGKILLs, in flight at each {run.in_flight_at_kills}, "
          f"{run.refetched} pages fetched again, {run.never_fetched} never fetched")


@pytest.mark.slow
def test_side_by_side_with_scrapys_own_scheduler(tmp_path):
    """The same kills with Scrapy's scheduler and JOBDIR, for the README's comparison."""
    ours = crawl_with_kills(tmp_path, "diskfrontier", PAGES, kill_at=[60, 160, 260])
    theirs = crawl_with_kills(tmp_path, "scrapy", PAGES, kill_at=[60, 160, 260], stall=5)
    rows = [("scheduler", "SIGKILLs", "pages fetched", "never fetched", "fetched again")]
    for run in (ours, theirs):
        rows.append((run.scheduler, str(run.kills), str(PAGES - run.never_fetched), str(run.never_fetched),
                     str(run.refetched)))
    print("\n" + "\n".join(f"{a:<14}{b:>9}{c:>15}{d:>15}{e:>15}" for a, b, c, d, e in rows))
    for note in theirs.notes:
        print(f"scrapy: {note}")
    assert ours.never_fetched == 0 and ours.final_returncode == 0
    assert theirs.kills == 3  # Scrapy's scheduler ran the same kills; its losses are measured, not promised
