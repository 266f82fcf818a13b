"""One crawl spread over a real Redis Cluster (3 masters, 3 replicas): its keys on every master, and four
worker processes, one of them SIGKILLed twice, losing nothing and never handing a request to two live
workers at once."""

from __future__ import annotations

import collections

import pytest
from killcampaign import kill_campaign, start_worker
from popkit import take

from diskfrontier import RedisFrontier, Request
from diskfrontier.redisfrontier.management import crawl_names


def drain(frontier) -> list[Request]:
    out = []
    while (request := frontier.pop()) is not None:
        out.append(request)
        frontier.done(request)
    return out

pytestmark = pytest.mark.crash


def keys_of(client, crawl: str) -> int:
    """How many keys of ``crawl`` (any of its shards) one node holds (SCAN of that node)."""
    return sum(1 for key in client.scan_iter(match=f"df:{{{crawl}*", count=1000)
               if key.decode().split("}", 1)[0][4:].split("/", 1)[0] == crawl)


def test_the_keys_of_one_crawl_are_on_every_master(redis_cluster):
    crawl = "spread"
    with RedisFrontier(redis_cluster.url, crawl=crawl, shards=3) as f:
        assert f.cluster and f.shards == 3
        assert f.push_many(Request(f"https://h{i}.example/{i}") for i in range(300)) == 300
        popped = f.pop_many(50)
        f.done_many(popped)
        stats = f.stats()
        assert (stats["pending"], stats["done"], stats["hosts"]) == (250, 50, 300)
    tally = {f"127.0.0.1:{m.port}": keys_of(m.client(), crawl) for m in redis_cluster.masters()}
    print("keys of one crawl per master:", tally)
    assert len(tally) == 3 and all(count > 50 for count in tally.values())
    assert crawl in crawl_names(redis_cluster.url)
    assert not [name for name in crawl_names(redis_cluster.url) if name.startswith(crawl + "/")]
    with RedisFrontier(redis_cluster.url, crawl=crawl) as again:  # shards=None: the crawl's own number
        assert again.shards == 3 and len(again) == 250
        assert again.drop_crawl() > 0
    assert sum(keys_of(m.client(), crawl) for m in redis_cluster.masters()) == 0


def test_four_workers_on_a_cluster_one_killed_twice_lose_nothing(redis_cluster, tmp_path):
    url, crawl, total, hosts = redis_cluster.url, "workers", 3000, 60
    with RedisFrontier(url, crawl=crawl, shards=3, lease=2.0, order="fifo") as seed:
        assert seed.push_many(Request(f"https://h{i % hosts}.example/{i}") for i in range(total)) == total
    campaign = kill_campaign(lambda log, hold: start_worker("redis", url, crawl, log, hold),
                             str(tmp_path), victim_dones=100, patience=60, late=False, wait=180)
    everything = {f"https://h{i % hosts}.example/{i}" for i in range(total)}
    served = collections.Counter(name for handed in campaign.pops.values() for name, _, _ in handed)
    print(f"cluster workers: {total} requests, lost {len(campaign.lost(everything))}, handed to two live workers "
          f"at once {len(campaign.held_twice())}, handed out again after a kill {campaign.reclaimed}, "
          f"pops per worker {dict(served)}")
    campaign.check(everything)
    with RedisFrontier(url, crawl=crawl) as check:
        stats = check.stats()
        assert check.finished and stats["done"] == total


def test_copy_moves_a_crawl_between_a_job_directory_a_redis_server_and_a_cluster(redis_cluster, redis_url,
                                                                                   tmp_path):
    from click.testing import CliRunner

    from diskfrontier import Frontier
    from diskfrontier.cli import main

    source = str(tmp_path / "source")
    with Frontier(source, order="fifo") as f:
        f.push_many(Request(f"https://h{i % 40}.example/{i}", priority=i % 3) for i in range(400))
        for _ in range(50):
            f.done(take(f))
        f.fail(take(f), "boom")
        f.set_delay("h3.example", 1.5)
    runner = CliRunner()
    steps = [(source, redis_url, "--to-crawl", "single", ()),
             (redis_url, redis_cluster.url, "--from-crawl", "single", ("--to-crawl", "onthecluster", "--shards", "3")),
             (redis_cluster.url, str(tmp_path / "back"), "--from-crawl", "onthecluster", ())]
    for src, dst, option, name, more in steps:
        result = runner.invoke(main, ["copy", src, dst, option, name, *more])
        assert result.exit_code == 0, result.output
    with RedisFrontier(redis_cluster.url, crawl="onthecluster") as on_cluster:
        stats = on_cluster.stats()
        assert (on_cluster.shards, stats["pending"], stats["failed"], stats["seen"]) == (3, 349, 1, 400)
        h3 = on_cluster.host("h3.example")
        assert h3 is not None and h3.delay == 1.5
        assert on_cluster.push(Request("https://h5.example/5")) is False  # done before, still seen
    with Frontier(str(tmp_path / "back")) as back, Frontier(source) as first:
        assert [e.request.url for e in back.failed()] == [e.request.url for e in first.failed()]
        assert back.stats()["seen"] == 400 and back.push(Request("https://h9.example/9")) is False
        assert len(back) == len(first) == 349
        def counts(frontier):  # per host: pending, done, delay (not the ready time: the last hand-out's)
            return [(h.host, h.pending, h.done, h.delay) for h in frontier.hosts()]

        assert counts(back) == counts(first)


def test_scrapy_processes_crawl_a_site_through_a_cluster(redis_cluster, tmp_path):
    from scrapykit import finish, start_crawl

    from diskfrontier.run.demo import SyntheticSite

    extra = (f"DISKFRONTIER_URL={redis_cluster.url}", "DISKFRONTIER_CRAWL=scrapysite", "DISKFRONTIER_SHARDS=3",
             "DISKFRONTIER_WAIT_REPLICAS=1", "DISKFRONTIER_LEASE=5")
    with SyntheticSite(150) as site:
        procs = [start_crawl(str(tmp_path / f"job-{n}"), site, "diskfrontier", str(tmp_path / f"{n}.json"), *extra)
                 for n in range(2)]
        for proc in procs:
            log = finish(proc, timeout=120)
            assert proc.returncode == 0, log[-3000:]
        fetched = site.fetched()
    assert set(fetched) == {f"/page/{n}" for n in range(150)}
    with RedisFrontier(redis_cluster.url, crawl="scrapysite") as f:
        assert f.shards == 3 and f.finished
