"""A batch is taken whole by one statement a step (push_many, pop_many, done_many): for random batches of
duplicates, dont_filter requests, priorities, requests for later and hosts with and without a delay, each
request pushed gets what the job directory gives it, the requests go out in the order single pops give them,
and once drained the counts are the job directory's. (The job directory's own order between hosts of one
priority follows how long each host has been ready, once host rules are in play: a time, not a rank, so it is
not compared.)"""

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


def one_by_one(frontier, count: int) -> list[Request]:
    out: list[Request] = []
    while len(out) < count and (r := frontier.pop()) is not None:
        out.append(r)
    return out


@pytest.mark.parametrize("seed", range(int(os.environ.get("DISKFRONTIER_FUZZ_CASES", "6"))))
def test_batches_get_what_single_calls_and_the_job_directory_give(tmp_path, postgres_url, crawl_name, seed):
    rng = random.Random(seed)
    order = ("lifo", "fifo")[seed % 2]
    job = Frontier(str(tmp_path / "job"), order=order)
    batched = PostgresFrontier(postgres_url, crawl=crawl_name, new_order=order)
    single = PostgresFrontier(postgres_url, crawl=f"{crawl_name}-1", new_order=order, ack="wait")
    frontiers = (job, batched, single)
    try:
        for frontier in frontiers:
            frontier.set_delay("h1.example", 3600.0)  # one request of it a crawl: a host held back by its delay
            frontier.set_budget("h2.example", 5)
        names: list[str] = []
        popped: dict[str, list[str]] = {"batched": [], "single": []}

        def step(count: int) -> None:
            got = batched.pop_many(count)
            popped["batched"].append(" ".join(r.url for r in got))
            for r in got[: len(got) // 2]:
                batched.done(r)
            batched.done_many(got[len(got) // 2:])
            got = one_by_one(single, count)
            popped["single"].append(" ".join(r.url for r in got))
            for r in got:
                single.done(r)
            for r in one_by_one(job, count):
                job.done(r)

        for _ in range(8):
            requests = batch(rng, rng.randrange(1, 40), names)
            copies = [[Request(r.url, priority=r.priority, dont_filter=r.dont_filter) for r in requests]
                      for _ in frontiers]
            if rng.random() < 0.3:  # some for later: they wait, and are not in the pops below
                for copy in copies:
                    for r in copy[::3]:
                        r.not_before = 4e9
            answers = [job.push(r) for r in copies[0]]  # one at a time
            assert batched.push_each(copies[1]) == answers
            assert [single.push(r) for r in copies[2]] == answers
            step(rng.randrange(1, 12))
        while popped["batched"][-1] or popped["single"][-1]:  # drained, 9 at a time
            step(9)
        assert popped["batched"] == popped["single"]
        counts = [[f.stats()[k] for k in ("pushed", "duplicates", "seen", "done", "pending")] for f in frontiers]
        assert counts[1] == counts[2] == counts[0]
    finally:
        for frontier in frontiers:
            frontier.close()


def test_pushes_to_hosts_already_there_use_up_no_host_ids(open_crawl, sql):
    f = open_crawl()
    for n in range(40):
        f.push_many(Request(f"https://h{i % 5}.example/{n}/{i}") for i in range(20))
    f.push(Request("https://h0.example/one"))
    assert sql("SELECT count(*), max(id) FROM hosts") == [(5, 5)]
    assert sql("SELECT last_value FROM hosts_id_seq") == [(5,)]
