"""A Redis crawl whose keys are evicted, deleted or garbled from outside: every case is named
(RedisMisconfigured, CrawlDamaged naming the key), never silent, never a raw exception; and
``verify --repair`` brings every stored request back. Against a real redis-server."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner
from redisserver import RedisServer

from diskfrontier import CrawlDamaged, FrontierError, LeaseExpired, RedisFrontier, RedisMisconfigured, Request
from diskfrontier.cli import main
from diskfrontier.redisfrontier.verify import verify_crawl

POLICY_EVERY = 0.11  # seconds: a little more than lua.POLICY_EVERY
URLS = [f"https://{host}.example/{n}" for host in ("a", "b", "c") for n in range(4)]


@pytest.fixture
def crawl(open_crawl):
    return open_crawl


@pytest.fixture
def client(redis_server):
    raw = redis_server.client()
    yield raw
    raw.config_set("maxmemory-policy", "noeviction")  # the server is shared by the session


def key(crawl_name: str, suffix: str) -> str:
    return f"df:{{{crawl_name}}}:{suffix}"


def pushed(frontier: RedisFrontier, urls=URLS) -> None:
    assert frontier.push_many([Request(url, priority=n % 3) for n, url in enumerate(urls)]) == len(urls)


def drain(frontier: RedisFrontier, timeout: float = 0.0, urls: list[str] | None = None) -> list[str]:
    """Pop and finish everything ready (waiting up to ``timeout`` for what is held back by time),
    into ``urls`` (so that what was done before an error is known)."""
    urls = [] if urls is None else urls
    while (request := frontier.pop(timeout=timeout)) is not None:
        urls.append(request.url)
        frontier.done(request)
    return urls


def run(*args: str):
    return CliRunner().invoke(main, list(args))


# ------------------------------------------------------------------ eviction switched on after open
@pytest.mark.parametrize("step", ["push", "pop", "done", "finished", "retry"])
def test_an_eviction_policy_set_after_open_is_refused_at_the_next_step(crawl, client, step):
    f = crawl(ack="wait")  # done() itself meets the refusal (by default the next step carries it)
    pushed(f)
    leased = f.pop()
    client.config_set("maxmemory-policy", "allkeys-lru")
    time.sleep(POLICY_EVERY)  # the scripts read the policy again at most this often
    calls = {
        "push": lambda: f.push(Request("https://d.example/")),
        "pop": f.pop,
        "done": lambda: f.done(leased),
        "finished": lambda: f.finished,
        "retry": lambda: f.retry(leased),
    }
    with pytest.raises(RedisMisconfigured, match=r"maxmemory-policy allkeys-lru now .*changed after the crawl was "
                                                  r"opened"):
        calls[step]()
    client.config_set("maxmemory-policy", "noeviction")
    f.done(leased)  # nothing was changed by the refused step
    assert sorted([leased.url, *drain(f)]) == sorted(URLS)


def test_keys_evicted_while_the_policy_was_switched_are_named_not_served(tmp_path):
    # 64 samples: Redis's LRU close to exact, so that the key idle longest goes first
    server = RedisServer(str(tmp_path / "small"), aof=False, extra=("--maxmemory", "3mb", "--maxmemory-samples", "64"))
    server.start()
    try:
        f = RedisFrontier(server.url, crawl="c", expected_urls=1000)
        time.sleep(1.1)  # the sentinel, never touched after open, is now idle longer than any other key (1 s clock)
        with pytest.raises(FrontierError, match="out of memory"):
            for n in range(100):
                f.push_many([Request(f"https://h{k % 50}.example/{n}/{k}") for k in range(200)])
        raw = server.client()
        raw.config_set("maxmemory-policy", "allkeys-lru")
        time.sleep(POLICY_EVERY)
        with pytest.raises(RedisMisconfigured, match="allkeys-lru"):
            f.push(Request("https://z.example/"))
        assert raw.info("stats")["evicted_keys"] > 0
        raw.config_set("maxmemory-policy", "noeviction")
        for _ in range(3):  # the keys that went are named at every step, nothing is handed out
            # the sentinel, idle longest, went first (CrawlDamaged), or the meta key too ("gone")
            with pytest.raises(FrontierError, match=r"(sentinel: is gone: Redis evicted keys|deleted or evicted)"):
                f.pop()
        f.close()
    finally:
        server.stop()


def test_a_sentinel_gone_is_named_at_the_next_step(crawl, client, crawl_name):
    f = crawl()
    pushed(f)
    client.delete(key(crawl_name, "sentinel"))
    with pytest.raises(CrawlDamaged, match="sentinel: is gone: Redis evicted keys") as caught:
        f.pop()
    assert caught.value.key == key(crawl_name, "sentinel")
    assert "verify" in str(caught.value)


# ------------------------------------------------------------------ index keys deleted from outside
def test_a_deleted_host_queue_is_named_and_repair_brings_every_request_back(crawl, client, crawl_name, redis_url):
    f = crawl()
    pushed(f)
    first = f.pop()
    client.delete(key(crawl_name, "q:b.example"))
    before: list[str] = []
    with pytest.raises(CrawlDamaged, match=r"q:b.example") as caught:
        drain(f, urls=before)
    assert "verify" in str(caught.value)
    report = verify_crawl(redis_url, crawl_name, repair=True)
    assert report.repaired and report.set_aside == []
    assert any("q:b.example" in str(finding) for finding in report.findings)
    assert verify_crawl(redis_url, crawl_name).sound
    f.done(first)
    rest = drain(f)
    assert sorted([first.url, *before, *rest]) == sorted(URLS)
    assert len(rest) == len(set(rest)) and f.finished


def test_a_deleted_host_queue_with_requests_waiting_for_a_time_is_named_when_nothing_is_left(
        crawl, client, crawl_name, redis_url):
    f = crawl()
    pushed(f, URLS[:4])
    f.push(Request("https://z.example/later"), not_before=time.time() + 3600)
    client.delete(key(crawl_name, "q:a.example"), key(crawl_name, "ready"))
    with pytest.raises(CrawlDamaged, match=r"meta: counts 4 requests queued \(pending, not delayed\) but the queues "
                                           r"of the hosts in .*hosts hold 0"):
        f.pop()
    assert verify_crawl(redis_url, crawl_name, repair=True).repaired
    assert sorted(drain(f)) == sorted(URLS[:4])


@pytest.mark.slow
def test_a_deleted_wait_set_is_named_and_repaired(crawl, client, crawl_name, redis_url):
    f = crawl(ack="wait")  # the done is applied before the key is deleted
    f.set_delay("a.example", 0.3)
    pushed(f, URLS[:2])
    first = f.pop()
    f.done(first)  # a.example now waits for its delay
    client.delete(key(crawl_name, "wait"))
    with pytest.raises(CrawlDamaged, match=r"q:a.example: holds 1 requests but its host is in neither .*ready"):
        f.pop()
    report = verify_crawl(redis_url, crawl_name, repair=True)
    assert [str(x) for x in report.findings] == [
        f"{key(crawl_name, 'q:a.example')}: holds 1 requests but a.example is in neither ready nor wait: they "
        f"would never be handed out"]
    assert drain(f, timeout=5) == [URLS[0]] and f.finished  # URLS[1] (priority 1) came first


@pytest.mark.slow
def test_a_deleted_delayed_set_is_named_and_repaired(crawl, client, crawl_name, redis_url):
    f = crawl()
    pushed(f, URLS[:2])
    f.push(Request("https://z.example/soon"), not_before=time.time() + 0.5)
    client.delete(key(crawl_name, "delayed"))
    with pytest.raises(CrawlDamaged, match=r"delayed: holds 0 requests but .* counts 1 delayed") as caught:
        f.pop()
    assert caught.value.key == key(crawl_name, "delayed")
    report = verify_crawl(redis_url, crawl_name, repair=True)
    assert f"{key(crawl_name, 'meta')}: field delayed counts 1; the crawl holds 0" in map(str, report.findings)
    assert sorted(drain(f, timeout=5)) == sorted([*URLS[:2], "https://z.example/soon"])


def test_a_deleted_lease_set_is_named_and_repair_makes_the_leased_requests_pending(
        crawl, client, crawl_name, redis_url):
    f = crawl(ack="wait")  # done() itself answers LeaseExpired (by default the next step counts it)
    pushed(f)
    leased = [f.pop(), f.pop()]
    client.delete(key(crawl_name, "lease"))
    with pytest.raises(CrawlDamaged, match=r"lease: holds 0 leases but .* counts 2 in flight") as caught:
        f.push(Request("https://d.example/"))
    assert caught.value.key == key(crawl_name, "lease")
    report = verify_crawl(redis_url, crawl_name, repair=True)
    assert report.repaired
    with pytest.raises(LeaseExpired):  # its lease is gone: the request is pending again, the old copy refused
        f.done(leased[0])
    rest = drain(f)
    assert sorted(rest) == sorted(URLS) and len(rest) == len(set(rest))


# ------------------------------------------------------------------ garbage values
GARBAGE = {
    # name: (what to write, the key (and field) the error must name)
    "meta pending": (lambda c, k: c.hset(k("meta"), "pending", "many"), "meta: field pending"),
    "meta seq": (lambda c, k: c.hset(k("meta"), "seq", "x1"), "meta: field seq"),
    "meta delay": (lambda c, k: c.hset(k("meta"), "delay", "soon"), "meta: field delay"),
    "req body": (lambda c, k: [c.hset(k("req"), rid, b"\xff\x00junk") for rid in c.hkeys(k("req"))], "req: field"),
    "req type": (lambda c, k: (c.delete(k("req")), c.set(k("req"), "x")), "req"),
    "q type": (lambda c, k: (c.delete(k("q:a.example")), c.set(k("q:a.example"), "x")), "q:a.example"),
    "host counter": (lambda c, k: c.hset(k("h:a.example"), "p", "lots"), "h:a.example:"),
    "host setting": (lambda c, k: c.hset(k("h:a.example"), "dl", "slow"), "h:a.example: field dl"),
    "host type": (lambda c, k: (c.delete(k("h:a.example")), c.sadd(k("h:a.example"), "x")), "h:a.example"),
    "lease type": (lambda c, k: c.set(k("lease"), "x"), "lease"),
    "owner type": (lambda c, k: c.set(k("owner"), "x"), "owner"),
    "delayed type": (lambda c, k: c.set(k("delayed"), "x"), "delayed"),
    "ready type": (lambda c, k: (c.delete(k("ready")), c.set(k("ready"), "x")), "ready"),
    "wait type": (lambda c, k: c.set(k("wait"), "x"), "wait"),
    "hosts type": (lambda c, k: (c.delete(k("hosts")), c.set(k("hosts"), "x")), "hosts"),
    "ready member": (lambda c, k: c.zadd(k("ready"), {"zzzzzzzzzzzznowhere": -100}), "req"),
}


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_a_garbage_value_is_named_with_its_key(crawl, client, crawl_name, redis_url, name):
    f = crawl()
    pushed(f, [*URLS, "https://z.example/"])
    write, where = GARBAGE[name]
    write(client, lambda suffix: key(crawl_name, suffix))
    with pytest.raises(CrawlDamaged) as caught:
        RedisFrontier(redis_url, crawl=crawl_name).close()  # open re-reads the settings
        f.push(Request("https://a.example/new"))
        f.push(Request("https://z.example/new"))
        while f.pop() is not None:
            pass
    assert key(crawl_name, where) in str(caught.value)
    assert "verify" in str(caught.value)


SEEN_BUCKETS = {"hash": ("s:*", "hlen"), "exact": ("k:*", "scard")}  # a layout's bucket keys, and their size


@pytest.mark.parametrize("dedupe", sorted(SEEN_BUCKETS))
def test_a_seen_bucket_of_the_wrong_type_is_named(crawl, client, crawl_name, dedupe):
    f = crawl(expected_urls=100, dedupe=dedupe)
    pushed(f, URLS[:1])
    (bucket,) = client.keys(key(crawl_name, SEEN_BUCKETS[dedupe][0]))
    client.delete(bucket)
    client.set(bucket, "x")
    with pytest.raises(CrawlDamaged, match=bucket.decode().replace("{", r"\{").replace("}", r"\}")):
        f.push(Request(URLS[0]))


def test_garbage_read_outside_the_scripts_is_named(crawl, client, crawl_name):
    f = crawl()
    pushed(f)
    client.hset(key(crawl_name, "meta"), "done", "lots")
    with pytest.raises(CrawlDamaged, match=r"meta: field done is b'lots', not a whole number"):
        f.stats()
    client.hset(key(crawl_name, "meta"), "done", "0")
    client.hset(key(crawl_name, "h:b.example"), "bu", "nan")
    with pytest.raises(CrawlDamaged, match=r"h:b.example: field bu is b'nan', not a finite number"):
        f.hosts()
    client.hdel(key(crawl_name, "h:b.example"), "bu")
    client.sadd(key(crawl_name, "hosts"), b"\xff\xfe")
    with pytest.raises(CrawlDamaged, match=r"hosts: member .* not UTF-8"):
        f.hosts()
    request = f.pop()
    f.fail(request, "broken")
    (rid,) = client.hkeys(key(crawl_name, "failinfo"))
    client.hset(key(crawl_name, "failinfo"), rid, b"x")
    with pytest.raises(CrawlDamaged, match="failinfo: field"):
        f.failed()
    with pytest.raises(CrawlDamaged, match="failinfo: field"):
        f.requeue_failed()


def test_repair_sets_aside_bodies_that_cannot_be_decoded_and_lists_them(crawl, client, crawl_name, redis_url):
    f = crawl()
    pushed(f)
    rid = sorted(client.hkeys(key(crawl_name, "req")))[0]
    body = client.hget(key(crawl_name, "req"), rid)
    client.hset(key(crawl_name, "req"), rid, b"garbage")
    report = verify_crawl(redis_url, crawl_name, repair=True)
    field = f"req:{rid.decode()}"
    assert report.set_aside == [f"{key(crawl_name, 'bad')} field {field}"]
    assert client.hget(key(crawl_name, "bad"), field) == b"garbage"
    assert verify_crawl(redis_url, crawl_name).sound
    rest = drain(f)
    assert len(rest) == len(URLS) - 1 and set(rest) < set(URLS)
    assert body is not None


# ------------------------------------------------------------------ the command
def test_verify_command_on_a_redis_crawl(crawl, client, crawl_name, redis_url):
    f = crawl()
    f.push_many([Request(f"https://a.example/{n}", priority=n) for n in range(3)])
    result = run("verify", redis_url, "--crawl", crawl_name)
    assert (result.exit_code, result.output) == (0, "sound: 3 stored requests checked\n")
    ids = [rid.decode() for rid in sorted(client.hkeys(key(crawl_name, "req")))]  # the last pushed first (LIFO)
    client.delete(key(crawl_name, "q:a.example"))
    client.hset(key(crawl_name, "req"), ids[0], b"junk")
    q, req, meta = key(crawl_name, "q:a.example"), key(crawl_name, "req"), key(crawl_name, "meta")
    damage = [
        f"damaged: {req}: field {ids[0]} does not hold a request diskfrontier stored (cut short)",
        *(f"damaged: {req}: holds pending request {rid} of a.example, which is in neither {q} nor "
          f"{key(crawl_name, 'delayed')}: it would never be handed out" for rid in ids[1:]),
        f"damaged: {key(crawl_name, 'h:a.example')}: field p counts 3; the crawl stores 2",
        f"damaged: {key(crawl_name, 'ready')}: holds {ids[0]}a.example, which is not the first request of {q}",
        f"damaged: {meta}: field pending counts 3; the crawl holds 2",
    ]
    result = run("verify", redis_url, "--crawl", crawl_name)
    assert (result.exit_code, result.output) == (1, "\n".join(damage) + "\n")
    result = run("verify", redis_url, "--crawl", crawl_name, "--json")
    assert result.exit_code == 1
    shown = json.loads(result.output)
    fields = ("sound", "checked", "repaired", "kept", "set_aside", "notes")
    assert tuple(shown[name] for name in fields) == (False, 3, False, 0, [], [])
    assert [f"damaged: {x['where']}: {x['problem']}" for x in shown["findings"]] == damage
    result = run("verify", redis_url, "--crawl", crawl_name, "--repair", "--json")
    shown = json.loads(result.output)
    assert (result.exit_code, shown["repaired"], shown["kept"], shown["set_aside"]) == (
        1, True, 2, [f"{key(crawl_name, 'bad')} field req:{ids[0]}"])
    client.hset(key(crawl_name, "req"), ids[0], b"junk")  # damaged again, as before, for the text output
    client.hdel(key(crawl_name, "bad"), f"req:{ids[0]}")
    client.hset(key(crawl_name, "meta"), "pending", 3)
    client.hset(key(crawl_name, "h:a.example"), "p", 3)
    client.delete(key(crawl_name, "q:a.example"))
    client.delete(key(crawl_name, "ready"))
    client.zadd(key(crawl_name, "ready"), {f"{ids[0]}a.example": -2})
    client.hset(key(crawl_name, "h:a.example"), "r", f"{ids[0]}a.example")
    assert run("verify", redis_url, "--crawl", crawl_name).output == "\n".join(damage) + "\n"
    result = run("verify", redis_url, "--crawl", crawl_name, "--repair")
    assert (result.exit_code, result.output) == (1, "\n".join(damage) + (
        f"\nrepaired: rebuilt the indexes and counts of crawl '{crawl_name}' from its 2 stored requests; set aside: "
        f"{key(crawl_name, 'bad')} field req:{ids[0]}\n"))
    result = run("verify", redis_url, "--crawl", crawl_name)
    assert (result.exit_code, result.output) == (0, "sound: 2 stored requests checked\n")
    assert drain(f) == ["https://a.example/1", "https://a.example/0"]  # the set-aside a.example/2 is not served


def test_verify_command_on_redis_needs_a_crawl_that_exists(redis_url, crawl_name):
    result = run("verify", redis_url)
    assert result.exit_code == 2
    assert "name the crawl in it with --crawl NAME" in result.output
    result = run("verify", redis_url, "--crawl", crawl_name)
    assert (result.exit_code, result.output) == (
        1, f"Error: there is no crawl '{crawl_name}' in Redis at {redis_url} (no key {key(crawl_name, 'meta')})\n")


def test_repair_renames_aside_a_key_of_the_wrong_type_and_fixes_garbage_counters(crawl, client, crawl_name, redis_url):
    f = crawl()
    pushed(f)
    host = key(crawl_name, "h:a.example")
    client.delete(host)
    client.set(host, "not a hash")
    client.hset(key(crawl_name, "meta"), "done", "lots")
    report = verify_crawl(redis_url, crawl_name)
    assert [str(x) for x in report.findings] == [
        f"{host}: is a string, not a hash",
        f"{key(crawl_name, 'meta')}: field done is b'lots', not a whole number"]
    report = verify_crawl(redis_url, crawl_name, repair=True)
    assert report.set_aside == [key(crawl_name, "bad:h:a.example")] and report.notes == []
    assert client.get(key(crawl_name, "bad:h:a.example")) == b"not a hash"
    assert verify_crawl(redis_url, crawl_name).sound
    assert f.stats()["done"] == 0
    assert sorted(drain(f)) == sorted(URLS)


def test_verify_names_an_evicting_server_and_repair_refuses_it(crawl, client, crawl_name, redis_url):
    pushed(crawl())
    client.config_set("maxmemory-policy", "volatile-lru")
    result = run("verify", redis_url, "--crawl", crawl_name)
    assert (result.exit_code, result.output) == (
        1, "damaged: maxmemory-policy: is volatile-lru: Redis may drop keys of the crawl; set noeviction\n")
    result = run("verify", redis_url, "--crawl", crawl_name, "--repair")
    assert result.exit_code == 1
    assert result.output.startswith("Error: verify --repair: Redis has maxmemory-policy volatile-lru")


@pytest.mark.parametrize("dedupe", sorted(SEEN_BUCKETS))
def test_verify_names_seen_buckets_that_went_and_repair_records_the_loss(crawl, client, crawl_name, redis_url, dedupe):
    f = crawl(expected_urls=100, dedupe=dedupe)
    pushed(f)
    pattern, size = SEEN_BUCKETS[dedupe]
    buckets = client.keys(key(crawl_name, pattern))
    gone = getattr(client, size)(buckets[0])
    client.delete(buckets[0])
    meta = key(crawl_name, "meta")
    report = verify_crawl(redis_url, crawl_name, repair=True)
    named = [] if dedupe == "hash" else [  # (the buckets of a hash crawl are not mapped: only the count tells)
        f"{buckets[0].decode()}: is gone: Redis evicted it or something deleted it, with the seen fingerprints it "
        f"held: the URLs they stand for would be accepted again, and repair cannot bring them back"]
    assert [str(x) for x in report.findings] == [*named,
        f"{meta}: field seen counts {len(URLS)} fingerprints; the seen buckets hold "
        f"{len(URLS) - gone} (buckets were evicted or deleted: the URLs they held would be accepted again, and "
        f"repair cannot bring them back)"]
    assert report.repaired and report.notes == [
        f"{meta}: cannot be rebuilt: at least {gone} seen fingerprints are lost (their buckets were deleted or "
        f"evicted): the URLs they stand for may be fetched again; recorded in field lost_seen, named by every verify "
        f"from now on",
        f"left after repair: {meta}: records what verify --repair could not bring back: at least {gone} seen "
        f"fingerprints are lost: the URLs they stand for may be fetched again"]
    after = verify_crawl(redis_url, crawl_name)  # never sound again: the loss is named by every verify
    assert [str(x) for x in after.findings] == [f"{meta}: records what verify --repair could not bring back: at least "
                                                f"{gone} seen fingerprints are lost: the URLs they stand for may be "
                                                f"fetched again"]
    assert f.stats()["seen"] == len(URLS) - gone
    assert f.push_many(Request(url) for url in URLS) == gone  # those of the bucket that went: accepted again
    assert [str(x) for x in verify_crawl(redis_url, crawl_name).findings] == [str(x) for x in after.findings]


def test_verify_names_two_ready_entries_of_one_host(crawl, client, crawl_name, redis_url):
    pushed(crawl(), URLS[:2])
    (member,) = client.zrange(key(crawl_name, "ready"), 0, -1)
    client.zadd(key(crawl_name, "ready"), {b"000000000001a.example": 5})
    assert f"{key(crawl_name, 'ready')}: holds both 000000000001a.example and {member.decode()}: a host has one entry" \
        in map(str, verify_crawl(redis_url, crawl_name, repair=True).findings)
    assert verify_crawl(redis_url, crawl_name).sound
