"""The Scrapy scheduler reports each download's outcome to the frontier: a real Scrapy crawl of the
synthetic site in a child process; every response the site served is counted by status class, with
its bytes and download time, in the job directory's stats after the crawl."""

from __future__ import annotations

import os

from scrapykit import finish, start_crawl

from diskfrontier import Frontier
from diskfrontier.run.demo import SyntheticSite

PAGES = 40


def test_a_scrapy_crawl_counts_every_response(tmp_path):
    stats_path = str(tmp_path / "stats.json")
    job = str(tmp_path / "job")
    with SyntheticSite(PAGES) as site:
        log = finish(start_crawl(job, site, "diskfrontier", stats_path))
        served = sum(site.fetched().values())
    assert os.path.exists(stats_path), log[-2000:]
    with Frontier(job) as frontier:
        stats = frontier.stats()
    answered = sum(stats[f"responses_{c}"] for c in ("2xx", "3xx", "4xx", "5xx", "other"))
    assert answered == served > 0
    assert stats["fetch_seconds_count"] == served
    assert stats["fetch_seconds_sum"] > 0
    assert stats["received_bytes"] >= served  # every page of the site has a body
