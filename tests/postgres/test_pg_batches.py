"""A batch is taken whole by one statement a step (push_many, pop_many, done_many): what each request gets and the
order requests go out in are those of the job directory fed the same calls, for random batches of duplicates,
dont_filter requests, priorities, requests for later and hosts with and without a delay."""

from __future__ import annotations

import os
import random

import pytest

from diskfrontier import Frontier, PostgresFrontier, Request


def batch(rng: random.Random, size: int, names: list[str]) -> list[Request]:
    out = []
    for _ in range(size):
        url = rng.choice(names) if names and rng.random() < 0.3 else f"https://h{rng.randrange(6)}.example/{len(names)}"
        names.append(url)
        out.append(Request(url, priority=rng.choice((0, 0, 1, 2, -1)), dont_filter=rng.random() < 0.15))
    return out


def take(frontier, count: int) -> list[Request]:
    """``pop_many(count)``; the job directory's ``pop`` that many times (it has no pop_many: one process)."""
    if isinstance(frontier, PostgresFrontier):
        return frontier.pop_many(count)
    out: list[Request] = []
    while len(out) < count and (r := frontier.pop()) is not None:
        out.append(r)
    return out


@pytest.mark.parametrize("seed", range(int(os.environ.get("DISKFRONTIER_FUZZ_CASES", "6"))))
def test_batches_get_what_the_job_directory_gives(tmp_path, postgres_url, crawl_name, seed):
    rng = random.Random(seed)
    order = ("lifo", "fifo")[seed % 2]
    job = Frontier(str(tmp_path / "job"), order=order)
    pg = PostgresFrontier(postgres_url, crawl=crawl_name, new_order=order)
    try:
        for frontier in (job, pg):
            frontier.set_delay("h1.example", 3600.0)  # one request of it a crawl: a host held back by its delay
            frontier.set_budget("h2.example", 5)
        names: list[str] = []
        popped: dict[str, list[str]] = {"job": [], "pg": []}
        for _ in range(8):
            requests = batch(rng, rng.randrange(1, 40), names)
            later = rng.random() < 0.3
            copies = [[Request(r.url, priority=r.priority, dont_filter=r.dont_filter) for r in requests]
                      for _ in range(2)]
            if later:  # some for later: they wait, and are not in the pops below
                for copy in copies:
                    for r in copy[::3]:
                        r.not_before = 4e9
            assert [job.push(r) for r in copies[0]] == pg.push_each(copies[1])  # one at a time: the same
            count = rng.randrange(1, 12)
            for name, frontier in (("job", job), ("pg", pg)):
                got = take(frontier, count)
                popped[name].append(" ".join(r.url for r in got))
                for r in got[: len(got) // 2]:
                    frontier.done(r)
                if isinstance(frontier, PostgresFrontier):
                    frontier.done_many(got[len(got) // 2:])
                else:
                    for r in got[len(got) // 2:]:
                        frontier.done(r)
        assert popped["pg"] == popped["job"]
        for name, frontier in (("job", job), ("pg", pg)):
            while got := take(frontier, 9):
                popped[name].append(" ".join(r.url for r in got))
                for r in got:
                    frontier.done(r)
        assert popped["pg"] == popped["job"]
        js, ps = job.stats(), pg.stats()
        assert [js[k] for k in ("pushed", "duplicates", "seen", "done", "pending")] == \
            [ps[k] for k in ("pushed", "duplicates", "seen", "done", "pending")]
    finally:
        job.close()
        pg.close()
