"""Steering a Redis crawl while it runs: pause and resume (seen by every client, kept across restarts)
and dropping pending requests by host or by URL. Against a real redis-server."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from click.testing import CliRunner
from popkit import take
from timing import Window, with_longer_times

from diskfrontier import CrawlDamaged, FrontierClosed, FrontierError, RedisFrontier, Request
from diskfrontier.cli import main
from diskfrontier.contract.values import Dropped
from diskfrontier.redisfrontier.verify import verify_crawl

FUTURE = 3600.0  # seconds ahead: a not_before no test waits for


@pytest.fixture
def client(redis_server):
    return redis_server.client()


def key(crawl_name: str, suffix: str) -> str:
    return f"df:{{{crawl_name}}}:{suffix}"


def waiting(url: str, until: float | None) -> Request:
    """A request not handed out before ``until`` (None: at once)."""
    request = Request(url)
    request.not_before = until
    return request


def pending_urls(frontier: RedisFrontier) -> set[str]:
    """The URLs of the crawl's pending requests (ready and waiting for a time, not leased)."""
    return {request.url for request in frontier.pending_requests(leased=False)}


def sound(redis_url: str, crawl_name: str) -> None:
    report = verify_crawl(redis_url, crawl_name)
    assert report.sound, [str(finding) for finding in report.findings]


# ------------------------------------------------------------------ pause and resume
def test_a_pause_stops_the_pops_of_every_client_until_resume(open_crawl):
    a, b = open_crawl(), open_crawl()
    a.push_many(Request(f"https://a.example/{n}") for n in range(5))
    assert a.paused_since is None and b.stats()["paused_since"] is None
    before = time.time()
    a.pause()
    after = time.time()
    since = b.paused_since  # the other client sees it at once
    assert since is not None and before - 1 <= since <= after + 1  # the server's clock, on this machine
    assert a.stats()["paused_since"] == since
    assert a.pop() is None and b.pop() is None and b.pop_many(3) == []
    assert b.next_event_seen() is None  # nothing becomes ready by time while paused
    assert len(b) == 5 and not b.finished  # held, not gone
    a.pause()  # a second pause keeps the time of the first
    assert b.paused_since == since
    b.resume()
    assert a.paused_since is None and a.stats()["paused_since"] is None
    got = [a.pop(), b.pop()]
    assert all(request is not None for request in got)
    b.resume()  # not paused: nothing happens
    assert len(a.pop_many(5)) == 3


def test_a_waiting_pop_returns_a_request_when_another_client_resumes(open_crawl):
    a, b = open_crawl(), open_crawl()
    a.push(Request("https://a.example/"))
    a.pause()
    start = time.monotonic()
    assert b.pop(timeout=0.3) is None  # waits out its timeout while paused
    assert time.monotonic() - start >= 0.3
    got: list[object] = []
    timing: dict[str, float] = {}
    timeout = 60.0  # the waiter's: one that waited it out would take this long

    def wait() -> None:
        timing["start"] = time.monotonic()
        got.append(b.pop(timeout=timeout))
        timing["end"] = time.monotonic()

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.4)
    assert not got  # still waiting while paused
    resumed_at = time.monotonic()
    a.resume()
    waiter.join(10)
    assert not waiter.is_alive()
    request = got[0]
    assert isinstance(request, Request) and request.url == "https://a.example/"
    assert timing["end"] >= resumed_at  # handed out only after the resume
    assert timing["end"] - timing["start"] < timeout / 2  # within its timeout, not at its end


def test_a_pop_without_timeout_waits_for_the_resume_and_ends_on_a_finished_crawl(open_crawl):
    a, b = open_crawl(), open_crawl()
    a.pause()
    returned: list[object] = []
    thread = threading.Thread(target=lambda: returned.append(b.pop(timeout=None)), daemon=True)
    thread.start()
    thread.join(60)  # a pop that waited for the resume would wait for ever: there is none
    assert not thread.is_alive() and returned == [None]  # finished (nothing pending or leased): no wait
    a.push(Request("https://a.example/"))
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(b.pop(timeout=None)))
    waiter.start()
    time.sleep(0.4)
    assert not got  # a pause is waited out: a resume frees it
    a.resume()
    waiter.join(10)
    assert not waiter.is_alive() and isinstance(got[0], Request)


def test_a_pause_holds_across_closing_and_reopening(open_crawl, redis_url, crawl_name):
    a = open_crawl()
    a.push_many(Request(f"https://a.example/{n}") for n in range(3))
    a.pause()
    since = a.paused_since
    a.close()
    b = open_crawl()
    assert b.paused_since == since and b.pop() is None
    sound(redis_url, crawl_name)  # verify accepts a paused crawl
    b.close()
    c = open_crawl()
    assert c.pop() is None
    c.resume()
    c.close()
    d = open_crawl()
    assert d.paused_since is None and d.pop() is not None


def test_a_pause_leaves_requests_in_flight_alone(open_crawl):
    def attempt(lease: float) -> None:
        crawl = f"-{lease:g}"  # a crawl of its own each try
        a, b = open_crawl(crawl=crawl, lease=300), open_crawl(crawl=crawl)
        a.push_many(Request(f"https://a.example/{n}") for n in range(4))
        first, second, third = a.pop(), a.pop(), a.pop()
        b.pause()
        a.done(first)
        a.retry(second)  # pending again, not handed out while paused
        window = Window(lease)
        a.extend(third, lease)
        counted = b.stats()["done"], len(b), b.pop()
        window.step()  # third's lease still runs (or a busy machine made it late: a longer lease)
        assert counted == (1, 2, None)
        time.sleep(1.5 * lease)  # third's lease runs out: taken back by the next pop, not handed out
        assert b.pop() is None and b.stats()["reclaimed"] == 1 and len(b) == 3
        b.resume()
        never = {f"https://a.example/{n}" for n in range(4)} - {first.url, second.url, third.url}
        assert {r.url for r in b.pop_many(5)} == {second.url, third.url, *never}

    with_longer_times(attempt, 0.2)


def test_next_ready_of_a_paused_crawl_is_not_now(open_crawl):
    a = open_crawl()
    a.push(Request("https://a.example/"))
    assert a.next_ready() <= time.time()
    a.pause()
    assert a.next_ready() > time.time() + 0.1  # a poller looks again later, not in a busy loop
    a.resume()
    assert a.next_ready() <= time.time()


def test_a_garbage_pause_is_named_and_repair_keeps_the_crawl_paused(open_crawl, client, redis_url, crawl_name):
    a = open_crawl()
    a.push(Request("https://a.example/"))
    client.hset(key(crawl_name, "meta"), "paused", "soon")
    with pytest.raises(CrawlDamaged, match="field paused"):
        _ = a.paused_since
    with pytest.raises(CrawlDamaged, match="field paused"):
        a.stats()
    assert a.pop() is None  # paused all the same
    report = verify_crawl(redis_url, crawl_name)
    assert any("field paused" in str(finding) for finding in report.findings)
    assert verify_crawl(redis_url, crawl_name, repair=True).repaired
    sound(redis_url, crawl_name)
    assert a.paused_since is not None and a.pop() is None


def test_inspect_shows_a_pause_and_what_was_dropped(open_crawl, redis_url, crawl_name):
    f = open_crawl()
    f.push_many(Request(f"https://a.example/{n}") for n in range(3))

    def inspect(*more: str) -> str:
        result = CliRunner().invoke(main, ["inspect", redis_url, "--crawl", crawl_name, *more])
        assert result.exit_code == 0, result.output
        return result.output

    assert "paused" not in inspect() and "dropped" not in inspect()
    f.pause()
    f.drop(match="/0$")
    text = inspect()
    assert re.search(r"paused +since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d: nothing is handed out", text), text
    assert re.search(r"dropped +1 pending", text) and "next ready" not in text
    data = json.loads(inspect("--json"))
    assert data["paused"] is True and data["paused_at"] == f.paused_since and data["dropped"] == 1


# ------------------------------------------------------------------ drop
def _crawl_of_two_hosts(f: RedisFrontier) -> dict[str, list[str]]:
    """a.example with a leased request, a failed one, ready ones and ones waiting for a time;
    b.example with ready and waiting ones. Returns the URLs of each kind."""
    f.push(Request("https://a.example/leased", priority=9))
    f.push(Request("https://a.example/failed", priority=8))
    leased = f.pop()
    assert leased is not None
    f.fail(take(f), "gone")
    kinds = {
        "leased": [leased.url], "failed": ["https://a.example/failed"],
        "a_ready": [f"https://a.example/r{n}" for n in range(30)],
        "a_later": [f"https://a.example/w{n}" for n in range(12)],
        "b_ready": [f"https://b.example/r{n}" for n in range(7)],
        "b_later": [f"https://b.example/w{n}" for n in range(3)],
    }
    f.push_many(Request(url) for url in kinds["a_ready"] + kinds["b_ready"])
    later = time.time() + FUTURE
    for url in kinds["a_later"] + kinds["b_later"]:
        f.push(Request(url), not_before=later)
    return kinds


def test_drop_by_host_removes_its_ready_and_waiting_requests_and_nothing_else(open_crawl, redis_url, crawl_name):
    f, other = open_crawl(), open_crawl()
    kinds = _crawl_of_two_hosts(f)
    before = f.stats()
    dropped = other.drop(host="a.example")
    gone = set(kinds["a_ready"] + kinds["a_later"])
    assert dropped == Dropped(len(gone), [])
    assert pending_urls(f) == set(kinds["b_ready"] + kinds["b_later"])
    stats = f.stats()
    assert stats["dropped"] == len(gone) and stats["pending"] == before["pending"] - len(gone)
    assert stats["delayed"] == len(kinds["b_later"]) and stats["in_flight"] == 1
    assert stats["seen"] == before["seen"] and stats["failed"] == 1
    info = f.host("a.example")
    assert info is not None and info.pending == 0 and info.in_flight == 1 and info.ready_at is None
    assert [failed.request.url for failed in f.failed()] == kinds["failed"]
    sound(redis_url, crawl_name)
    assert not any(f.push(Request(url)) for url in gone)  # their fingerprints stay seen
    assert f.stats()["duplicates"] == len(gone)
    f.done(f.in_flight[0])  # the leased one is untouched
    handed = [r.url for r in f.pop_many(100)]
    assert handed and all(url.startswith("https://b.example/") for url in handed)
    sound(redis_url, crawl_name)


def test_a_host_whose_queue_a_drop_empties_is_neither_ready_nor_waiting(open_crawl, client, redis_url, crawl_name):
    f = open_crawl()
    f.set_delay("w.example", 600)
    f.push_many(Request(f"https://{host}.example/{n}") for n in range(3) for host in ("w", "r"))
    held = f.pop_many(2)  # one of each: w waits 600 s, r is ready again
    assert {r.slot for r in held} == {"w.example", "r.example"}
    assert client.zscore(key(crawl_name, "wait"), "w.example") is not None
    assert f.drop(host="w.example").count == 2 and f.drop(host="r.example").count == 2
    assert client.zcard(key(crawl_name, "wait")) == 0 and client.zcard(key(crawl_name, "ready")) == 0
    assert f.host("w.example").pending == 0 and f.host("r.example").in_flight == 1
    sound(redis_url, crawl_name)
    f.push(Request("https://r.example/new"))
    assert f.pop().url == "https://r.example/new"


def test_drop_by_host_in_many_steps_keeps_every_count(open_crawl, redis_url, crawl_name):
    f = open_crawl(order="fifo")
    f.push_many(Request(f"https://a.example/{n}") for n in range(2500))  # three steps of DROP_BATCH
    later = time.time() + FUTURE
    f.push_many(waiting(f"https://a.example/w{n}", later) for n in range(1200))
    f.push_many(Request(f"https://b.example/{n}") for n in range(5))
    assert f.drop(host="a.example", show=3) == Dropped(3700, [f"https://a.example/{n}" for n in range(3)])
    assert len(f) == 5 and f.stats()["delayed"] == 0
    sound(redis_url, crawl_name)
    assert f.drop(host="a.example") == Dropped(0, [])
    assert f.drop(host="nobody.example") == Dropped(0, [])
    assert f.host("nobody.example") is None  # a drop makes no host
    assert f.stats()["dropped"] == 3700


def test_drop_by_match_removes_exactly_the_pending_requests_it_finds(open_crawl, redis_url, crawl_name):
    f = open_crawl()
    kinds = _crawl_of_two_hosts(f)
    f.push(Request("https://c.example/x1?r=1"))
    pattern = r"/(r1|w1)|\?r="  # r1, r10..r19, w1, w10, w11 of each host, and the c request
    every = {url for urls in kinds.values() for url in urls} | {"https://c.example/x1?r=1"}
    pending = every - set(kinds["leased"]) - set(kinds["failed"])
    want = {url for url in pending if re.search(pattern, url)}
    assert {"https://a.example/r15", "https://b.example/w1", "https://a.example/w11"} <= want
    dropped = f.drop(match=pattern, show=4)
    assert dropped.count == len(want) and len(dropped.urls) == 4 and set(dropped.urls) <= want
    assert pending_urls(f) == pending - want
    assert f.drop(match="leased|failed") == Dropped(0, [])  # in flight, failed: never dropped
    assert f.in_flight[0].url == kinds["leased"][0] and len(f.failed()) == 1
    stats = f.stats()
    assert stats["dropped"] == len(want) and stats["pending"] == len(pending - want)
    assert stats["delayed"] == len([u for u in kinds["a_later"] + kinds["b_later"] if u not in want])
    sound(redis_url, crawl_name)
    assert f.push(Request("https://a.example/r1")) is False  # still seen
    handed = {r.url for r in f.pop_many(200)}
    assert handed == {u for u in pending - want if "/w" not in u}  # none of the dropped is handed out


def test_a_dry_run_counts_and_shows_and_changes_nothing(open_crawl, client, redis_url, crawl_name):
    f = open_crawl()
    kinds = _crawl_of_two_hosts(f)

    def state() -> tuple[dict, dict]:
        stats = f.stats()
        raw = {name: client.dump(name) for name in sorted(client.keys(key(crawl_name, "*")))}
        raw.pop(key(crawl_name, "meta").encode())  # policy_at moves on
        return stats, raw

    before = state()
    by_host = f.drop(host="a.example", dry_run=True, show=100)
    by_match = f.drop(match=r"/w\d+$", dry_run=True, show=2)
    assert state() == before and f.stats()["dropped"] == 0
    a_pending = set(kinds["a_ready"] + kinds["a_later"])
    assert by_host.count == len(a_pending) and set(by_host.urls) == a_pending
    assert set(by_host.urls[:len(kinds["a_ready"])]) == set(kinds["a_ready"])  # the ready ones first
    later = set(kinds["a_later"] + kinds["b_later"])
    assert by_match.count == len(later) and len(by_match.urls) == 2 and set(by_match.urls) <= later
    assert f.drop(host="a.example") == Dropped(by_host.count, [])  # as the dry run said
    assert f.drop(match=r"/w\d+$").count == len(kinds["b_later"])
    sound(redis_url, crawl_name)


def test_show_returns_up_to_that_many_urls(open_crawl):
    f = open_crawl(order="fifo")
    f.push_many(Request(f"https://a.example/{n}") for n in range(5))
    assert f.drop(host="a.example", dry_run=True, show=2) == Dropped(5, ["https://a.example/0", "https://a.example/1"])
    assert f.drop(host="a.example", dry_run=True, show=9).urls == [f"https://a.example/{n}" for n in range(5)]
    dropped = f.drop(match="/[34]$", show=9)
    assert dropped.count == 2 and sorted(dropped.urls) == ["https://a.example/3", "https://a.example/4"]
    assert f.drop(host="a.example", show=0) == Dropped(3, [])


def test_a_request_the_scan_returns_twice_is_counted_once(open_crawl, monkeypatch):
    f = open_crawl()
    f.push_many(Request(f"https://a.example/{n}") for n in range(5))
    scan = f._reader.stored_requests

    def twice(count):  # HSCAN may return an entry twice while Redis rehashes the hash
        for entry in scan(count):
            yield entry
            yield entry

    monkeypatch.setattr(f._reader, "stored_requests", twice)
    assert f.drop(match="a", dry_run=True).count == 5
    assert f.drop(match="a").count == 5 and len(f) == 0 and f.stats()["dropped"] == 5


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "exactly one of host= and match="),
    ({"host": "a.example", "match": "a"}, "exactly one of host= and match="),
    ({"match": "("}, "is not a regular expression"),
    ({"match": ""}, "match must be a non-empty regular expression"),
    ({"host": ""}, "host"),
    ({"host": "a\0b"}, "host"),
    ({"host": "a.example", "show": -1}, "show must be a count"),
    ({"host": "a.example", "show": True}, "show must be a count"),
    ({"host": "a.example", "show": 1.5}, "show must be a count"),
    ({"host": "a.example", "dry_run": "yes"}, "dry_run must be True or False"),
])
def test_bad_drop_arguments_are_refused_before_anything_is_done(open_crawl, kwargs, message):
    f = open_crawl()
    f.push(Request("https://a.example/"))
    with pytest.raises(ValueError, match=re.escape(message)):
        f.drop(**kwargs)
    assert len(f) == 1 and f.stats()["dropped"] == 0


def test_errors_of_steering_a_closed_or_deleted_crawl_are_the_projects(open_crawl, client, crawl_name):
    a, b = open_crawl(), open_crawl()
    a.push(Request("https://a.example/"))
    a.close()
    for call in (a.pause, a.resume, lambda: a.paused_since, lambda: a.drop(host="a.example")):
        with pytest.raises(FrontierClosed):
            call()
    client.delete(*client.keys(key(crawl_name, "*")))
    for call in (b.pause, b.resume, lambda: b.drop(host="a.example"), lambda: b.drop(match="a")):
        with pytest.raises(FrontierError, match="keys are gone"):
            call()
    client.hset(key(crawl_name, "meta"), "order", "lifo")  # a crawl whose keys are wrong: damage, not a traceback
    with pytest.raises(FrontierError):
        b.drop(host="a.example")


def test_verify_names_a_garbage_dropped_counter(open_crawl, client, redis_url, crawl_name):
    f = open_crawl()
    f.push_many(Request(f"https://a.example/{n}") for n in range(3))
    f.drop(host="a.example")
    sound(redis_url, crawl_name)
    client.hset(key(crawl_name, "meta"), "dropped", "many")
    report = verify_crawl(redis_url, crawl_name)
    assert any("field dropped" in str(finding) for finding in report.findings)
    assert verify_crawl(redis_url, crawl_name, repair=True).repaired
    sound(redis_url, crawl_name)


# ------------------------------------------------------------------ a drop racing with pops
@pytest.mark.parametrize("by", ["host", "match"])
def test_a_drop_racing_with_pops_never_drops_a_leased_request_nor_hands_out_a_dropped_one(
        open_crawl, redis_url, crawl_name, by):
    dropper, popper = open_crawl(), open_crawl(lease=600)
    urls = [f"https://{host}.example/{n}" for n in range(1500) for host in ("a", "b")]
    later = time.time() + 0.3  # some are released from delayed while the drop runs
    dropper.push_many(waiting(url, later if n % 5 == 0 else None) for n, url in enumerate(urls))
    target = "https://a.example/" if by == "host" else "/[0-9]*[13579]$"  # a's, or the odd numbers of both
    meant = {url for url in urls if (url.startswith(target) if by == "host" else re.search(target, url))}
    popped: list[str] = []
    done = threading.Event()
    errors: list[BaseException] = []

    def pop() -> None:
        try:
            while not done.is_set():
                for request in popper.pop_many(7):
                    popped.append(request.url)  # held: leased to the end
        except BaseException as exc:  # the test fails with it below
            errors.append(exc)

    thread = threading.Thread(target=pop)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while len(popped) < 50 and time.monotonic() < deadline:  # the popper is under way
            time.sleep(0.001)
        if by == "host":
            dropped = dropper.drop(host="a.example", show=len(urls))
        else:
            dropped = dropper.drop(match=target, show=len(urls))
    finally:
        done.set()
        thread.join(60)
    assert not errors and not thread.is_alive()
    popped_set, gone = set(popped), set(dropped.urls)
    assert dropped.count == len(gone) and gone <= meant
    assert not popped_set & gone  # nothing both handed out and dropped
    assert len(popped) == len(popped_set)  # nothing handed out twice
    left = pending_urls(dropper)
    assert popped_set | gone | left == set(urls) and not left & meant  # every meant one dropped or leased
    stats = dropper.stats()
    assert stats["dropped"] == len(gone) and stats["in_flight"] == len(popped_set)
    assert stats["pending"] == len(left) and gone and meant & popped_set  # both sides ran
    sound(redis_url, crawl_name)
