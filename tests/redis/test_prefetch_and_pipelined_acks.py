"""Fewer round trips per request: ``prefetch`` (a pop leases several, the next pops take them with no round
trip) and ``ack="pipelined"`` (a done is sent, its reply read with the next step), with the promises each
keeps and the ones it weakens (docs/guide/redis.md, "Prefetch and pipelined acknowledgements")."""

from __future__ import annotations

import logging
import signal
import threading
import time

import pytest
import redis

from diskfrontier import LeaseExpired, NotInFlight, RedisFrontier, Request
from diskfrontier.redisfrontier.connection import RedisUnavailable
from diskfrontier.redisfrontier.management import release


def script_calls(url: str) -> int:
    """How many scripts the server has run (INFO commandstats), from a client of its own."""
    client = redis.Redis.from_url(url)
    try:
        return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
    finally:
        client.close()


def ranked(n: int, host: str = "h{i}.example") -> list[Request]:
    """``n`` requests of priorities n-1 down to 0, each of its own host unless ``host`` says otherwise."""
    return [Request(f"https://{host.format(i=i)}/p{i}", priority=n - 1 - i) for i in range(n)]


# ---------------------------------------------------------------------- prefetch
def test_a_prefetching_pop_leases_k_in_one_step_and_the_next_pops_make_no_round_trip(open_crawl, redis_url):
    frontier = open_crawl(prefetch=4)
    frontier.push_many(ranked(10))
    first = frontier.pop()
    stats = frontier.stats()
    assert (stats["in_flight"], stats["pending"], stats["prefetched"], stats["leased_here"]) == (4, 6, 3, 4)
    assert frontier.holds(first) and frontier.in_flight == [first]
    before = script_calls(redis_url)
    rest = [frontier.pop() for _ in range(3)]
    assert script_calls(redis_url) == before, "a pop of a request leased ahead ran a script"
    assert [r.url for r in [first, *rest]] == [r.url for r in ranked(10)[:4]]
    assert all(frontier.holds(r) for r in rest) and frontier.stats()["prefetched"] == 0
    frontier.done_many([first, *rest])
    assert [frontier.pop().url for _ in range(6)] == [r.url for r in ranked(10)[4:]]


def test_requests_leased_ahead_are_not_held_until_handed_out(open_crawl):
    frontier = open_crawl(prefetch=3)
    frontier.push_many(ranked(3))
    first = frontier.pop()
    ahead = frontier._leases.requests(stashed=True)[1:]  # the two leased ahead, as a caller could never get them
    assert len(ahead) == 2 and not any(frontier.holds(r) for r in ahead)
    with pytest.raises(NotInFlight):
        frontier.done(ahead[0])
    frontier.done(first)
    assert frontier.pop() is ahead[0] and frontier.holds(ahead[0])


def test_a_pop_is_at_most_k_minus_1_behind_a_better_request_pushed_since(open_crawl):
    k = 4
    worker, other = open_crawl(prefetch=k), open_crawl()
    worker.push_many(ranked(10))
    got = [worker.pop()]
    other.push(Request("https://better.example/", priority=100))
    while (r := worker.pop()).url != "https://better.example/":
        got.append(r)
    assert len(got) == k, "the better request came after the requests leased before it was pushed, and right then"
    assert [r.url for r in got] == [r.url for r in ranked(10)[:k]]


def test_requests_leased_ahead_are_handed_out_during_a_pause_and_nothing_more(open_crawl):
    worker, other = open_crawl(prefetch=3), open_crawl()
    worker.push_many(ranked(6))
    worker.pop()
    other.pause()
    assert worker.pop() is not None and worker.pop() is not None
    assert worker.pop() is None and worker.stats()["pending"] == 3


def test_per_host_limits_hold_for_requests_leased_ahead(open_crawl):
    worker = open_crawl(prefetch=8, per_host=1)
    worker.push_many(Request(f"https://h{i % 3}.example/p{i}") for i in range(9))
    worker.pop()
    assert worker.stats()["in_flight"] == 3 and worker.stats()["prefetched"] == 2
    assert sorted(r.slot for r in worker._leases.requests(stashed=True)) == ["h0.example", "h1.example",
                                                                             "h2.example"]


def test_a_close_gives_back_the_requests_leased_ahead(open_crawl):
    worker = open_crawl(prefetch=5)
    worker.push_many(ranked(5))
    taken = worker.pop()
    worker.done(taken)
    worker.close()
    other = open_crawl()
    assert other.stats()["in_flight"] == 0 and other.stats()["pending"] == 4
    assert sorted(other.pop().url for _ in range(4)) == sorted(r.url for r in ranked(5)[1:])


def test_the_renewal_keeps_the_leases_of_requests_leased_ahead(open_crawl):
    lease = 1.0
    worker, other = open_crawl(prefetch=4, lease=lease), open_crawl()
    worker.push_many(ranked(4))
    worker.pop()
    deadline = time.monotonic() + 3 * lease
    while time.monotonic() < deadline:
        assert other.pop() is None, "a lease of a request leased ahead ran out"
        time.sleep(lease / 10)
    ahead = [worker.pop() for _ in range(3)]
    worker.done_many(ahead)  # every lease still this client's: no LeaseExpired
    assert other.stats()["reclaimed"] == 0


def test_a_request_leased_ahead_whose_lease_was_taken_back_is_not_handed_out(open_crawl, redis_url, crawl_name):
    lease = 0.6
    worker, other = open_crawl(prefetch=3, lease=lease), open_crawl()
    worker.push_many(ranked(3))
    first = worker.pop()
    release(redis_url, crawl_name, client=worker.client_id, force=True)
    time.sleep(lease)  # the renewal (every lease / 3) finds the leases lost
    assert sorted(other.pop().url for _ in range(3)) == sorted(r.url for r in ranked(3))
    assert worker.pop() is None, "a request whose lease was taken back was handed out"
    with pytest.raises(LeaseExpired):
        worker.done(first)


@pytest.mark.parametrize("asked", [{"prefetch": 0}, {"prefetch": 501}, {"prefetch": True},
                                   {"prefetch": 4, "renew": False}, {"ack": "later"}, {"ack": "pipelined",
                                                                                        "wait_replicas": 1}])
def test_bad_options_are_refused_before_anything_is_opened(redis_url, crawl_name, asked):
    with pytest.raises(ValueError):
        RedisFrontier(redis_url, crawl=crawl_name, **asked)


# ---------------------------------------------------------------------- pipelined acknowledgements
def test_pipelined_dones_are_applied_and_seen_by_this_clients_next_call(open_crawl):
    frontier = open_crawl(ack="pipelined", prefetch=4)
    frontier.push_many(ranked(20))
    count = 0
    while (r := frontier.pop()) is not None:
        frontier.done(r)
        count += 1
        assert frontier.stats()["done"] == count
    assert count == 20 and frontier.finished
    assert (frontier.stats()["acks_lost"], frontier.stats()["acks_failed"]) == (0, 0)


def test_a_pipelined_done_returns_while_redis_is_frozen_and_is_applied_when_it_wakes(open_crawl, redis_server):
    frontier, other = open_crawl(ack="pipelined"), open_crawl()
    frontier.push_many(ranked(2))
    taken = frontier.pop()
    redis_server.proc.send_signal(signal.SIGSTOP)
    # The server wakes in a minute whatever happens: a done() that waited for its reply returns
    # only then, after the timer ran.
    wake = threading.Timer(60, redis_server.proc.send_signal, (signal.SIGCONT,))
    wake.start()
    try:
        frontier.done(taken)  # would wait for the reply with ack="wait"
        returned_while_frozen = wake.is_alive()
        assert not frontier.holds(taken)
    finally:
        wake.cancel()
        redis_server.proc.send_signal(signal.SIGCONT)
    assert returned_while_frozen, "done() waited for a frozen server"
    assert other.stats()["done"] == 1 and other.pop().url == ranked(2)[1].url


def test_a_pipelined_done_of_a_lost_lease_is_counted_and_changes_nothing(open_crawl, caplog):
    lease = 0.3
    late, other = open_crawl(ack="pipelined", lease=lease, renew=False), open_crawl()
    late.push(Request("https://slow.example/"))
    taken = late.pop()
    time.sleep(lease * 1.5)
    again = other.pop(timeout=2.0)
    assert again is not None and again.url == taken.url
    with caplog.at_level(logging.WARNING, logger="diskfrontier"):
        late.done(taken)  # the lease is lost: known only at the reply
        assert late.stats()["acks_lost"] == 1
    assert "lease had run out" in caplog.text
    assert other.stats()["done"] == 0
    other.done(again)
    assert other.stats()["done"] == 1 and other.finished


def test_a_pipelined_done_of_a_lease_a_renewal_found_lost_raises(open_crawl, redis_url, crawl_name):
    lease = 0.6
    worker = open_crawl(ack="pipelined", lease=lease)
    worker.push(Request("https://slow.example/"))
    taken = worker.pop()
    release(redis_url, crawl_name, client=worker.client_id, force=True)
    time.sleep(lease)  # the renewal finds it lost
    with pytest.raises(LeaseExpired):
        worker.done(taken)
    assert not worker.holds(taken) and worker.stats()["pending"] == 1


def test_pipelined_dones_after_the_script_cache_was_flushed_are_sent_again(open_crawl, redis_url):
    frontier = open_crawl(ack="pipelined")
    frontier.push_many(ranked(3))
    first = frontier.pop()
    redis.Redis.from_url(redis_url).script_flush()
    frontier.done(first)  # answered NOSCRIPT: it did not run
    second = frontier.pop()  # reads that answer, loads the scripts, sends the done again, then its own POP
    frontier.done(second)
    stats = frontier.stats()
    assert (stats["done"], stats["acks_failed"], stats["in_flight"]) == (2, 0, 0)


def test_dones_whose_replies_a_server_crash_took_come_back_after_their_lease(tmp_path):
    from redisserver import RedisServer

    server = RedisServer(str(tmp_path / "redis"), fsync="always")
    server.start()
    try:
        lease = 1.0
        worker = RedisFrontier(server.url, crawl="crash", ack="pipelined", lease=lease)
        worker.push_many(ranked(2))
        taken = worker.pop()
        assert taken is not None and server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)
        worker.done(taken)  # in the socket buffers of a server that will never read it
        server.kill()
        server.start()
        with pytest.raises(RedisUnavailable):
            worker.pop()
        assert worker.stats()["acks_failed"] == 1
        worker.close()
        with RedisFrontier(server.url, crawl="crash") as other:
            back = [other.pop(timeout=3 * lease) for _ in range(2)]
            assert sorted(r.url for r in back if r is not None) == sorted(r.url for r in ranked(2))
    finally:
        server.stop()


def test_a_sharded_crawl_drained_with_prefetch_and_pipelined_acks_loses_nothing(open_crawl):
    worker = open_crawl(shards=3, prefetch=4, ack="pipelined")
    other = open_crawl(prefetch=2, ack="pipelined")
    pushed = {r.url for r in ranked(40, host="h{i}.example")}
    worker.push_many(ranked(40, host="h{i}.example"))
    seen = []
    progressed = True
    while progressed:
        progressed = False
        for client in (worker, other):
            request = client.pop()
            if request is not None:
                seen.append(request.url)
                client.done(request)
                progressed = True
    assert sorted(seen) == sorted(pushed) and worker.finished
    assert worker.stats()["done"] == 40 and worker.stats()["acks_lost"] == other.stats()["acks_lost"] == 0
