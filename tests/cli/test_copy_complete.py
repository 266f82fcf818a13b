"""``copy`` makes a destination that is whole or absent: failed requests travel with it, an
interrupted copy does not look complete, and running the same copy again finishes it."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
from click.testing import CliRunner

from diskfrontier import (
    FailedRequest,
    Frontier,
    FrontierError,
    IncompleteCopy,
    PostgresFrontier,
    RedisFrontier,
    Request,
)
from diskfrontier.cli import main
from diskfrontier.jobdir.reader import pending_requests
from diskfrontier.transfer.copy import copy_crawl
from diskfrontier.transfer.destination import MARKER, JobDirBuild, build_path

PAIRS = ["job-job", "job-redis", "redis-job", "redis-redis", "job-postgres", "postgres-job", "redis-postgres",
         "postgres-redis", "postgres-postgres"]


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def key(request: Request) -> tuple:
    return (request.url, request.method, request.body, request.priority, request.slot, request.attempts,
            request.dont_filter, json.dumps(request.meta, sort_keys=True))


def fill(frontier) -> None:
    """Pending requests, one failed after two retries, one failed at once, one done."""
    frontier.push_many([Request(f"https://a.example/{i}", priority=i % 3) for i in range(5)])
    frontier.push(Request("https://b.example/flaky", meta={"depth": 1}, priority=9))
    frontier.push(Request("https://c.example/gone", priority=8))
    frontier.push(Request("https://c.example/ok", priority=7))
    flaky = frontier.pop()
    assert flaky.url == "https://b.example/flaky"
    for _ in range(2):
        frontier.retry(flaky)
        flaky = frontier.pop()
        assert flaky.url == "https://b.example/flaky"
    frontier.fail(flaky, "HTTP 503 three times")
    gone = frontier.pop()
    assert gone.url == "https://c.example/gone"
    frontier.fail(gone, "DNS: no such host ü")
    ok = frontier.pop()
    frontier.done(ok)


def failed_of(frontier) -> list[tuple]:
    return [(key(f.request), f.error, round(f.failed_at, 3)) for f in frontier.failed()]


class Side:
    """One end of a copy: a job directory, a Redis crawl or a PostgreSQL crawl, with the arguments that name it."""

    def __init__(self, kind: str, tmp_path, url: str | None, name: str) -> None:
        self.kind = kind
        target = str(tmp_path / name) if kind == "job" else url
        assert target is not None, "a server's side needs the server's URL"
        self.target: str = target
        self.crawl = None if kind == "job" else name

    def open(self, create: bool = True):
        if self.crawl is None:
            if not create and not os.path.exists(os.path.join(self.target, "frontier.json")):
                raise FrontierError(f"{self.target} is no job directory")
            return Frontier(self.target)
        if self.kind == "postgres":
            return PostgresFrontier(self.target, crawl=self.crawl, create=create)
        return RedisFrontier(self.target, crawl=self.crawl, create=create)

    def args(self, option: str) -> list[str]:
        return [self.target] if self.crawl is None else [self.target, option, self.crawl]


def sides(pair: str, tmp_path, request, crawl_name: str) -> tuple[Side, Side]:
    src_kind, dst_kind = pair.split("-")
    urls = {kind: request.getfixturevalue(f"{kind}_url") for kind in ("redis", "postgres") if kind in pair}
    return (Side(src_kind, tmp_path, urls.get(src_kind), crawl_name + "src"),
            Side(dst_kind, tmp_path, urls.get(dst_kind), crawl_name + "dst"))


@pytest.mark.parametrize("pair", PAIRS)
def test_copy_carries_failed_requests_with_their_errors_attempts_and_times(pair, tmp_path, request, crawl_name):
    src, dst = sides(pair, tmp_path, request, crawl_name)
    with src.open() as f:
        fill(f)
        expected_failed = failed_of(f)
        expected_pending = sorted(map(key, f.pending_requests() if src.crawl else pending_requests(src.target)))
        done = {h.host: h.done for h in f.hosts()}
    assert [(k[0][0], k[0][5], k[1]) for k in expected_failed] == [
        ("https://b.example/flaky", 2, "HTTP 503 three times"), ("https://c.example/gone", 0, "DNS: no such host ü")]

    result = run("copy", *src.args("--from-crawl"), *dst.args("--to-crawl"), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["failed"] == 2

    with dst.open(create=False) as f:
        assert failed_of(f) == expected_failed
        assert f.stats()["failed"] == 2
        assert {h.host: h.done for h in f.hosts()} == done  # a failure counts as done for its host
        assert sorted(map(key, f.pending_requests() if dst.crawl else pending_requests(dst.target))) == \
            expected_pending
        assert f.requeue_failed() == 2  # and they can be worked on again, attempts from 0
        assert f.push(Request("https://c.example/gone")) is False  # still seen
    shown = run("failed", *dst.args("--crawl"))
    assert shown.exit_code == 0 and "no failed requests" in shown.output


def _interrupt_on(monkeypatch, cls, name: str) -> None:
    """Make ``cls.name`` raise KeyboardInterrupt, as a Ctrl-C half-way through the copy."""

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cls, name, interrupted)


def test_an_interrupted_copy_to_a_job_directory_leaves_no_directory_and_a_rerun_finishes(tmp_path, monkeypatch):
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    with Frontier(src) as f:
        f.push_many([Request(f"https://a.example/{i}") for i in range(50)])
        f.mark_seen([bytes(20)])
    with monkeypatch.context() as patch:
        _interrupt_on(patch, Frontier, "mark_seen")  # after the pending requests were written
        with pytest.raises(KeyboardInterrupt):
            copy_crawl(src, dst)
    assert not os.path.exists(dst)  # nothing that could be taken for the crawl
    assert os.listdir(tmp_path) == ["src"]  # and nothing left behind
    result = run("inspect", dst)
    assert result.exit_code == 2 and "does not exist" in result.output

    result = run("copy", src, dst)
    assert result.exit_code == 0, result.output
    assert sorted(r.url for r in pending_requests(dst)) == sorted(f"https://a.example/{i}" for i in range(50))


def test_a_copy_killed_between_its_close_and_its_rename_is_redone(tmp_path):
    """The build is closed (its files written, outcomes.json among them) and its marker removed just before the
    rename: a kill there leaves a folder of job directory files only, which the rerun removes as its own."""
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    with Frontier(src) as f:
        f.push_many([Request(f"https://a.example/{i}") for i in range(10)])
    build = JobDirBuild(dst, "lifo", src)
    build.frontier.push(Request("https://a.example/0"))
    build.frontier.close()
    leftover = build_path(dst)
    os.unlink(os.path.join(leftover, MARKER))
    assert "outcomes.json" in os.listdir(leftover)
    result = run("copy", src, dst)
    assert result.exit_code == 0, result.output
    assert f"note: an unfinished copy to {dst} was found ({leftover}): it was removed" in result.output
    assert not os.path.exists(leftover) and len(pending_requests(dst)) == 10


def test_a_killed_copy_leaves_a_build_folder_that_the_rerun_removes(tmp_path):
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    with Frontier(src) as f:
        f.push_many([Request(f"https://a.example/{i}") for i in range(10)])
    build = JobDirBuild(dst, "lifo", src)  # as a copy killed half-way leaves it
    build.frontier.push(Request("https://a.example/0"))
    build.frontier.close()
    leftover = build_path(dst)
    assert os.path.exists(os.path.join(leftover, MARKER)) and not os.path.exists(dst)
    for command in ("inspect", "verify", "peek"):  # the build folder is refused by name too
        result = run(command, leftover)
        assert result.exit_code == 1, result.output
        assert result.output == (f"Error: {leftover} is a job directory that 'diskfrontier copy' is building, or was "
                                 f"building when it was stopped: it is not complete; run the same copy again to "
                                 f"redo it\n")

    result = run("copy", src, dst)
    assert result.exit_code == 0, result.output
    assert f"note: an unfinished copy to {dst} was found ({leftover}): it was removed" in result.output
    assert not os.path.exists(leftover)
    assert len(pending_requests(dst)) == 10
    assert not os.path.exists(os.path.join(dst, MARKER))


def test_a_folder_in_the_way_that_no_copy_made_is_not_deleted(tmp_path):
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    assert run("push", src, "https://a.example/").exit_code == 0
    mine = build_path(dst)
    os.mkdir(mine)
    with open(os.path.join(mine, "notes.txt"), "w") as f:
        f.write("mine\n")
    result = run("copy", src, dst)
    assert result.exit_code == 1, result.output
    assert result.output == (f"Error: {mine} is in the way of the copy to {dst} and is not an unfinished copy "
                             f"(it holds notes.txt, which no copy writes): move it away, then copy again\n")
    assert os.listdir(mine) == ["notes.txt"] and not os.path.exists(dst)


def test_an_interrupted_copy_to_redis_is_refused_by_every_open_until_a_rerun_redoes_it(tmp_path, monkeypatch,
                                                                                      redis_url, crawl_name):
    src = str(tmp_path / "src")
    with Frontier(src) as f:
        f.push_many([Request(f"https://a.example/{i}") for i in range(50)])
        f.mark_seen([bytes(20)])
    with monkeypatch.context() as patch:
        _interrupt_on(patch, RedisFrontier, "mark_seen")
        with pytest.raises(KeyboardInterrupt):
            copy_crawl(src, redis_url, to_crawl=crawl_name)
    with pytest.raises(IncompleteCopy, match=r"is an unfinished copy of .*run the same 'diskfrontier copy' again"):
        RedisFrontier(redis_url, crawl=crawl_name, create=False)
    for command in ("inspect", "peek", "hosts", "failed", "export"):
        result = run(command, redis_url, "--crawl", crawl_name)
        assert result.exit_code == 1, (command, result.output)
        assert result.output.startswith(f"Error: crawl '{crawl_name}' in Redis at {redis_url} is an unfinished "
                                        f"copy of {src}"), result.output
    result = run("push", redis_url, "--crawl", crawl_name, "https://z.example/")
    assert result.exit_code == 1 and "unfinished copy" in result.output

    result = run("copy", src, redis_url, "--to-crawl", crawl_name)
    assert result.exit_code == 0, result.output
    assert "it was deleted and the copy done again" in result.output
    with RedisFrontier(redis_url, crawl=crawl_name, create=False) as r:
        assert sorted(x.url for x in r.pending_requests()) == sorted(f"https://a.example/{i}" for i in range(50))
        assert r.stats()["seen"] == 51


def test_a_redis_copy_that_fails_says_to_run_it_again(tmp_path, monkeypatch, redis_url, crawl_name):
    src = str(tmp_path / "src")
    assert run("push", src, "https://a.example/").exit_code == 0

    def broken(self, *args, **kwargs):
        raise FrontierError("Redis went away")

    monkeypatch.setattr(RedisFrontier, "mark_seen", broken)
    result = run("copy", src, redis_url, "--to-crawl", crawl_name)
    assert result.exit_code == 1
    assert result.output == (f"Error: Redis went away (the copy to crawl '{crawl_name}' at {redis_url} did not "
                             f"finish; it is marked unfinished: run the same copy again to redo it)\n")


@pytest.mark.parametrize("kind", ["job", "redis", "postgres"])
def test_record_failed_stores_what_fail_leaves_and_counts_against_a_budget(kind, tmp_path, request, crawl_name):
    side = Side(kind, tmp_path, request.getfixturevalue(f"{kind}_url") if kind != "job" else None, crawl_name)
    flaky = Request("https://a.example/x", meta={"k": [1, 2]}, priority=4)
    flaky.attempts = 5
    with side.open() as f:
        f.push_many([Request(f"https://a.example/{i}") for i in range(3)])
        f.set_budget("a.example", 2)
        f.done(f.pop())
        assert f.record_failed([FailedRequest(flaky, "timed out", 1234.5)]) == 1
        assert f.pop() is None  # one done and one failed: the budget of 2 is spent
        assert [(x.request.url, x.request.attempts, x.request.meta, x.error, x.failed_at) for x in f.failed()] == [
            ("https://a.example/x", 5, {"k": [1, 2]}, "timed out", 1234.5)]
        assert f.push(Request("https://a.example/x")) is False  # marked seen
        with pytest.raises(ValueError, match=r"failed_at must be a time\.time"):
            f.record_failed([FailedRequest(flaky, "bad time", -1.0)])
    with side.open(create=False) as f:  # kept across a reopen
        assert [x.error for x in f.failed()] == ["timed out"]
        assert {h.host: h.done for h in f.hosts()} == {"a.example": 2}


def test_the_folder_a_copy_builds_in_publishes_no_status_json(tmp_path):
    """A staging frontier publishes nothing: status.json there would make a rerun after a kill refuse the
    leftover as something no copy wrote. A frontier opened beside it shows how long publishing takes."""
    build = JobDirBuild(str(tmp_path / "dst"), "lifo", "src")
    try:
        build.frontier.push(Request("https://a.example/"))
        with Frontier(str(tmp_path / "other")) as other:
            other.push(Request("https://a.example/"))
            deadline = time.monotonic() + 60
            while not os.path.exists(os.path.join(other.path, "status.json")):
                assert time.monotonic() < deadline, "the frontier beside it never published status.json"
                time.sleep(0.02)
            assert not os.path.lexists(os.path.join(build.path, "status.json"))
    finally:
        build.abandon()


@pytest.mark.parametrize("extra", ["status.json", "inbox", "robots", "hosts.health", "notes.txt", "marker-temp"])
def test_a_rerun_recognises_its_build_folder_by_its_marker_whatever_else_is_in_it(tmp_path, extra):
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    with Frontier(src) as f:
        f.push_many([Request(f"https://a.example/{i}") for i in range(10)])
    build = JobDirBuild(dst, "lifo", src)  # as a copy killed half-way leaves it
    build.frontier.close()
    leftover = build_path(dst)
    if extra in ("inbox", "robots"):
        os.mkdir(os.path.join(leftover, extra))
        with open(os.path.join(leftover, extra, "x"), "w") as f:
            f.write("{}")
    elif extra == "marker-temp":  # killed while the marker was written: only its temp file is there
        shutil.rmtree(leftover)
        os.mkdir(leftover)
        with open(os.path.join(leftover, f"{MARKER}.tmp-4242-0123456789ab"), "w") as f:
            f.write('{"copy_of"')
    else:
        with open(os.path.join(leftover, extra), "w") as f:
            f.write('{"pid": 1}')

    result = run("copy", src, dst)
    assert result.exit_code == 0, result.output
    assert f"note: an unfinished copy to {dst} was found ({leftover}): it was removed" in result.output
    assert not os.path.exists(leftover)
    assert sorted(r.url for r in pending_requests(dst)) == sorted(f"https://a.example/{i}" for i in range(10))


def test_an_interrupted_copy_to_postgres_leaves_no_crawl_and_a_rerun_finishes(tmp_path, monkeypatch, postgres_url,
                                                                            crawl_name):
    from diskfrontier.pgfrontier.building import build_name

    src = str(tmp_path / "src")
    with Frontier(src) as f:
        f.push_many([Request(f"https://a.example/{i}") for i in range(50)])
        f.mark_seen([bytes(20)])
    with monkeypatch.context() as patch:
        _interrupt_on(patch, PostgresFrontier, "mark_seen")
        with pytest.raises(KeyboardInterrupt):
            copy_crawl(src, postgres_url, to_crawl=crawl_name)
    with pytest.raises(FrontierError, match="there is no crawl"):
        PostgresFrontier(postgres_url, crawl=crawl_name, create=False)
    with pytest.raises(FrontierError, match="there is no crawl"):  # the build was dropped too
        PostgresFrontier(postgres_url, crawl=build_name(crawl_name), create=False)
    with monkeypatch.context() as patch:  # a copy killed half-way leaves its build: the rerun drops it
        patch.setattr("diskfrontier.transfer.destination.PostgresBuild.abandon", lambda self: self.frontier.close())
        _interrupt_on(patch, PostgresFrontier, "mark_seen")
        with pytest.raises(KeyboardInterrupt):
            copy_crawl(src, postgres_url, to_crawl=crawl_name)
    with PostgresFrontier(postgres_url, crawl=build_name(crawl_name), create=False) as left:
        assert len(left) == 50
    result = run("copy", src, postgres_url, "--to-crawl", crawl_name)
    assert result.exit_code == 0, result.output
    assert "it was deleted and the copy done again" in result.output
    with PostgresFrontier(postgres_url, crawl=crawl_name, create=False) as p:
        assert sorted(x.url for x in p.pending_requests()) == sorted(f"https://a.example/{i}" for i in range(50))
        assert p.stats()["seen"] == 51
    with pytest.raises(FrontierError, match="there is no crawl"):
        PostgresFrontier(postgres_url, crawl=build_name(crawl_name), create=False)
    result = run("copy", src, postgres_url, "--to-crawl", crawl_name)
    assert result.exit_code == 1 and "is not empty" in result.output


def test_a_copy_into_an_empty_postgres_crawl_replaces_it_and_a_long_name_is_built_apart(tmp_path, postgres_url):
    from diskfrontier.pgfrontier.building import build_name

    src = str(tmp_path / "src")
    assert run("push", src, "https://a.example/", "https://b.example/").exit_code == 0
    long_name = "n" * 60
    assert len(build_name(long_name)) <= 60 and build_name(long_name) != build_name("n" * 59)
    PostgresFrontier(postgres_url, crawl=long_name, new_order="lifo").close()  # made, empty
    result = run("copy", src, postgres_url, "--to-crawl", long_name)
    assert result.exit_code == 0, result.output
    with PostgresFrontier(postgres_url, crawl=long_name, create=False) as p:
        assert len(p) == 2
    PostgresFrontier(postgres_url, crawl="fifo-one", new_order="fifo").close()
    result = run("copy", src, postgres_url, "--to-crawl", "fifo-one")
    assert result.exit_code == 1 and "exists (empty) and is FIFO, and the source is LIFO" in result.output
