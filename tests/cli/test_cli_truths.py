"""What the commands and the crawl log say agrees: -n 0 means all everywhere, and a failed request's
retries are counted alike by the crawl log and by ``diskfrontier failed``."""

from __future__ import annotations

import logging

from click.testing import CliRunner
from popkit import take

from diskfrontier import Frontier, RedisFrontier, Request, crawl
from diskfrontier.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_the_crawl_log_and_failed_count_the_retries_of_a_failed_request_alike(tmp_path, caplog):
    job = str(tmp_path / "job")

    def broken(request, frontier):
        raise ConnectionError("refused")

    with Frontier(job) as frontier:
        frontier.push(Request("https://a.example/"))
        with caplog.at_level(logging.INFO, logger="diskfrontier"):
            crawl(frontier, broken, workers=1, retries=3, backoff=0.001, progress=False)
        assert [f.request.attempts for f in frontier.failed()] == [3]
    logged = [r.getMessage() for r in caplog.records if "failed after" in r.getMessage()]
    assert logged == ["failed after 3 retries: https://a.example/: ConnectionError: refused"]
    retried = [r.getMessage().split(" of ")[0] for r in caplog.records if r.getMessage().startswith("retry ")]
    assert retried == ["retry 1", "retry 2", "retry 3"]
    shown = run("failed", job).output.splitlines()
    assert shown[0].endswith("  3 retries  GET  https://a.example/")


def test_n_0_means_all_for_peek_hosts_and_failed(tmp_path):
    job = str(tmp_path / "job")
    with Frontier(job) as f:
        f.push_many([Request(f"https://h{i}.example/{i}") for i in range(30)])
        for _ in range(25):
            f.fail(take(f), "gone")
    peeked = run("peek", job, "-n", "0").output.splitlines()
    assert len(peeked) == 5
    assert len(run("hosts", job, "-n", "0").output.splitlines()) == 1 + 30
    assert len(run("failed", job, "-n", "0").output.splitlines()) == 2 * 25
    assert len(run("peek", job, "-n", "2").output.splitlines()) == 2
    for command in ("peek", "hosts", "failed"):
        help_text = " ".join(run(command, "--help").output.split())
        assert "(0: all" in help_text, command


def test_peek_n_0_of_a_redis_crawl_shows_all(redis_url, crawl_name):
    with RedisFrontier(redis_url, crawl=crawl_name) as r:
        r.push_many([Request(f"https://h{i}.example/", priority=i) for i in range(30)])
    result = run("peek", redis_url, "--crawl", crawl_name, "-n", "0")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("30 of 30 pending, by priority")
    assert [line.split()[-1] for line in lines[1:]] == [f"https://h{i}.example/" for i in range(29, -1, -1)]
