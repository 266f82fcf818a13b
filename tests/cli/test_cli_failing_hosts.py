"""What ``hosts`` and ``inspect`` show of hosts' consecutive failures, on a job directory closed, killed and
held, and on a Redis crawl."""

from __future__ import annotations

import json

from click.testing import CliRunner

from diskfrontier import Frontier, RedisFrontier, Request
from diskfrontier.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def fill(f) -> None:
    f.push_many([Request("https://bad.example/1"), Request("https://ok.example/1")])
    for _ in range(3):
        f.host_failed("bad.example", block_after=3, backoff=600.0)
    f.host_failed("gone.example")  # a host known only by its failure


def test_hosts_and_inspect_show_failures_of_a_job_directory(tmp_path):
    for how in ("closed", "killed", "held"):
        job = str(tmp_path / how)
        f = Frontier(job)
        fill(f)
        if how == "closed":
            f.close()
        elif how == "killed":  # as after kill -9
            f._closing.release_files()
            f._lock.release()
        rows = {r["host"]: r for r in json.loads(run("hosts", job, "--json").output)}
        assert rows["bad.example"]["failures"] == 3 and rows["bad.example"]["blocked_until"] is not None
        assert rows["ok.example"]["failures"] == 0 and rows["gone.example"]["failures"] == 1
        lines = run("hosts", job, "--sort", "failures").output.splitlines()
        assert "failures" in lines[0]
        assert lines[1].split()[0] == "bad.example" and lines[1].split()[5] == "3", lines
        text = run("inspect", job).output
        assert "failing hosts" in text and "bad.example (3)" in text, text
        assert json.loads(run("inspect", job, "--json").output)["failing_hosts"] == {"bad.example": 3,
                                                                                   "gone.example": 1}
        if how == "held":
            f.close()


def test_hosts_and_inspect_show_failures_of_a_redis_crawl(redis_url, crawl_name):
    with RedisFrontier(redis_url, crawl=crawl_name) as f:
        fill(f)
    rows = {r["host"]: r for r in json.loads(run("hosts", redis_url, "--crawl", crawl_name, "--json").output)}
    assert rows["bad.example"]["failures"] == 3 and rows["bad.example"]["blocked_until"] is not None
    assert rows["gone.example"]["failures"] == 1 and rows["ok.example"]["failures"] == 0
    text = run("inspect", redis_url, "--crawl", crawl_name).output
    assert "failing hosts" in text and "bad.example (3), gone.example (1)" in text, text
    assert json.loads(run("inspect", redis_url, "--crawl", crawl_name, "--json").output)["failing_hosts"] == {
        "bad.example": 3, "gone.example": 1}
