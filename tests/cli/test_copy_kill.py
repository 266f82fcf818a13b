"""Kill campaign: ``diskfrontier copy`` killed with SIGKILL at many points, job directory -> Redis,
Redis -> job directory, job directory -> job directory, and to and from PostgreSQL. Every destination
either does not open as a crawl (absent, refused as an unfinished copy, or only its build left) or
opens with exactly the source's pending and failed requests and seen set; after each kill the same
command run again (itself killed once in a while first) finishes the copy, whatever the kill left."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

from diskfrontier import Frontier, FrontierError, IncompleteCopy, PostgresFrontier, RedisFrontier, Request
from diskfrontier.access.targets import open_view
from diskfrontier.jobdir.reader import failed_requests, pending_requests
from diskfrontier.jobdir.seenindex import key_of
from diskfrontier.pgfrontier import building
from diskfrontier.transfer.copy import copy_crawl
from diskfrontier.transfer.destination import build_path

pytestmark = [pytest.mark.crash, pytest.mark.slow]

SCRIPT = os.path.join(os.path.dirname(sys.executable), "diskfrontier")
PENDING, FAILED, DONE = 4000, 150, 1500
SEEN = 400_000  # more fingerprints marked seen: the copy then writes for long enough to be killed half-way
KILLS = 10  # per direction


def key(request: Request) -> tuple:
    return (request.url, request.priority, request.slot, request.attempts, request.dont_filter,
            json.dumps(request.meta, sort_keys=True))


def failed_key(entry) -> tuple:
    return (key(entry.request), entry.error, entry.failed_at)


def seen_keys(target: str, crawl: str | None = None) -> set[int]:
    """The 64-bit keys of a crawl's seen set (what both backends dedupe by)."""
    view = open_view(target, crawl)
    try:
        return {key_of(fingerprint) for fingerprint in view.seen_fingerprints()}
    finally:
        view.close()


class Expected:
    """What the source holds: its pending and failed requests and its seen set."""

    def __init__(self, job: str) -> None:
        self.pending = sorted(map(key, pending_requests(job)))
        self.failed = sorted(map(failed_key, failed_requests(job)))
        self.seen = seen_keys(job)


def build_source(job: str) -> None:
    with Frontier(job) as f:
        f.push_many([Request(f"https://h{i % 40}.example/done/{i}") for i in range(DONE)])
        while (r := f.pop()) is not None:
            f.done(r)
        f.push_many([Request(f"https://h{i % 40}.example/failed/{i}", meta={"i": i}) for i in range(FAILED)])
        for i in range(FAILED):
            r = f.pop()
            assert r is not None
            if i % 3 == 0:
                f.retry(r)
                r = f.pop()
                assert r is not None
            f.fail(r, f"error {i}")
        f.push_many([Request(f"https://h{i % 40}.example/p/{i}", priority=i % 5, meta={"n": i})
                     for i in range(PENDING)])
        f.set_delay("h1.example", 2.0)
        f.set_budget("h2.example", 10**6)
        rng = random.Random(5)
        f.mark_seen([rng.randbytes(20) for _ in range(SEEN)])


class Target:
    """A copy destination: a job directory, a Redis crawl or a PostgreSQL crawl, how to name it, look at it and
    clear it."""

    def __init__(self, job: str | None, url: str | None = None, crawl: str | None = None) -> None:
        self.job, self.url, self.crawl = job, url, crawl
        self.postgres = url is not None and url.startswith("postgresql://")

    def args(self) -> list[str]:
        if self.job:
            return [self.job]
        assert self.url is not None and self.crawl is not None
        return [self.url, "--to-crawl", self.crawl]

    def state(self, expected: Expected) -> str:
        """'absent', 'refused' (an unfinished copy), 'complete', or what is wrong with it."""
        if self.job:
            if not os.path.exists(os.path.join(self.job, "frontier.json")):
                return "unfinished build left" if os.path.exists(build_path(self.job)) else "absent"
            with Frontier(self.job) as f:  # it opens as a crawl: then it must be the whole of it
                count, failed = len(f), sorted(map(failed_key, f.failed()))
            pending = sorted(map(key, pending_requests(self.job)))
        elif self.postgres:
            assert self.url is not None and self.crawl is not None
            try:
                p = PostgresFrontier(self.url, crawl=self.crawl, create=False, renew=False)
            except FrontierError as exc:
                assert "there is no crawl" in str(exc)
                return "unfinished build left" if building.exists(self.url, building.build_name(self.crawl)) \
                    else "absent"
            with p:
                count, failed = len(p), sorted(map(failed_key, p.failed()))
                pending = sorted(map(key, p.pending_requests()))
        else:
            assert self.url is not None and self.crawl is not None
            try:
                r = RedisFrontier(self.url, crawl=self.crawl, create=False)
            except IncompleteCopy:
                return "refused"
            except FrontierError as exc:
                assert "there is no crawl" in str(exc)
                return "absent"
            with r:
                count, failed = len(r), sorted(map(failed_key, r.failed()))
                pending = sorted(map(key, r.pending_requests()))
        if count != len(expected.pending) or pending != expected.pending:
            return f"short: {count} of {len(expected.pending)} pending"
        if failed != expected.failed:
            return f"short: {len(failed)} of {len(expected.failed)} failed"
        seen = seen_keys(self.job) if self.job else seen_keys(self.url, self.crawl)  # type: ignore[arg-type]
        if seen != expected.seen:
            return f"short: {len(seen & expected.seen)} of {len(expected.seen)} seen, {len(seen - expected.seen)} more"
        return "complete"

    def started(self) -> bool:
        """Whether a copy into it has begun writing (its build folder, or its crawl marked unfinished)."""
        if self.job:
            return os.path.exists(build_path(self.job))
        assert self.url is not None and self.crawl is not None
        if self.postgres:
            return building.exists(self.url, building.build_name(self.crawl)) or building.exists(self.url, self.crawl)
        try:
            RedisFrontier(self.url, crawl=self.crawl, create=False).close()
        except IncompleteCopy:
            return True
        except FrontierError:
            return False
        return True

    def reset(self) -> None:
        """Remove whatever a run left (a complete copy, a build folder, a crawl marked unfinished)."""
        if self.job:
            shutil.rmtree(self.job, ignore_errors=True)
            shutil.rmtree(build_path(self.job), ignore_errors=True)
            return
        if self.postgres:
            assert self.url is not None and self.crawl is not None
            building.drop(self.url, self.crawl)
            building.drop(self.url, building.build_name(self.crawl))
            return
        import redis

        assert self.url is not None
        client = redis.Redis.from_url(self.url)
        keys = list(client.scan_iter(match=f"df:{{{self.crawl}}}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()

    def clear(self) -> None:
        """Remove a complete copy, so that the next run makes it again."""
        if self.job:
            shutil.rmtree(self.job)
        elif self.postgres:
            assert self.url is not None and self.crawl is not None
            PostgresFrontier(self.url, crawl=self.crawl, create=False).drop_crawl()
        else:
            assert self.url is not None and self.crawl is not None
            RedisFrontier(self.url, crawl=self.crawl, create=False).drop_crawl()


def spawn(*args: str) -> subprocess.Popen:
    """The installed ``diskfrontier`` command as a child process."""
    return subprocess.Popen([SCRIPT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def run_copy(src_args: list[str], target: Target) -> tuple[int, str]:
    child = spawn("copy", *src_args, *target.args())
    _, err = child.communicate(timeout=120)
    return child.returncode, err


LEFT = ("absent", "unfinished build left", "refused", "complete")  # what a kill may leave


def kill_after(src_args: list[str], target: Target, delay: float, expected: Expected) -> str:
    """Start the copy, SIGKILL it after ``delay`` seconds; what it left."""
    child = spawn("copy", *src_args, *target.args())
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    child.communicate()
    return target.state(expected)


def campaign(src_args: list[str], target: Target, expected: Expected, tally: dict[str, int]) -> None:
    start = time.monotonic()
    assert run_copy(["/nonexistent/src"], Target("/nonexistent/dst"))[0] == 2
    t_startup = time.monotonic() - start
    start = time.monotonic()
    code, err = run_copy(src_args, target)
    t_full = time.monotonic() - start
    assert code == 0, err
    assert target.state(expected) == "complete"
    target.clear()
    # Kill points spread from the end of start-up to past the end of a whole copy. After each kill the
    # same command runs again and must finish the copy; every other time that rerun is first killed
    # too, half-way to the first kill's point (a rerun over a leftover, stopped while it removes it or
    # builds anew).
    first = 0.8 * t_startup
    for k in range(KILLS):
        delay = first + (1.1 * t_full - first) * k / (KILLS - 1)
        state = kill_after(src_args, target, delay, expected)
        tally[state] = tally.get(state, 0) + 1
        assert state in LEFT, (delay, state)
        if state != "complete" and k % 2:
            again = kill_after(src_args, target, (first + delay) / 2, expected)
            tally["rerun killed"] = tally.get("rerun killed", 0) + 1
            assert again in LEFT, (delay, again)
            state = again
        if state != "complete":
            code, err = run_copy(src_args, target)
            assert code == 0, (delay, state, err)
            assert target.state(expected) == "complete", (delay, state)
            tally["finished by a rerun"] = tally.get("finished by a rerun", 0) + 1
        target.clear()
    # Ctrl-C half-way: the command says Aborted. and leaves nothing that opens as a crawl. The signal is
    # sent once the copy has begun writing (not at a time measured earlier, which a loaded machine outruns:
    # a Ctrl-C during Python's own start-up is Python's KeyboardInterrupt, before the command runs).
    target.reset()  # so that started() sees this run begin
    child = spawn("copy", *src_args, *target.args())
    deadline = time.monotonic() + 60
    while not target.started() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    state = target.state(expected)
    if state == "complete":  # the copy had finished (the signal came as it was ending)
        target.clear()
    else:
        assert child.returncode == 130 and err.splitlines()[-1] == "Aborted.", (child.returncode, err)
        assert state in ("absent", "refused", "unfinished build left"), state  # a build is not the crawl
    code, err = run_copy(src_args, target)  # the same copy again finishes what the last stop left
    assert code == 0, err
    assert target.state(expected) == "complete"


@pytest.mark.parametrize("direction", ["job dir -> Redis", "Redis -> job dir", "job dir -> job dir",
                                       "job dir -> PostgreSQL", "PostgreSQL -> job dir", "Redis -> PostgreSQL",
                                       "PostgreSQL -> Redis"])
def test_a_copy_killed_at_any_point_is_finished_by_running_it_again(tmp_path, request, crawl_name, direction):
    redis_url: str = request.getfixturevalue("redis_url") if "Redis" in direction else ""
    postgres_url: str = request.getfixturevalue("postgres_url") if "PostgreSQL" in direction else ""
    job = str(tmp_path / "src")
    build_source(job)
    expected = Expected(job)
    assert (len(expected.pending), len(expected.failed)) == (PENDING, FAILED)
    assert len(expected.seen) == PENDING + FAILED + DONE + SEEN
    tally: dict[str, int] = {}
    if direction == "job dir -> Redis":
        campaign([job], Target(None, redis_url, crawl_name + "-dst"), expected, tally)
    elif direction == "Redis -> job dir":
        src_crawl = crawl_name + "-src"
        copy_crawl(job, redis_url, to_crawl=src_crawl)  # the Redis source
        campaign([redis_url, "--from-crawl", src_crawl], Target(str(tmp_path / "back")), expected, tally)
    elif direction == "job dir -> PostgreSQL":
        campaign([job], Target(None, postgres_url, crawl_name + "-dst"), expected, tally)
    elif direction == "PostgreSQL -> job dir":
        src_crawl = crawl_name + "-src"
        copy_crawl(job, postgres_url, to_crawl=src_crawl)  # the PostgreSQL source
        campaign([postgres_url, "--from-crawl", src_crawl], Target(str(tmp_path / "back")), expected, tally)
    elif direction == "Redis -> PostgreSQL":
        src_crawl = crawl_name + "-src"
        copy_crawl(job, redis_url, to_crawl=src_crawl)
        campaign([redis_url, "--from-crawl", src_crawl], Target(None, postgres_url, crawl_name + "-dst"), expected,
                 tally)
    elif direction == "PostgreSQL -> Redis":
        src_crawl = crawl_name + "-src"
        copy_crawl(job, postgres_url, to_crawl=src_crawl)
        campaign([postgres_url, "--from-crawl", src_crawl], Target(None, redis_url, crawl_name + "-dst"), expected,
                 tally)
    else:
        campaign([job], Target(str(tmp_path / "other")), expected, tally)

    print(f"\ncopy kill campaign: {direction} {tally}")
    assert sum(n for state, n in tally.items() if state in LEFT) == KILLS
    left = sum(n for state, n in tally.items() if state in ("unfinished build left", "refused"))
    assert left > 0, f"no kill fell while the copy was writing: {tally}"
    assert tally.get("finished by a rerun", 0) >= left
    destination = {"Redis -> job dir": ["back"], "job dir -> job dir": ["other"],
                   "PostgreSQL -> job dir": ["back"]}.get(direction, [])
    for folder in destination:
        assert not os.path.exists(build_path(str(tmp_path / folder)))  # the last run removed what the kills left
    assert sorted(os.listdir(tmp_path)) == sorted(["src", *destination])
