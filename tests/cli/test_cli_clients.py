"""``diskfrontier clients`` and ``release`` on a real redis-server, with real worker processes that are
killed (SIGKILL) or frozen (SIGSTOP) while they hold leases."""

from __future__ import annotations

import json
import signal
import socket
import time

import pytest
import redis
from click.testing import CliRunner
from leaseholders import Workers

from diskfrontier import LeaseExpired, RedisFrontier, Request
from diskfrontier.cli import main

LEASE = 1.5  # the workers' lease, seconds

def run(*args: str, input: str | None = None):  # noqa: A002 - the name CliRunner.invoke uses
    return CliRunner().invoke(main, list(args), input=input)


def listed(url: str, crawl: str) -> dict[str, dict]:
    result = run("clients", url, "--crawl", crawl, "--json")
    assert result.exit_code == 0, result.output
    return {c["client"]: c for c in json.loads(result.stdout)}


def seed(url: str, crawl: str, count: int, *, lease: float = LEASE) -> None:
    with RedisFrontier(url, crawl=crawl, lease=lease) as f:
        f.push_many(Request(f"https://h{i}.example/") for i in range(count))


@pytest.fixture
def workers(redis_url, crawl_name):
    started = Workers("redis", redis_url, crawl_name)
    yield started
    started.end()


def test_clients_shows_killed_and_frozen_workers_dead_after_two_missed_beats_and_release_gives_their_leases_back(
        redis_url, crawl_name, workers):
    lease = 2 * LEASE  # dead two thirds of a lease after the last beat: a second before the leases run out
    seed(redis_url, crawl_name, 5, lease=lease)
    killed, killed_id = workers.start(2, lease=lease)
    frozen, frozen_id = workers.start(3, lease=lease)
    both = listed(redis_url, crawl_name)
    assert set(both) == {killed_id, frozen_id}  # the seeding client removed itself at its close
    for proc, client, held in ((killed, killed_id, 2), (frozen, frozen_id, 3)):
        entry = both[client]
        assert (entry["pid"], entry["host"], entry["lease_seconds"], entry["leases"], entry["live"]) == (
            proc.pid, socket.gethostname(), lease, held, True)
        assert entry["started_at"] <= entry["last_seen_at"] and 0 <= entry["since_seen_seconds"] < lease
    crawls = {c["name"]: c for c in json.loads(run("crawls", redis_url, "--json").stdout)}
    assert (crawls[crawl_name]["clients"], crawls[crawl_name]["in_flight"]) == (2, 5)

    stopped = time.time()
    killed.send_signal(signal.SIGKILL)
    frozen.send_signal(signal.SIGSTOP)
    while True:
        now = listed(redis_url, crawl_name)
        if not now[killed_id]["live"] and not now[frozen_id]["live"]:
            break
        assert time.time() - stopped < 20 * lease, f"still live long after they stopped: {now}"
        time.sleep(lease / 30)
    for client in (killed_id, frozen_id):
        assert now[client]["last_seen_at"] <= stopped + 0.05  # not seen after it stopped (same clock here)
        assert now[client]["since_seen_seconds"] >= 2 * lease / 3  # dead: two beats (a third of its lease each) missed
    table = run("clients", redis_url, "--crawl", crawl_name).stdout.splitlines()
    assert table[0].split() == ["client", "host", "pid", "last", "seen", "lease", "leases", "state"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows[killed_id][-2:] == ["2", "dead"] and rows[frozen_id][-2:] == ["3", "dead"]
    assert json.loads(run("crawls", redis_url, "--json").stdout)[0]["clients"] == 0

    # the killed worker's leases, given back by its id without --force: pending at once, while the
    # frozen worker's leases (renewed up to the same moment) still hold: before its leases ran out
    released = run("release", redis_url, "--crawl", crawl_name, "--client", killed_id, "--json")
    assert released.exit_code == 0, released.output
    assert json.loads(released.stdout) == {"crawl": crawl_name, "client": killed_id, "released": 2,
                                           "was_live": False}
    with RedisFrontier(redis_url, crawl=crawl_name, lease=lease) as other:
        early = other.pop_many(10)
        assert len(early) == 2, "the frozen worker's leases ran out too: the machine stalled for a third of a lease"
        early_urls = {r.url for r in early}
        other.done_many(early)
    after = listed(redis_url, crawl_name)
    assert (after[killed_id]["leases"], after[frozen_id]["leases"]) == (0, 3)
    counts = redis.Redis.from_url(redis_url).hmget(f"df:{{{crawl_name}}}:meta", "pending", "inflight", "reclaimed")
    assert [None if x is None else int(x) for x in counts] == [0, 3, 2]

    # every lease that ran out (the frozen worker's, once its lease has passed), taken back without a pop
    while time.time() < now[frozen_id]["last_seen_at"] + lease:
        time.sleep(lease / 30)
    expired = run("release", redis_url, "--crawl", crawl_name, "--expired")
    assert (expired.exit_code, expired.stdout) == (0, "released 3 leases that had run out (pending again)\n")
    assert json.loads(run("release", redis_url, "--crawl", crawl_name, "--expired", "--json").stdout) == {
        "crawl": crawl_name, "client": None, "released": 0, "was_live": False}
    verified = run("verify", redis_url, "--crawl", crawl_name)  # every count and host's in-flight state agrees
    assert verified.exit_code == 0, verified.output
    with RedisFrontier(redis_url, crawl=crawl_name, lease=LEASE) as other:
        taken = other.pop_many(10)
        assert {r.url for r in taken} | early_urls == {f"https://h{i}.example/" for i in range(5)}
        assert len(taken) == 3
        other.done_many(taken)
        stats = other.stats()
        assert (stats["reclaimed"], stats["done"], stats["in_flight"], stats["pending"]) == (5, 5, 0, 0)


def test_release_of_a_killed_worker_makes_its_requests_pending_long_before_its_lease_runs_out(
        redis_url, crawl_name, workers):
    long_lease = 30 * LEASE
    seed(redis_url, crawl_name, 3, lease=long_lease)
    proc, client = workers.start(3, lease=long_lease)
    with RedisFrontier(redis_url, crawl=crawl_name, lease=LEASE) as other:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = time.monotonic()
        assert other.pop() is None  # its leases hold for long_lease
        refused = run("release", redis_url, "--crawl", crawl_name, "--client", client)
        assert refused.exit_code == 1 and "is live" in refused.stderr and "--force" in refused.stderr
        assert "LeaseExpired" in refused.stderr and "Traceback" not in refused.output
        assert other.pop() is None  # the refusal changed nothing
        forced = run("release", redis_url, "--crawl", crawl_name, "--client", client, "--force")
        assert forced.exit_code == 0, forced.output
        assert forced.stdout == f"released 3 leases of client {client} (pending again)\n"
        assert "was live" in forced.stderr and "LeaseExpired" in forced.stderr
        taken = other.pop_many(3)
        waited = time.monotonic() - killed
        assert len(taken) == 3 and waited < long_lease / 10, waited
        other.done_many(taken)
        assert other.stats()["reclaimed"] == 3


def test_a_released_live_client_gets_lease_expired_and_its_late_done_changes_nothing(redis_url, crawl_name):
    # ack="wait": done() itself answers LeaseExpired (by default the next step counts it in acks_lost)
    with RedisFrontier(redis_url, crawl=crawl_name, lease=LEASE, ack="wait") as worker, \
            RedisFrontier(redis_url, crawl=crawl_name, lease=LEASE) as other:
        worker.push(Request("https://a.example/"))
        held = worker.pop()
        assert held is not None
        clients = listed(redis_url, crawl_name)
        assert clients[worker.client_id]["live"] and clients[worker.client_id]["leases"] == 1
        assert clients[other.client_id]["live"] and clients[other.client_id]["leases"] == 0
        refused = run("release", redis_url, "--crawl", crawl_name, "--client", worker.client_id, "--json")
        assert refused.exit_code == 1 and refused.stdout == ""
        assert run("release", redis_url, "--crawl", crawl_name, "--client", worker.client_id,
                   "--force").exit_code == 0
        taken = other.pop()
        assert taken is not None and taken.url == held.url
        with pytest.raises(LeaseExpired):
            worker.done(held)
        other.done(taken)
        stats = other.stats()
        assert (stats["done"], stats["reclaimed"], stats["pending"], stats["in_flight"]) == (1, 1, 0, 0)
    assert listed(redis_url, crawl_name) == {}  # each close removed its entry


def test_a_client_without_renewal_is_seen_on_its_own_calls(redis_url, crawl_name):
    with RedisFrontier(redis_url, crawl=crawl_name, lease=LEASE, renew=False) as f:
        f.push(Request("https://a.example/"))
        first = listed(redis_url, crawl_name)[f.client_id]
        assert first["live"] and first["lease_seconds"] == LEASE
        time.sleep(LEASE)
        assert not listed(redis_url, crawl_name)[f.client_id]["live"]  # no calls, no renewal: dead
        request = f.pop()
        assert request is not None
        again = listed(redis_url, crawl_name)[f.client_id]
        assert again["live"] and again["leases"] == 1 and again["last_seen_at"] > first["last_seen_at"]
        assert again["started_at"] == first["started_at"]


def test_an_open_forgets_clients_dead_for_long_and_entries_it_cannot_read(redis_url, crawl_name):
    seed(redis_url, crawl_name, 1)
    server = redis.Redis.from_url(redis_url)
    key = f"df:{{{crawl_name}}}:clients"
    now = float(server.time()[0])
    server.hset(key, mapping={
        "old-1": json.dumps({"host": "h", "pid": 1, "lease": 30, "started": now - 7300, "seen": now - 7200}),
        "recent-2": json.dumps({"host": "h", "pid": 2, "lease": 30, "started": now - 300, "seen": now - 200}),
        "ten-leases-5": json.dumps({"host": "h", "pid": 5, "lease": 30, "started": now - 400, "seen": now - 301}),
        "long-lease-3": json.dumps({"host": "h", "pid": 3, "lease": 1000, "started": 0, "seen": now - 7200}),
        "garbage-4": b"\xff not json"})
    before = listed(redis_url, crawl_name)
    assert set(before) == {"old-1", "recent-2", "long-lease-3", "garbage-4", "ten-leases-5"}
    assert before["garbage-4"]["host"] is None and not before["garbage-4"]["live"]
    assert not before["recent-2"]["live"] and before["recent-2"]["since_seen_seconds"] >= 200
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        assert set(listed(redis_url, crawl_name)) == {"recent-2", "long-lease-3", f.client_id}


@pytest.mark.slow
def test_a_killed_client_is_listed_dead_then_forgotten_after_ten_leases_by_the_beats_of_a_live_one(
        redis_url, crawl_name, workers):
    """No client opens the crawl after the kill: the beats of the live client, which pops as a crawler
    does (taking back the killed client's lease once it ran out), alone remove the dead entry."""
    lease = 0.4
    seed(redis_url, crawl_name, 2, lease=lease)
    server = redis.Redis.from_url(redis_url)
    with RedisFrontier(redis_url, crawl=crawl_name, lease=LEASE) as live:
        proc, client = workers.start(1, lease=lease)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        taken: list[Request] = []
        seen_dead, last_seen = False, 0.0
        while client in (now := listed(redis_url, crawl_name)):
            entry = now[client]
            assert entry["last_seen_at"] is not None, f"its entry went before its lease was taken back: {entry}"
            last_seen = entry["last_seen_at"]
            seen_dead = seen_dead or not entry["live"]
            assert now[live.client_id]["live"]
            assert float(server.time()[0]) - last_seen < 10 * lease + 60, f"never forgotten: {entry}"
            taken += live.pop_many(5)
            time.sleep(lease / 10)
        gone_at = float(".".join(str(x) for x in server.time()))
        assert seen_dead, "the killed client was never listed as dead before it went"
        assert gone_at - last_seen >= 10 * lease  # not forgotten before ten of its leases
        assert len(taken) == 2  # the killed client's request too: its lease ran out and was taken back
        live.done_many(taken)
    assert listed(redis_url, crawl_name) == {}


def test_a_lease_holder_without_an_entry_is_listed_from_its_leases(redis_url, crawl_name):
    with RedisFrontier(redis_url, crawl=crawl_name, lease=LEASE) as f:
        f.push(Request("https://a.example/"))
        held = f.pop()
        assert held is not None
        assert f._renewal is not None
        f._renewal.stop()  # no beats from here on: as a client of a version before the clients hash
        redis.Redis.from_url(redis_url).hdel(f"df:{{{crawl_name}}}:clients", f.client_id)
        entry = listed(redis_url, crawl_name)[f.client_id]
        assert (entry["host"], entry["pid"], entry["leases"], entry["live"]) == (None, int(
            f.client_id.rpartition("-")[2]), 1, True)
        time.sleep(LEASE)
        assert not listed(redis_url, crawl_name)[f.client_id]["live"]  # its lease ran out
        assert run("release", redis_url, "--crawl", crawl_name, "--client", f.client_id).exit_code == 0
        with pytest.raises(LeaseExpired):
            f.done(held)


@pytest.mark.parametrize("args, code, text", [
    (["release", "{url}", "--crawl", "nope", "--expired"], 1, "there is no crawl 'nope'"),
    (["clients", "{url}", "--crawl", "nope"], 1, "there is no crawl 'nope'"),
    (["release", "{url}", "--crawl", "{crawl}", "--client", "abc-1"], 1, "has no client 'abc-1'"),
    (["release", "{url}", "--crawl", "{crawl}", "--client", "a:b"], 1, "'a:b' is not a client id"),
    (["release", "{url}", "--crawl", "{crawl}"], 2, "give --client ID or --expired"),
    (["release", "{url}", "--crawl", "{crawl}", "--client", "abc-1", "--expired"], 2, "give --client ID or --expired"),
    (["release", "{url}", "--expired"], 2, "Missing option '--crawl'"),
    (["clients", "{url}", "--crawl", "bad name"], 2, "is not a crawl name"),
    (["clients", "some/folder", "--crawl", "{crawl}"], 2, "is not a Redis URL"),
    (["clients", "redis://127.0.0.1:1/0", "--crawl", "{crawl}"], 1, "could not be reached"),
])
def test_bad_inputs_are_one_line_errors(redis_url, crawl_name, args, code, text):
    seed(redis_url, crawl_name, 1)
    result = run(*(a.format(url=redis_url, crawl=crawl_name) for a in args))
    assert result.exit_code == code, result.output
    assert text in result.stderr and "Traceback" not in result.output
    if code == 1:
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: ")
