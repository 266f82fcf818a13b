"""Items are safe before their request is done: ``scrapy crawl -o items.jsonl`` killed with kill -9 and resumed.

Each page of the site yields one item, its URL. The crawl is killed three times at random
points and resumed each time, then run to its end; every page's item must be in the output
file. Items may come twice: only for pages that were fetched but not done at a kill (read
from the killed job directory), which are fetched again.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from dataclasses import dataclass

import pytest
from scrapykit import crawl_with_kills

PAGES = 400
SEED = int(os.environ.get("DISKFRONTIER_KILL_SEED", "20261206"))  # another seed: other kill points


@dataclass
class Tally:
    missing: int
    duplicates: int
    cut_lines: int
    refetched_bound: int
    fetched_all: bool
    returncode: int | None

    def line(self, label: str) -> str:
        return (f"{label}: {self.missing} of {PAGES} items missing, {self.duplicates} duplicated "
                f"(bound: {self.refetched_bound} pages fetched and not done at the kills), "
                f"{self.cut_lines} cut lines, every page fetched: {self.fetched_all}")


def items_in(path) -> tuple[Counter, int]:
    """The URLs of the items of a JSON lines feed, and how many of its lines are not whole items
    (what a user reading it does: a line that does not parse is skipped)."""
    urls: Counter = Counter()
    cut = 0
    with open(path, "rb") as f:
        for line in f:
            try:
                urls[json.loads(line)["url"]] += 1
            except (ValueError, KeyError, TypeError):
                cut += 1
    return urls, cut


def killed_crawl(tmp_path, kill_at: list[int], done_after_items: bool) -> Tally:
    feed = tmp_path / "items.jsonl"
    settings = (f"FEEDS={json.dumps({str(feed): {'format': 'jsonlines'}})}",
                f"DISKFRONTIER_DONE_AFTER_ITEMS={json.dumps(done_after_items)}")
    run = crawl_with_kills(tmp_path, "diskfrontier", PAGES, kill_at, delay=0.03, settings=settings)
    urls, cut = items_in(feed)
    base = next(iter(urls)).rsplit("/page/", 1)[0]
    missing = sum(1 for n in range(PAGES) if urls[f"{base}/page/{n}"] == 0)
    duplicates = sum(count - 1 for count in urls.values())
    return Tally(missing, duplicates, cut, sum(run.in_flight_at_kills), run.never_fetched == 0, run.final_returncode)


@pytest.mark.slow
@pytest.mark.crash
def test_every_item_is_in_the_feed_after_three_kills(tmp_path):
    rng = random.Random(SEED)
    kill_at = sorted(rng.sample(range(60, PAGES - 60), 3))
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    after = killed_crawl(tmp_path / "on", kill_at, done_after_items=True)
    before = killed_crawl(tmp_path / "off", kill_at, done_after_items=False)
    print(f"\nkilled after {kill_at} pages fetched (seed {SEED})")
    print(before.line("DISKFRONTIER_DONE_AFTER_ITEMS=False (before)"))
    print(after.line("DISKFRONTIER_DONE_AFTER_ITEMS=True (after)"))
    assert after.returncode == 0 and after.fetched_all
    assert after.missing == 0
    assert after.duplicates <= after.refetched_bound
