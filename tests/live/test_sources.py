"""Where serve reads a crawl: a job directory's files (again only when they change), its holder's
status.json, a Redis crawl; and the history and state the dashboard keeps of them."""

from __future__ import annotations

import json
import os
import time

import pytest
from livecrawl import DONE, FAILED, PUSHED, fill, publish_status
from popkit import take
from sharedlive import check_read_while_held, read_while_held

from diskfrontier import Frontier, RedisFrontier, Request
from diskfrontier.contract.snapshot import LATEST_FAILURES
from diskfrontier.live.dashboard import RATE_WINDOW, Dashboard, crawl_state
from diskfrontier.live.sources import JobDirSource, json_safe, open_source

SNAPSHOT_KEYS = {"version", "source", "taken", "pid", "machine", "paused_since", "next_ready", "stats", "hosts",
                 "hosts_total", "hosts_ready", "hosts_waiting", "failures"}


def test_a_job_directory_no_process_holds_is_read_from_its_files(jobdir):
    source = open_source(jobdir, None)
    reading = source.read()
    shot = reading.snapshot
    assert reading.origin == "files" and reading.holder is None and reading.note is None
    assert set(shot) == SNAPSHOT_KEYS
    stats = shot["stats"]
    assert (stats["pending"], stats["done"], stats["failed"], stats["in_flight"]) == (
        PUSHED - DONE - FAILED, DONE, FAILED, 0)
    assert sum(stats["pending_by_priority"].values()) == stats["pending"]
    assert shot["hosts_total"] == 7 and shot["hosts_waiting"] == 1 and shot["hosts_ready"] == 6
    hosts = {h["host"]: h for h in shot["hosts"]}
    assert hosts["h3.example"]["blocked_until"] > time.time() + 3000
    assert hosts["h2.example"]["delay"] == 2.5 and hosts["h1.example"]["delay"] is None
    assert len(shot["failures"]) == min(FAILED, LATEST_FAILURES)
    assert shot["failures"][-1]["error"] == f"HTTP 500 number {FAILED - 1} <b>not markup</b>"  # the latest, last
    assert shot["next_ready"] == pytest.approx(shot["taken"])
    json.dumps(json_safe(shot), allow_nan=False)


def test_an_unchanged_directory_is_not_read_again_and_a_changed_one_is(jobdir):
    source = JobDirSource(jobdir)
    first = source.read()
    for _ in range(5):
        again = source.read()
        assert not again.reread and again.snapshot["stats"] == first.snapshot["stats"]
        assert again.snapshot["taken"] >= first.snapshot["taken"]  # the state as of this look
    assert source.full_reads == 1
    with Frontier(jobdir) as frontier:
        frontier.push(Request("https://new.example/"))
        frontier.done(take(frontier))
    changed = source.read()
    assert changed.reread and source.full_reads == 2
    assert changed.snapshot["stats"]["done"] == DONE + 1


def test_a_held_directory_is_read_from_the_status_json_of_its_holder(tmp_path):
    path = str(tmp_path / "job")
    with Frontier(path) as frontier:
        fill(frontier)
        published = publish_status(frontier)
        source = JobDirSource(path)
        reading = source.read()
        assert reading.origin == "status.json" and reading.holder == os.getpid()
        assert reading.snapshot == json.loads(json.dumps(published))
        assert source.full_reads == 0
        publish_status(frontier, pid=os.getpid() + 1)  # left by another process: not this holder's
        reading = source.read()
        assert reading.note is not None
        assert reading.origin == "files" and "publishes no status.json" in reading.note
        assert reading.snapshot["stats"]["in_flight"] is None  # counted as pending while held
    reading = source.read()  # no longer held: its files, whatever status.json says
    assert reading.origin == "files" and reading.holder is None


def test_a_damaged_status_json_is_not_trusted(tmp_path):
    path = str(tmp_path / "job")
    with Frontier(path) as frontier:
        fill(frontier)
        status = os.path.join(path, "status.json")
        for text in ("{", "[]", '{"version": 1}', "[" * 100 + "]" * 100, json.dumps({"version": 99, "stats": {}})):
            with open(status, "w") as f:
                f.write(text)
            reading = JobDirSource(path).read()
            assert reading.origin == "files", text


def test_a_held_directory_without_status_json_is_read_no_more_than_a_share_of_the_time(tmp_path):
    path = str(tmp_path / "job")
    now = [1000.0]
    with Frontier(path) as frontier:
        fill(frontier)
        source = JobDirSource(path, clock=lambda: now[0])
        first = source.read()
        assert first.reread and source.full_reads == 1
        frontier.done(take(frontier))
        cost = first.read_seconds
        assert not source.read().reread  # changed, but read again only after 10 times its cost
        now[0] += 10 * cost + 0.001
        assert source.read().reread and source.full_reads == 2


def test_a_redis_crawl_is_read_through_its_frontier(redis_url, crawl_name):
    reading = read_while_held(lambda: RedisFrontier(redis_url, crawl=crawl_name, delay=0.0), redis_url, crawl_name)
    check_read_while_held(reading, "redis", crawl_name)
    assert set(reading.snapshot) == SNAPSHOT_KEYS


def test_a_missing_redis_crawl_is_an_error(redis_url, crawl_name):
    from diskfrontier import FrontierError

    with pytest.raises(FrontierError):
        open_source(redis_url, crawl_name)


class Script:
    """A source that gives the snapshots it is handed."""

    name = "script"

    def __init__(self) -> None:
        self.next: list = []

    def read(self):
        from diskfrontier.live.sources import Reading

        item = self.next.pop(0)
        if isinstance(item, Exception):
            raise item
        return Reading(item, "redis")

    def all_hosts(self) -> list[dict]:
        return []

    def close(self) -> None:
        pass


def shot(taken, done, pending=100, in_flight=2, **more):
    return {"taken": taken, "stats": {"pending": pending, "in_flight": in_flight, "done": done, "failed": 0},
            "paused_since": None, "next_ready": taken, **more}


def test_the_history_keeps_the_counts_and_the_rate_and_drops_what_is_too_old():
    script = Script()
    now = [0.0]
    dashboard = Dashboard(script, interval=1.0, keep=30.0, clock=lambda: now[0])
    for t in range(0, 60, 2):
        now[0] = 1000.0 + t
        script.next.append(shot(now[0], done=5 * t))
        dashboard.refresh()
    history = dashboard.payload()["history"]
    assert history[-1]["t"] == 1058.0 and history[0]["t"] >= 1058.0 - 30
    assert all(p["rate"] == pytest.approx(5.0) for p in history)
    assert dashboard.payload(since=1054.0)["history"] == history[-2:]
    script.next.append(shot(now[0], done=0))  # the same snapshot time again: no new point
    dashboard.refresh()
    assert dashboard.payload()["history"] == history
    now[0] += 2
    script.next.append(shot(now[0], done=3))  # the counts started again (a new run of the holder)
    dashboard.refresh()
    assert dashboard.payload()["history"][-1]["rate"] is None


def test_the_rate_shown_is_over_the_last_60_seconds_and_idle_once_nothing_is_done():
    """The rate the page states is the done count's rise over the last RATE_WINDOW seconds of snapshots,
    with the seconds it covers; a crawl that stops is idle at the next points, not a rate decaying."""
    script = Script()
    now = [1000.0]
    dashboard = Dashboard(script, interval=1.0, keep=600.0, clock=lambda: now[0])
    def done_at(t):  # 10 done a second for 60 s, then 2 a second
        return 10 * min(t, 60) + 2 * max(0, t - 60)

    for t in range(0, 180, 2):
        now[0] = 1000.0 + t
        script.next.append(shot(now[0], done=done_at(t)))
        dashboard.refresh()
    payload = dashboard.payload()
    assert payload["rate_seconds"] == RATE_WINDOW and payload["rate"] == pytest.approx(2.0)
    assert payload["idle"] is False and payload["state"] == "running"
    for t in range(180, 192, 2):  # nothing done any more, for 10 s
        now[0] = 1000.0 + t
        script.next.append(shot(now[0], done=done_at(178), in_flight=0))
        dashboard.refresh()
    payload = dashboard.payload()
    assert payload["idle"] is True and payload["state"] == "idle"
    assert payload["rate"] == pytest.approx((done_at(178) - done_at(130)) / 60)  # still stated over its window


def test_the_busiest_hosts_are_by_activity_with_blocked_and_failing_ones_first():
    """A snapshot lists the hosts most worked on (pending, in flight and done together), blocked or
    failing ones first; a host whose requests are all done is not crowded out by pending ones."""
    from diskfrontier.contract.snapshot import top_hosts
    from diskfrontier.contract.values import HostInfo

    now = 1000.0
    hosts = [HostInfo(f"p{i}.example", 5, 0, 0, 0.0, now, None, None) for i in range(60)]
    hosts += [HostInfo(f"d{i}.example", 0, 0, 500 + i, 0.0, None, None, None) for i in range(5)]
    hosts += [HostInfo("blocked.example", 0, 0, 1, 0.0, None, now + 60, None),
              HostInfo("failing.example", 1, 0, 0, 0.0, now, None, None, failures=3)]
    listed, total, ready, waiting = top_hosts(hosts, now, count=20)
    names = [h["host"] for h in listed]
    assert (total, ready, waiting) == (67, 61, 0)
    assert sorted(names[:2]) == ["blocked.example", "failing.example"]
    assert names[2:7] == [f"d{i}.example" for i in reversed(range(5))]
    assert len(names) == 20 and all(n.startswith("p") for n in names[7:])


def test_the_status_json_of_a_holder_lists_the_busiest_hosts_by_activity(tmp_path):
    """The holder's status.json lists hosts whose requests are all done and blocked hosts beside the ones with
    pending requests (it listed only those with pending or in-flight ones)."""
    from diskfrontier.contract.snapshot import TOP_HOSTS

    path = str(tmp_path / "job")
    with Frontier(path) as frontier:
        frontier.push_many(Request(f"https://d{n}.example/{k}") for n in range(5) for k in range(20 + n))
        frontier.push(Request("https://blocked.example/0"))
        while (request := frontier.pop()) is not None:
            frontier.done(request)
        frontier.push_many(Request(f"https://p{n}.example/{k}") for n in range(TOP_HOSTS + 10) for k in range(2))
        frontier.block("blocked.example", time.time() + 3600)
        source = JobDirSource(path)
        deadline = time.monotonic() + 60
        while True:  # the holder publishes its status.json every second or so
            reading = source.read()
            if reading.origin == "status.json" and reading.snapshot["hosts_total"] == TOP_HOSTS + 16:
                break
            assert time.monotonic() < deadline, reading.snapshot.get("hosts_total")
            time.sleep(0.2)
    names = [h["host"] for h in reading.snapshot["hosts"]]
    assert len(names) == TOP_HOSTS
    assert names[:6] == ["blocked.example", *(f"d{n}.example" for n in reversed(range(5)))]


@pytest.mark.parametrize(("error", "kind"), [
    ("RuntimeError: HTTP 500 Internal Server Error from 127.0.0.2:8080", "RuntimeError · HTTP 500"),
    ("PermanentError: HTTP 404 for /page/400", "PermanentError · HTTP 404"),
    ("TimeoutError: timed out", "TimeoutError"),
    ("httpx.ConnectError: [Errno 111] Connection refused", "httpx.ConnectError"),
    ("robots.txt", "robots.txt"),
    ("HTTP 503 number 7", "HTTP 503"),
    ("lost 12 bytes at 99", "lost N bytes at N"),
])
def test_the_kind_of_an_error(error, kind):
    from diskfrontier.live.errorkinds import error_kind

    assert error_kind(error) == kind


def test_the_kinds_counted_most_first_and_the_rest_together():
    from diskfrontier.live.errorkinds import OTHER, TOP_KINDS, count_kinds

    errors = [f"E{n}Error: x" for n in range(TOP_KINDS + 3) for _ in range(n + 1)]
    kinds = count_kinds(errors)
    assert list(kinds)[:2] == [f"E{TOP_KINDS + 2}Error", f"E{TOP_KINDS + 1}Error"]
    assert len(kinds) == TOP_KINDS + 1 and kinds[OTHER] == 1 + 2 + 3
    assert sum(kinds.values()) == len(errors)


def test_a_failed_read_is_shown_and_the_last_snapshot_kept():
    script = Script()
    dashboard = Dashboard(script, interval=1.0)
    script.next += [shot(time.time(), 10), ConnectionError("no route")]
    dashboard.refresh()
    dashboard.refresh()
    payload = dashboard.payload()
    assert payload["error"] == "ConnectionError: no route" and payload["snapshot"]["stats"]["done"] == 10


@pytest.mark.parametrize(("origin", "holder", "stats", "extra", "rate", "state"), [
    ("redis", None, {"pending": 5, "in_flight": 1}, {}, None, "running"),
    ("redis", None, {"pending": 5, "in_flight": 0}, {}, 3.0, "running"),
    ("redis", None, {"pending": 0, "in_flight": 0}, {}, None, "finished"),
    ("redis", None, {"pending": 5, "in_flight": 0}, {"paused_since": 1.0}, None, "paused"),
    ("redis", None, {"pending": 5, "in_flight": 0}, {"next_ready": 2e9}, None, "waiting"),
    ("redis", None, {"pending": 5, "in_flight": 0}, {}, 0.0, "idle"),
    ("files", None, {"pending": 5, "in_flight": 0}, {}, None, "stopped"),
    ("files", 123, {"pending": 5, "in_flight": None}, {}, 2.0, "running"),
    ("status.json", 123, {"pending": 5, "in_flight": 3}, {"taken": 0.0}, None, "stale"),
])
def test_the_state_badge(origin, holder, stats, extra, rate, state):
    from diskfrontier.live.sources import Reading

    now = time.time()
    snapshot = {"taken": now, "paused_since": None, "next_ready": now, "stats": stats, **extra}
    assert crawl_state(Reading(snapshot, origin, holder=holder), rate, now, 2.0) == state
