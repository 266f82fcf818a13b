"""The seen set of a Redis crawl: buckets that grow with the crawl (linear hashing in the scripts), exact
dedupe across splits and across a client killed under load, crawls of the earlier layout, and the Bloom
filter's false positives against its error rate."""

from __future__ import annotations

import hashlib
import math
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from paths import KITS

from diskfrontier import FrontierError, RedisFrontier, Request
from diskfrontier.redisfrontier import lua
from diskfrontier.redisfrontier.verify import verify_crawl
from diskfrontier.transfer.copy import copy_crawl

CHILD = os.path.join(KITS, "seen_push_child.py")


def key(crawl: str, suffix: str) -> str:
    return f"df:{{{crawl}}}:{suffix}"


def fingerprints(count: int, salt: str) -> list[bytes]:
    return [hashlib.sha1(f"{salt}-{i}".encode(), usedforsecurity=False).digest() for i in range(count)]


def check_buckets(client, crawl: str) -> tuple[int, int]:
    """Every member of every bucket is in the bucket linear hashing names for it, and every bucket is
    one the crawl has; returns (bucket count, largest bucket)."""
    level, split = (int(x) for x in client.hmget(key(crawl, "meta"), "seen_level", "seen_split"))
    count = 2 ** level + split
    largest = 0
    for name in client.scan_iter(match=key(crawl, "k:*")):
        number = int(name.decode().rpartition(":")[2], 16)
        assert number < count
        members = client.smembers(name)
        largest = max(largest, len(members))
        for member in members:
            low = int(member) & 0xFFFFFFFF
            bucket = low % 2 ** level
            if bucket < split:
                bucket = low % 2 ** (level + 1)
            assert bucket == number, (member, number)
    return count, largest


def test_buckets_grow_with_pushes_and_dedupe_stays_exact_across_splits(open_crawl, redis_server, crawl_name):
    client = redis_server.client()
    f = open_crawl()
    assert (f.dedupe, f.stats()["seen_layout"], f.stats()["seen_buckets"]) == ("exact", "set64", 1)
    fill = int(client.hget(key(crawl_name, "meta"), "seen_fill"))
    rng = random.Random(7)
    model: set[str] = set()
    buckets_seen = []
    urls = [f"https://h{i % 30}.example/{i}" for i in range(12_000)]
    for step in range(40):  # batches of new URLs mixed with ones pushed before
        batch = rng.sample(urls[: 300 * (step + 2)], 400)
        queued = f.push_many(Request(u) for u in batch)
        fresh = len(set(batch) - model)
        model.update(batch)
        assert queued == fresh
        buckets_seen.append(f.stats()["seen_buckets"])
    assert buckets_seen == sorted(buckets_seen) and buckets_seen[-1] > buckets_seen[0]
    count, largest = check_buckets(client, crawl_name)
    assert count == f.stats()["seen_buckets"] and len(model) <= fill * count + 3 * fill
    assert largest < 512  # every bucket still an intset
    assert {client.object("encoding", name) for name in client.scan_iter(match=key(crawl_name, "k:*"))} == {b"intset"}
    stats = f.stats()
    assert stats["seen"] == len(model)
    assert f.push_many(Request(u) for u in sorted(model)) == 0
    assert all(f.has_seen(Request(u).fingerprint) for u in model)
    assert not any(f.has_seen(Request(u).fingerprint) for u in set(urls) - model)
    assert verify_crawl(redis_server.url, crawl_name).sound


def test_mark_seen_grows_the_buckets_too_and_stays_exact(open_crawl, redis_server, crawl_name):
    f = open_crawl()
    marked = fingerprints(30_000, "m")
    assert f.mark_seen(marked) == 30_000
    assert f.mark_seen(marked[::7]) == 0
    count, largest = check_buckets(redis_server.client(), crawl_name)
    assert count > 30_000 // 512 and largest < 512
    assert all(f.has_seen(x) for x in marked[::5])
    assert not any(f.has_seen(x) for x in fingerprints(2_000, "other"))
    assert f.push(Request("https://a.example/")) is True


@pytest.mark.crash
def test_a_client_killed_under_load_leaves_the_seen_set_exact(redis_server, crawl_name):
    total = 40_000
    child = subprocess.Popen([sys.executable, CHILD, redis_server.url, crawl_name, str(total)],
                             stderr=subprocess.PIPE)
    assert child.stderr is not None
    client = redis_server.client()
    deadline = time.monotonic() + 120
    kills_at = random.Random(crawl_name).randrange(5_000, 30_000)
    while int(client.hget(key(crawl_name, "meta"), "seen") or 0) < kills_at:
        assert child.poll() is None, child.stderr.read().decode()
        assert time.monotonic() < deadline, "the child pushed too slowly"
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert verify_crawl(redis_server.url, crawl_name).sound  # seen counter == members, buckets in range
    check_buckets(client, crawl_name)
    with RedisFrontier(redis_server.url, crawl=crawl_name) as f:
        seen = f.stats()["seen"]
        everything = [Request(f"https://h{i % 50}.example/{i}") for i in range(total)]
        was_seen = [f.has_seen(r.fingerprint) for r in everything]
        assert sum(was_seen) == seen
        assert f.push_many(everything) == total - seen  # exactly those it had not seen
        assert f.push_many(everything) == 0
        assert f.stats()["seen"] == total
    check_buckets(client, crawl_name)


def test_a_crawl_of_the_earlier_layout_keeps_it_and_works(redis_server, crawl_name):
    client = redis_server.client()
    with RedisFrontier(redis_server.url, crawl=crawl_name, dedupe="hash", expected_urls=1_000) as f:
        assert f.push_many(Request(f"https://a.example/{i}") for i in range(500)) == 500
    meta = client.hgetall(key(crawl_name, "meta"))
    assert b"seen_layout" not in meta and meta[b"bits"] == b"8"  # as crawls made before it have it
    assert meta[b"v"] == b"1r"  # the format of hash buckets, its records marked as able to hold a revisit state
    assert client.keys(key(crawl_name, "s:*")) and not client.keys(key(crawl_name, "k:*"))
    with RedisFrontier(redis_server.url, crawl=crawl_name) as f:  # opened with the defaults
        stats = f.stats()
        assert (stats["seen_layout"], stats["seen_buckets"], f.dedupe) == ("hash", 256, "exact")
        assert f.push_many(Request(f"https://a.example/{i}") for i in range(1_000)) == 500
        assert f.mark_seen([Request("https://a.example/0").fingerprint, b"own"]) == 1
        assert f.has_seen(b"own") and f.has_seen(Request("https://a.example/999").fingerprint)
        assert len(set(f.seen_fingerprints())) == 1_001
        assert f.stats()["seen"] == 1_001
    assert not client.keys(key(crawl_name, "k:*"))
    assert verify_crawl(redis_server.url, crawl_name).sound
    with pytest.raises(FrontierError, match="fixed when it is made"):
        RedisFrontier(redis_server.url, crawl=crawl_name, dedupe="bloom")


def test_bloom_false_positives_stay_within_the_error_rate(open_crawl, redis_server, crawl_name):
    rate = 0.01
    f = open_crawl(dedupe="bloom", error_rate=rate)
    assert f.dedupe == "bloom" and f.stats()["seen_layout"] == "bloom"
    inserted = fingerprints(150_000, "in")  # past the first filter's 100,000: two filters
    fresh = f.mark_seen(inserted)
    assert f.stats()["bloom_filters"] == 2
    assert 150_000 - fresh <= 150_000 * rate  # a few may be taken for seen already (false positives)
    assert f.mark_seen(inserted[::10]) == 0  # no false negatives
    assert all(f.has_seen(x) for x in inserted[:2_000])
    sample = 20_000
    new = fingerprints(sample, "new")
    false = sum(f.has_seen(x) for x in new)
    # the rate stays under error_rate: a bound of the binomial count at that rate, 5 standard deviations up
    assert false <= sample * rate + 5 * math.sqrt(sample * rate * (1 - rate))
    assert f.mark_seen(new) == sample - false  # what has_seen calls seen, a push refuses
    assert verify_crawl(redis_server.url, crawl_name).sound
    assert f.push(Request("https://a.example/")) is True and f.push(Request("https://a.example/")) is False
    with pytest.raises(FrontierError, match="fixed when it is made"):
        RedisFrontier(redis_server.url, crawl=crawl_name, dedupe="exact")


def test_copy_of_a_bloom_crawl_is_refused_and_of_a_set_crawl_keeps_dedupe(open_crawl, redis_url, crawl_name,
                                                                             tmp_path):
    bloom = open_crawl(dedupe="bloom")
    bloom.push_many(Request(f"https://a.example/{i}") for i in range(10))
    with pytest.raises(FrontierError, match="Bloom filter, whose fingerprints cannot be listed"):
        copy_crawl(redis_url, str(tmp_path / "job"), from_crawl=crawl_name)
    with pytest.raises(FrontierError, match="Bloom filter"):
        list(bloom.seen_fingerprints())
    assert not os.path.exists(tmp_path / "job")
    exact = RedisFrontier(redis_url, crawl=crawl_name + "-x")
    try:
        done = [Request(f"https://d.example/{i}") for i in range(3_000)]
        done.append(Request("https://d.example/own", fingerprint=b"another fingerprinter's key"))
        exact.push_many(done)
        while (request := exact.pop()) is not None:
            exact.done(request)
        exact.push_many(Request(f"https://p.example/{i}") for i in range(50))
    finally:
        exact.close()
    report = copy_crawl(redis_url, str(tmp_path / "job"), from_crawl=crawl_name + "-x")
    assert any("keeps 64 bits of each fingerprint" in note for note in report.notes)
    copy_crawl(str(tmp_path / "job"), redis_url, to_crawl=crawl_name + "-back")
    from diskfrontier import Frontier

    with Frontier(str(tmp_path / "job")) as job:
        assert job.push_many(done) == 0 and len(job) == 50
        assert job.push(Request("https://d.example/new")) is True
    with RedisFrontier(redis_url, crawl=crawl_name + "-back", create=False) as back:
        assert back.push_many(done) == 0 and back.stats()["seen"] == 3_051
        assert back.push(Request("https://d.example/new")) is True


def test_verify_names_a_bucket_past_the_last_and_bloom_counts_that_do_not_add_up(open_crawl, redis_server,
                                                                                 crawl_name):
    client = redis_server.client()
    f = open_crawl()
    f.mark_seen(fingerprints(2_000, "v"))
    count = f.stats()["seen_buckets"]
    stray = key(crawl_name, f"k:{count:x}")
    client.sadd(stray, 12345)
    client.hincrby(key(crawl_name, "meta"), "seen", 1)
    findings = [str(x) for x in verify_crawl(redis_server.url, crawl_name).findings]
    assert findings == [f"{stray}: is not one of the {count} seen buckets (seen_level "
                        f"{client.hget(key(crawl_name, 'meta'), 'seen_level').decode()}, seen_split "
                        f"{client.hget(key(crawl_name, 'meta'), 'seen_split').decode()}): the fingerprints it holds "
                        f"are never looked up"]
    bloom = RedisFrontier(redis_server.url, crawl=crawl_name + "-b", dedupe="bloom")
    try:
        bloom.mark_seen(fingerprints(1_000, "b"))
        assert verify_crawl(redis_server.url, crawl_name + "-b").sound
        client.hincrby(key(crawl_name + "-b", "meta"), "bloom_last", -10)
        assert [str(x) for x in verify_crawl(redis_server.url, crawl_name + "-b").findings] == [
            f"{key(crawl_name + '-b', 'meta')}: field seen counts 1000 fingerprints; the Bloom filters count 990"]
    finally:
        bloom.close()


@pytest.mark.parametrize("dedupe", ["exact", "bloom", "hash"])
def test_each_shard_keeps_a_seen_set_of_the_crawl_s_layout(redis_server, crawl_name, dedupe):
    client = redis_server.client()
    with RedisFrontier(redis_server.url, crawl=crawl_name, shards=3, dedupe=dedupe) as f:
        requests = [Request(f"https://h{i % 40}.example/{i}") for i in range(3_000)]
        assert f.push_many(requests) == 3_000 and f.push_many(requests) == 0
        marked = fingerprints(1_000, "s")
        assert f.mark_seen(marked) == 1_000 and f.mark_seen(marked) == 0
        assert all(f.has_seen(r.fingerprint) for r in requests[::10]) and all(f.has_seen(x) for x in marked[::10])
        assert not any(f.has_seen(x) for x in fingerprints(300, "never"))
        stats = f.stats()
        assert stats["seen"] == 4_000 and stats["dedupe"] == ("bloom" if dedupe == "bloom" else "exact")
        tags = [crawl_name, *client.hget(key(crawl_name, "meta"), "tags").decode().split(",")]
    layouts = {client.hget(f"df:{{{tag}}}:meta", "seen_layout") for tag in tags}
    assert layouts == {None if dedupe == "hash" else {"exact": b"set64", "bloom": b"bloom"}[dedupe]}
    assert verify_crawl(redis_server.url, crawl_name).sound


@pytest.mark.parametrize("dedupe, shards, version", [("exact", 1, b"2r"), ("bloom", 1, b"2r"), ("exact", 3, b"2rs")])
def test_a_client_that_reads_only_the_earlier_format_refuses_a_crawl_of_a_newer_seen_layout(
        redis_server, crawl_name, dedupe, shards, version):
    client = redis_server.client()
    with RedisFrontier(redis_server.url, crawl=crawl_name, dedupe=dedupe, shards=shards) as f:
        f.push(Request("https://a.example/"))
    assert client.hget(key(crawl_name, "meta"), "v") == version
    # what a client from before these layouts does at open: its OPEN reads formats "1" and "1s" only
    earlier = client.register_script(lua.OPEN)
    answer = earlier(keys=[key(crawl_name, "meta")], args=["1 1s", "", "", "", "", "8", "open", "lifo", ""])
    assert answer == [-1, version]  # refused, named by its format: it would look for the seen set elsewhere
    client.hset(key(crawl_name, "meta"), "v", b"1r" if shards == 1 else b"1rs")  # a layout under the wrong format
    assert not verify_crawl(redis_server.url, crawl_name).sound
