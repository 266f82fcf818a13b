"""A Redis crawl that lost a whole shard, its shard count or seen buckets is named (CrawlDamaged) by open,
by the steps that read what is missing and by verify, never opened as a smaller crawl or left to accept
finished URLs again; verify --repair says what it cannot bring back and never calls such a crawl sound.
Against a real redis-server."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner
from paths import KITS

from diskfrontier import CrawlDamaged, RedisFrontier, Request
from diskfrontier.cli import main
from diskfrontier.redisfrontier.shards import shard_tags
from diskfrontier.redisfrontier.verify import verify_crawl

HOSTS = 40
FINISHED = 20


def urls(count: int) -> list[str]:
    return [f"https://h{i % HOSTS}.example/{i}" for i in range(count)]


def made(redis_url: str, crawl: str, *, shards: int = 3, count: int = 595, dedupe: str = "exact"):
    """A crawl of ``count`` URLs of which ``FINISHED`` were popped and done; returns (pending, finished) URLs."""
    with RedisFrontier(redis_url, crawl=crawl, shards=shards, dedupe=dedupe) as f:
        assert f.push_many(Request(url) for url in urls(count)) == count
        finished = f.pop_many(FINISHED)
        f.done_many(finished)
    done = sorted(r.url for r in finished)
    return sorted(set(urls(count)) - set(done)), done


def keys_of(client, tag: str) -> list[bytes]:
    return list(client.scan_iter(match=f"df:{{{tag}}}:*".replace("{", "[{]").replace("}", "[}]"), count=1000))


def verify_cli(redis_url: str, crawl: str, *more: str):
    return CliRunner().invoke(main, ["verify", redis_url, "--crawl", crawl, *more])


def drain(f: RedisFrontier) -> list[str]:
    out = []
    while (request := f.pop()) is not None:
        out.append(request.url)
        f.done(request)
    return out


# ------------------------------------------------------------------ a lost shard
def test_a_crawl_that_lost_a_shard_is_refused_at_open_and_verify_names_it(redis_server, redis_url, crawl_name):
    pending, _ = made(redis_url, crawl_name)
    assert len(pending) == 575
    client = redis_server.client()
    tag = shard_tags(crawl_name, 3)[2]
    lost = keys_of(client, tag)
    assert f"df:{{{tag}}}:meta".encode() in lost and f"df:{{{tag}}}:sentinel".encode() in lost
    client.delete(*lost)
    gone = rf"df:\{{{tag}\}}:meta: .*shard 2 of crawl '{crawl_name}' is gone"
    with pytest.raises(CrawlDamaged, match=gone) as caught:
        RedisFrontier(redis_url, crawl=crawl_name)
    assert "verify" in str(caught.value)
    assert keys_of(client, tag) == []  # open made nothing in its place
    result = verify_cli(redis_url, crawl_name)
    assert result.exit_code == 1
    assert f"damaged: df:{{{tag}}}:meta: shard 2 of crawl '{crawl_name}' is gone" in result.output


def test_a_running_client_names_a_shard_lost_under_it(redis_server, redis_url, crawl_name):
    made(redis_url, crawl_name)
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        tag = shard_tags(crawl_name, 3)[2]
        client = redis_server.client()
        client.delete(*keys_of(client, tag))
        with pytest.raises(CrawlDamaged, match=rf"df:\{{{tag}\}}:meta"):
            len(f)
        with pytest.raises(CrawlDamaged, match=rf"df:\{{{tag}\}}:meta"):
            drain(f)


def test_a_crawl_whose_meta_lost_its_shard_count_is_refused_at_open(redis_server, redis_url, crawl_name):
    made(redis_url, crawl_name)
    client = redis_server.client()
    meta = f"df:{{{crawl_name}}}:meta"
    assert client.hdel(meta, "shards") == 1
    with pytest.raises(CrawlDamaged, match=rf"{meta.replace('{', '[{]').replace('}', '[}]')}: .*shards"):
        RedisFrontier(redis_url, crawl=crawl_name)
    result = verify_cli(redis_url, crawl_name)
    assert result.exit_code == 1 and "shards" in result.output


# ------------------------------------------------------------------ lost seen buckets
@pytest.mark.parametrize("which", ["one", "all"])
def test_lost_seen_buckets_are_named_at_open_and_by_a_push_of_a_finished_url(redis_server, redis_url, crawl_name,
                                                                               which):
    _, finished = made(redis_url, crawl_name, shards=1)
    client = redis_server.client()
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        buckets = sorted(client.scan_iter(match=f"df:{{{crawl_name}}}:k:*".replace("{", "[{]").replace("}", "[}]")))
        assert len(buckets) >= 3
        client.delete(*(buckets[:1] if which == "one" else buckets))
        accepted = []
        with pytest.raises(CrawlDamaged, match=r":k:[0-9a-f]+: is gone"):
            for url in finished:
                if f.push(Request(url)):
                    accepted.append(url)
        assert accepted == []
    with pytest.raises(CrawlDamaged, match=r":k:[0-9a-f]+: is gone"):
        RedisFrontier(redis_url, crawl=crawl_name)
    result = verify_cli(redis_url, crawl_name)
    assert result.exit_code == 1 and ":k:" in result.output


def test_a_crawl_whose_shard_0_is_gone_is_not_made_again_beside_its_other_shards(redis_server, redis_url, crawl_name):
    made(redis_url, crawl_name)
    client = redis_server.client()
    meta = f"df:{{{crawl_name}}}:meta"
    client.delete(meta)  # its meta alone: the sentinel is still there
    with pytest.raises(CrawlDamaged, match=r"meta: is gone while .*sentinel is there"):
        RedisFrontier(redis_url, crawl=crawl_name)
    client.delete(*keys_of(client, crawl_name))  # every key of shard 0: shards 1 and 2 are still there
    with pytest.raises(CrawlDamaged, match=rf"meta: is gone while shard 1 of the crawl is there .*shard 0 of crawl "
                                           rf"'{crawl_name}'"):
        RedisFrontier(redis_url, crawl=crawl_name)
    assert keys_of(client, crawl_name) == []  # nothing was made
    result = verify_cli(redis_url, crawl_name)
    assert result.exit_code == 1 and f"damaged: {meta}: is gone while its shard 1" in result.output


# ------------------------------------------------------------------ what verify --repair can and cannot do
def test_repair_of_a_lost_shard_makes_it_again_empty_and_records_the_loss_for_good(redis_server, redis_url,
                                                                                    crawl_name):
    pending, finished = made(redis_url, crawl_name)
    client = redis_server.client()
    tag = shard_tags(crawl_name, 3)[2]
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        on_lost = {url for url in pending if f.shard_of(Request(url)) == 2}
        finished_elsewhere = [url for url in finished if f.shard_of(Request(url)) != 2]
    client.delete(*keys_of(client, tag))
    result = verify_cli(redis_url, crawl_name, "--repair")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == (f"damaged: df:{{{tag}}}:meta: shard 2 of crawl '{crawl_name}' is gone: its keys were "
                        f"deleted or evicted, with the requests of its hosts (how many is unknown: its counters went "
                        f"with it) and their seen fingerprints")
    assert (f"note: df:{{{tag}}}:meta: cannot be rebuilt: shard 2 was lost whole, with the requests of its hosts and "
            f"their seen fingerprints (the URLs of its hosts may be fetched again); made again empty, the loss "
            f"recorded in field lost_shard, named by every verify from now on") in lines
    again = verify_cli(redis_url, crawl_name)  # never sound again
    assert again.exit_code == 1
    assert again.output.startswith(f"damaged: df:{{{tag}}}:meta: records what verify --repair could not bring back: "
                                   f"this shard was lost and made again empty by verify --repair")
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        assert f.push_many(Request(url) for url in finished_elsewhere) == 0  # what the other shards saw stays seen
        assert sorted(drain(f)) == sorted(set(pending) - on_lost)


def test_repair_of_a_lost_shard_count_writes_it_again_and_loses_nothing(redis_server, redis_url, crawl_name):
    pending, finished = made(redis_url, crawl_name)
    client = redis_server.client()
    client.hdel(f"df:{{{crawl_name}}}:meta", "shards")
    report = verify_crawl(redis_url, crawl_name, repair=True)
    assert [str(x) for x in report.findings] == [
        f"df:{{{crawl_name}}}:meta: field shards is missing, while its sentinel says the crawl has 3 shards (the crawl "
        f"would open as one of shard 0 alone)"]
    assert report.repaired and verify_crawl(redis_url, crawl_name).sound  # nothing was lost
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        assert f.shards == 3 and len(f) == len(pending)
        assert f.push_many(Request(url) for url in finished) == 0
        assert sorted(drain(f)) == pending


# ------------------------------------------------------------------ crawls made before the sentinels said more
def test_a_sharded_crawl_made_before_its_sentinels_named_their_shard_is_sealed_at_its_first_open(
        redis_server, redis_url, crawl_name):
    made(redis_url, crawl_name)
    client = redis_server.client()
    tags = shard_tags(crawl_name, 3)
    for tag in tags:  # what an earlier version wrote: '1' in every shard
        client.set(f"df:{{{tag}}}:sentinel", "1")
    client.delete(*keys_of(client, tags[1]))  # and a shard missing: such a crawl cannot tell lost from not made
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        assert [client.get(f"df:{{{tag}}}:sentinel") for tag in tags] == [b"0/3", b"1/3", b"2/3"]
        assert f.shards == 3 and verify_crawl(redis_url, crawl_name).sound
    client.delete(*keys_of(client, tags[1]))
    with pytest.raises(CrawlDamaged, match=r"shard 1 of crawl .* is gone"):  # from now on, a lost shard is named
        RedisFrontier(redis_url, crawl=crawl_name)


def test_a_crawl_made_before_the_sentinel_opens_and_gets_one(redis_server, redis_url, crawl_name):
    pending, _ = made(redis_url, crawl_name, shards=1)
    client = redis_server.client()
    client.delete(f"df:{{{crawl_name}}}:sentinel")
    client.hdel(f"df:{{{crawl_name}}}:meta", "sentinel")
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        assert client.get(f"df:{{{crawl_name}}}:sentinel") == b"1" and len(f) == len(pending)


# ------------------------------------------------------------------ the map of the seen buckets
def sha1s(count: int, salt: str) -> list[bytes]:
    return [hashlib.sha1(f"{salt}-{i}".encode(), usedforsecurity=False).digest() for i in range(count)]


def bucket_keys(client, crawl: str) -> list[bytes]:
    return sorted(client.scan_iter(match=f"df:[{{]{crawl}[}}]:k:*", count=1000))


def test_fingerprints_marked_bucket_by_bucket_are_not_taken_for_lost_buckets(redis_server, redis_url, crawl_name):
    # what a copy sends: fingerprints read bucket after bucket, so that whole buckets stay empty for a while
    marked = sorted(sha1s(6_000, "order"), key=lambda fp: int.from_bytes(fp[4:8], "big") % 64)
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        for at in range(0, len(marked), 500):
            assert f.mark_seen(marked[at:at + 500]) == 500
            assert f.has_seen(marked[at])
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        assert f.mark_seen(marked) == 0 and f.stats()["seen"] == 6_000
    assert verify_crawl(redis_url, crawl_name).sound


def test_a_bucket_lost_is_named_by_has_seen_and_a_push_to_a_bucket_never_made_is_not(redis_server, redis_url,
                                                                                     crawl_name):
    client = redis_server.client()
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        marked = sha1s(2_000, "h")
        f.mark_seen(marked)
        buckets = bucket_keys(client, crawl_name)
        client.delete(buckets[-1])
        with pytest.raises(CrawlDamaged, match=r":k:[0-9a-f]+: is gone"):
            for fingerprint in marked:
                f.has_seen(fingerprint)


def test_a_crawl_made_before_the_seen_map_gets_it_at_open_and_then_names_a_lost_bucket(redis_server, redis_url,
                                                                                     crawl_name):
    _, finished = made(redis_url, crawl_name, shards=1)
    client = redis_server.client()
    meta, seen_map = f"df:{{{crawl_name}}}:meta", f"df:{{{crawl_name}}}:seen_map"
    mapped = client.get(seen_map)
    client.delete(seen_map)  # as a crawl made by an earlier version has it: no map, no field
    client.hdel(meta, "seen_map")
    RedisFrontier(redis_url, crawl=crawl_name).close()
    assert client.get(seen_map) == mapped and client.hget(meta, "seen_map") == b"1"
    client.delete(bucket_keys(client, crawl_name)[0])
    with pytest.raises(CrawlDamaged, match=r":k:0: is gone"):
        RedisFrontier(redis_url, crawl=crawl_name)
    assert finished


def test_a_lost_seen_map_is_named_and_repair_makes_it_again_losing_nothing(redis_server, redis_url, crawl_name):
    pending, finished = made(redis_url, crawl_name, shards=1)
    client = redis_server.client()
    seen_map = f"df:{{{crawl_name}}}:seen_map"
    client.delete(seen_map)
    with pytest.raises(CrawlDamaged, match=r":seen_map: is gone"):
        RedisFrontier(redis_url, crawl=crawl_name)
    report = verify_crawl(redis_url, crawl_name, repair=True)
    assert [x.key for x in report.findings] == [seen_map] and report.repaired
    assert verify_crawl(redis_url, crawl_name).sound  # the map is an index of the buckets: nothing was lost
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        assert f.push_many(Request(url) for url in finished) == 0 and sorted(drain(f)) == pending


def test_a_lost_part_of_a_bloom_filter_is_named_and_repair_records_the_loss(redis_server, redis_url, crawl_name):
    pending, finished = made(redis_url, crawl_name, shards=1, dedupe="bloom")
    client = redis_server.client()
    part = f"df:{{{crawl_name}}}:b:1:0"
    assert client.exists(part)
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        client.delete(part)
        with pytest.raises(CrawlDamaged, match=r":b:1:0: is gone"):
            f.push(Request(finished[0]))
    with pytest.raises(CrawlDamaged, match=r":b:1:0: is gone"):
        RedisFrontier(redis_url, crawl=crawl_name)
    report = verify_crawl(redis_url, crawl_name, repair=True)
    assert report.findings[0].key == part and report.repaired
    assert any("cannot be rebuilt: at least 595 seen fingerprints are lost" in note for note in report.notes)
    assert not verify_crawl(redis_url, crawl_name).sound
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        assert sorted(drain(f)) == pending  # the requests are all there; what was seen is what was lost


# ------------------------------------------------------------------ a maker killed while it makes the shards
@pytest.mark.crash
def test_a_maker_killed_while_it_makes_the_shards_leaves_a_crawl_the_next_open_finishes(redis_server, redis_url,
                                                                                         crawl_name):
    client = redis_server.client()
    shards = 64
    for attempt in range(20):  # the kill must fall between shard 0 and its sentinel: a few ms, usually the first try
        name = f"{crawl_name}-{attempt}"
        meta, sentinel = f"df:{{{name}}}:meta", f"df:{{{name}}}:sentinel"
        child = subprocess.Popen([sys.executable, os.path.join(KITS, "shard_maker_child.py"), redis_url, name,
                                  str(shards)], stderr=subprocess.DEVNULL)
        try:
            while child.poll() is None and not client.exists(meta):
                pass
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        if client.exists(meta) and not client.exists(sentinel):
            break
    else:
        pytest.fail("no kill fell while the shards were being made in 20 tries")
    tags = shard_tags(name, shards)
    made_before = sum(client.exists(f"df:{{{tag}}}:meta") for tag in tags)
    print(f"killed after {made_before} of {shards} shards were made (try {attempt + 1})")
    with RedisFrontier(redis_url, crawl=name) as f:
        assert f.shards == shards
        assert [client.get(f"df:{{{tag}}}:sentinel") for tag in tags] == [f"{i}/{shards}".encode()
                                                                        for i in range(shards)]
        assert f.push_many(Request(url) for url in urls(600)) == 600 and len(f) == 600
    assert verify_crawl(redis_url, name).sound


def test_the_settings_repair_gives_a_bloom_filter_are_the_scripts_own(redis_server, redis_url):
    from diskfrontier.redisfrontier import lua
    from diskfrontier.redisfrontier.wholeness import bloom_filter_settings, bloom_rate_of

    grow = lua._COMMON + lua._SEEN + """
SEEN = {n = 0, f = {}, rate = tonumber(ARGV[1]), count = 0}
local out = {}
for i = 1, 14 do bloom_grow(); out[i] = call('HGET', META, 'bloom_' .. i) end
return out
"""
    client = redis_server.client()
    for rate in ("1e-07", "0.001", "1e-15", "0.1", "3.3e-05"):
        made_by_scripts = client.eval(grow, 1, f"df:{{grow{rate}}}:meta", rate)
        assert made_by_scripts == [bloom_filter_settings(float(rate), i).encode() for i in range(1, 15)]
        assert abs(bloom_rate_of(made_by_scripts[0]) / float(rate) - 1) < 1e-4


def test_a_drop_stopped_part_way_leaves_a_crawl_the_next_open_takes_as_it_is(redis_server, redis_url, crawl_name):
    made(redis_url, crawl_name)
    client = redis_server.client()
    tags = shard_tags(crawl_name, 3)
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        readers = f._reader.readers
        readers[0].unseal()  # what drop_crawl does first: shard 0 reads as a crawl whose shards are being made
        readers[2].delete_keys()  # and then shard 2 went before the drop was stopped
    report = verify_crawl(redis_url, crawl_name)
    assert report.sound and report.notes == [
        f"shard 2 of crawl '{crawl_name}' (df:{{{tags[2]}}}:) is not made yet: the client that made the crawl stopped "
        f"before it; the next open makes it"]
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        assert f.shards == 3 and client.get(f"df:{{{crawl_name}}}:sentinel") == b"0/3"
        assert f.drop_crawl() > 0
    assert keys_of(client, crawl_name) == [] and all(keys_of(client, tag) == [] for tag in tags)
