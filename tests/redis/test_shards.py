"""A crawl of several shards on one redis-server: where its keys go, the number fixed when it is made,
shards of another crawl refused as damage, and the order a pop keeps across shards."""

from __future__ import annotations

import collections

import pytest

from diskfrontier import CrawlDamaged, FrontierError, Request
from diskfrontier.redisfrontier.connection import NotReplicated
from diskfrontier.redisfrontier.management import crawl_names, summaries
from diskfrontier.redisfrontier.shards import CLUSTER_SLOTS, key_slot, second_shard_tags, shard_tags


def tags_in_use(client, crawl: str) -> collections.Counter:
    """How many keys each hash tag of ``crawl`` has (SCAN of the whole server)."""
    found: collections.Counter = collections.Counter()
    for key in client.scan_iter(count=1000):
        tag = key.decode().split("{", 1)[1].split("}", 1)[0]
        if tag == crawl or tag.startswith(crawl + "/"):
            found[tag] += 1
    return found


def test_each_shard_falls_in_its_own_slot_range():
    for crawl in ("news", "t1", "shop.example"):
        for count in (2, 3, 6, 16):
            tags = shard_tags(crawl, count)
            ranges = [key_slot(tag) * count // CLUSTER_SLOTS for tag in tags]
            assert sorted(ranges) == list(range(count)), (crawl, count, tags)
            assert tags[0] == crawl and all(tag.startswith(f"{crawl}/{i}.") for i, tag in enumerate(tags) if i)


def test_the_tags_shard_1_can_have_cover_every_number_of_shards():
    for crawl in ("news", "t1", "shop.example"):
        candidates = second_shard_tags(crawl)
        assert len(candidates) < 64
        assert all(shard_tags(crawl, count)[1] in candidates for count in (2, 3, 5, 16, 100, 1024))


def test_one_shard_keeps_the_keys_of_a_crawl_made_before_shards(open_crawl, redis_server, crawl_name):
    f = open_crawl(shards=1)
    f.push_many(Request(f"https://h{i}.example/") for i in range(20))
    client = redis_server.client()
    assert set(tags_in_use(client, crawl_name)) == {crawl_name}
    meta = client.hgetall(f"df:{{{crawl_name}}}:meta")
    assert not {b"shards", b"tags", b"shard", b"crawl"} & set(meta) and meta[b"v"] == b"2r"  # set64, revisits
    f.close()
    assert open_crawl(shards=None).shards == 1


def test_a_sharded_crawl_spreads_its_hosts_and_is_listed_once(open_crawl, redis_server, redis_url, crawl_name):
    f = open_crawl(shards=4)
    assert f.push_many(Request(f"https://h{i}.example/{i}") for i in range(200)) == 200
    used = tags_in_use(redis_server.client(), crawl_name)
    print("keys per shard tag:", dict(used))
    assert len(used) == 4
    by_shard = collections.Counter(f.shard_of(Request(f"https://h{i}.example/")) for i in range(200))
    assert sorted(by_shard) == [0, 1, 2, 3] and min(by_shard.values()) > 20
    stats = f.stats()
    counts = (stats["pending"], stats["pushed"], stats["seen"], stats["hosts"], stats["shards"])
    assert counts == (200, 200, 200, 200, 4)
    assert len(f) == 200 and len(f.hosts()) == 200
    assert f.push(Request("https://h7.example/7")) is False  # dedupe on the host's shard
    assert crawl_names(redis_url) == [crawl_name]
    [summary] = summaries(redis_url, memory=False)
    assert summary.pending == 200
    popped = [f.pop() for _ in range(200)]
    assert all(popped) and f.pop() is None
    f.done_many(popped)
    assert f.finished and f.stats()["done"] == 200


def test_the_number_of_shards_is_fixed_when_the_crawl_is_made(open_crawl, redis_server, crawl_name):
    open_crawl(shards=3).close()
    client = redis_server.client()
    # "2s": a client from before shards (it reads format "1" only) refuses the crawl instead of seeing shard 0 alone
    assert [client.hget(f"df:{{{tag}}}:meta", "v") for tag in shard_tags(crawl_name, 3)] == [b"2rs"] * 3
    with pytest.raises(FrontierError, match=r"has 3 shards; the number of shards is fixed when a crawl is made "
                                            r"\(open it with shards=None or shards=3\)"):
        open_crawl(shards=2)
    with pytest.raises(FrontierError, match=r"has 3 shards"):
        open_crawl(shards=1)
    assert open_crawl().shards == 3 and open_crawl(shards=3).shards == 3


def test_a_crawl_of_one_shard_cannot_be_opened_with_more(open_crawl):
    open_crawl().close()
    with pytest.raises(FrontierError, match=r"has 1 shard; the number of shards is fixed"):
        open_crawl(shards=2)


def test_a_shard_of_another_crawl_is_damage(open_crawl, redis_server, crawl_name):
    f = open_crawl(shards=3)
    f.close()
    client = redis_server.client()
    tag = shard_tags(crawl_name, 3)[2]
    client.hset(f"df:{{{tag}}}:meta", "shard", "1")
    with pytest.raises(CrawlDamaged, match=r"is not the meta of shard 2 of crawl"):
        open_crawl()
    client.hset(f"df:{{{tag}}}:meta", mapping={"shard": "2", "crawl": "other"})
    with pytest.raises(CrawlDamaged, match=r"is not the meta of shard 2 of crawl"):
        open_crawl()


def test_a_shard_its_maker_did_not_reach_is_made_by_the_next_open_and_a_lost_one_is_not(open_crawl, redis_server,
                                                                                      crawl_name):
    f = open_crawl(shards=3, delay=0.5)
    f.close()
    tags = shard_tags(crawl_name, 3)
    client = redis_server.client()
    sentinels = [client.get(f"df:{{{tag}}}:sentinel") for tag in tags]
    assert sentinels == [b"0/3", b"1/3", b"2/3"]
    # what a maker leaves when it stops after shard 0 (made without a sentinel until every shard is there)
    assert client.delete(f"df:{{{tags[1]}}}:meta", f"df:{{{tags[1]}}}:sentinel", f"df:{{{crawl_name}}}:sentinel") == 3
    assert client.hdel(f"df:{{{crawl_name}}}:meta", "sentinel") == 1
    f = open_crawl()
    assert client.hget(f"df:{{{tags[1]}}}:meta", "delay") == b"0.5"  # with the crawl's settings, not the defaults
    assert [client.get(f"df:{{{tag}}}:sentinel") for tag in tags] == sentinels  # and the crawl is sealed again
    f.push_many(Request(f"https://h{i}.example/") for i in range(30))
    assert len(f) == 30
    f.close()
    client.delete(f"df:{{{tags[1]}}}:meta", f"df:{{{tags[1]}}}:sentinel")  # the same shard, lost from a made crawl
    with pytest.raises(CrawlDamaged, match=r"shard 1 of crawl .* is gone"):
        open_crawl()
    assert not client.exists(f"df:{{{tags[1]}}}:meta")


def test_settings_pause_and_seen_reach_every_shard(open_crawl):
    f = open_crawl(shards=4)
    hosts = [f"h{i}.example" for i in range(40)]
    f.push_many(Request(f"https://{host}/") for host in hosts)
    f.pause()
    assert f.pop() is None and f.paused_since is not None
    other = open_crawl(delay=2.0)
    assert other.pop() is None  # the pause holds on every shard
    f.resume()
    assert {h.delay for h in other.hosts()} == {2.0}
    fresh = Request("https://new.example/")
    assert f.mark_seen([fresh.fingerprint]) == 1 and f.has_seen(fresh.fingerprint)
    assert f.push(fresh) is False


def test_done_retry_and_fail_go_to_the_shard_that_leased(open_crawl):
    f = open_crawl(shards=4, lease=5.0)
    f.push_many(Request(f"https://h{i}.example/") for i in range(12))
    popped = f.pop_many(12)
    assert len(popped) == 12 and len({f.shard_of(r) for r in popped}) == 4
    for k, request in enumerate(popped):
        if k % 3 == 0:
            f.done(request)
        elif k % 3 == 1:
            f.retry(request)
        else:
            f.fail(request, "boom")
    stats = f.stats()
    assert (stats["done"], stats["retried"], stats["failed"], stats["in_flight"], stats["pending"]) == (4, 4, 4, 0, 4)
    assert len(f.failed()) == 4 and f.requeue_failed(limit=3) == 3 and len(f) == 7
    assert f.drop(match=r"h1\.example|h2\.example").count >= 1
    f.drop_crawl()


def test_a_pop_serves_the_best_ready_request_of_every_shard(open_crawl):
    f = open_crawl(shards=4)
    requests = [Request(f"https://h{i}.example/{i}", priority=(i * 7) % 5) for i in range(80)]
    f.push_many(requests)
    got = []
    while (request := f.pop()) is not None:
        got.append(request.priority)
        assert len(f.shards_looked_at) >= 1
        f.done(request)
    assert len(got) == 80 and got == sorted(got, reverse=True)  # never one worse than another shard's best


def test_no_shard_starves_among_equals(open_crawl):
    f = open_crawl(shards=4)
    f.push_many(Request(f"https://h{i}.example/{k}") for i in range(40) for k in range(10))
    served = [f.shard_of(r) for r in f.pop_many(1) + [f.pop() for _ in range(99)]]
    windows = [set(served[at:at + 4]) for at in range(len(served) - 3)]
    print("shards of the first 12 pops:", served[:12])
    assert all(window == {0, 1, 2, 3} for window in windows)  # every shard in every 4 consecutive pops


def test_wait_replicas_names_a_step_no_replica_acknowledged(open_crawl):
    f = open_crawl(shards=2, wait_replicas=1, wait_timeout=0.05)  # the session's server has no replicas
    with pytest.raises(NotReplicated, match=r"push: applied on the master of df:\{.*\}:meta at redis://.*, but only "
                                            r"0 of the 1 replicas asked for \(wait_replicas\) had it after 0.05s"):
        f.push(Request("https://a.example/"))
    g = open_crawl()
    assert len(g) == 1 and g.pop().url == "https://a.example/"  # the step itself was applied
    with pytest.raises(ValueError, match="wait_replicas must be a whole number of at least 0"):
        open_crawl(wait_replicas=-1)


def test_verify_checks_and_repairs_every_shard(open_crawl, redis_server, redis_url, crawl_name):
    from diskfrontier.redisfrontier.verify import verify_crawl

    f = open_crawl(shards=3)
    f.push_many(Request(f"https://h{i}.example/{i}") for i in range(60))
    f.close()
    assert verify_crawl(redis_url, crawl_name).sound
    tag = shard_tags(crawl_name, 3)[2]
    client = redis_server.client()
    client.delete(f"df:{{{tag}}}:ready")  # an index of shard 2 lost
    report = verify_crawl(redis_url, crawl_name)
    assert report.findings and all(finding.key.startswith(f"df:{{{tag}}}:") for finding in report.findings)
    assert verify_crawl(redis_url, crawl_name, repair=True).repaired
    assert verify_crawl(redis_url, crawl_name).sound
    assert len(open_crawl().pop_many(60)) == 60


def test_clients_and_release_cover_every_shard(open_crawl, redis_url, crawl_name):
    from diskfrontier.redisfrontier.management import clients, release, summaries

    f = open_crawl(shards=3, lease=30.0)
    f.push_many(Request(f"https://h{i}.example/") for i in range(30))
    worker = open_crawl(renew=False, lease=30.0)
    held = worker.pop_many(25)  # a pop takes from the best shard first, then the next: 25 of 30 span all 3
    assert len({worker.shard_of(r) for r in held}) == 3  # leases on every shard
    [summary] = summaries(redis_url, memory=False)
    assert (summary.in_flight, summary.pending, summary.seen) == (25, 5, 30)
    mine = {c.client: c for c in clients(redis_url, crawl_name)}[worker.client_id]
    assert mine.leases == 25 and mine.live
    released = release(redis_url, crawl_name, client=worker.client_id, force=True)
    assert released.released == 25
    assert f.stats()["in_flight"] == 0 and len(f) == 30
