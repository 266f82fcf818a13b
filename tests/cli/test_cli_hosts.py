"""diskfrontier hosts and host, and what inspect and peek show of hosts and time."""

from __future__ import annotations

import json
import time

from click.testing import CliRunner
from popkit import take

from diskfrontier import Frontier, Request
from diskfrontier.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def make(job, *, dirty: bool = False) -> None:
    f = Frontier(job)
    f.push_many([Request(f"https://a.example/{i}") for i in range(3)] + [Request("https://b.example/")])
    f.done(take(f))
    f.push(Request("https://c.example/later"), not_before=time.time() + 600)
    if dirty:  # as after kill -9
        f._closing.release_files()
        f._lock.release()
    else:
        f.close()


def test_hosts_lists_counts_and_settings_clean_and_after_a_crash(tmp_path):
    for dirty in (False, True):
        job = str(tmp_path / f"job{dirty}")
        make(job, dirty=dirty)
        rows = {r["host"]: r for r in json.loads(run("hosts", job, "--json").output)}
        assert rows["a.example"]["pending"] + rows["b.example"]["pending"] == 3
        assert rows["a.example"]["done"] + rows["b.example"]["done"] == 1
        assert rows["c.example"]["pending"] == 1 and rows["c.example"]["delay"] is None
        text = run("hosts", job, "--sort", "host", "-n", "1").output
        assert text.splitlines()[1].startswith("a.example") and "2 more" in text


def test_host_changes_settings_that_last(tmp_path):
    job = str(tmp_path / "job")
    make(job)
    out = json.loads(run("host", job, "a.example", "--delay", "2.5", "--block-for", "60", "--budget", "7",
                         "--json").output)
    assert out["delay"] == 2.5 and out["budget"] == 7 and out["blocked_until"] > time.time() + 50
    rows = {r["host"]: r for r in json.loads(run("hosts", job, "--json", "--sort", "blocked").output)}
    assert rows["a.example"]["delay"] == 2.5 and rows["a.example"]["budget"] == 7
    out = json.loads(run("host", job, "a.example", "--default-delay", "--unblock", "--no-budget", "--json").output)
    assert out["delay"] is None and out["blocked_until"] is None and out["budget"] is None
    out = json.loads(run("host", job, "b.example", "--block", "--json").output)
    assert out["blocked_until"] == "forever"
    assert json.loads(run("hosts", job, "--json", "--sort", "blocked").output)[0]["blocked_until"] == "forever"
    until = time.time() + 100
    out = json.loads(run("host", job, "b.example", "--block-until", str(until), "--json").output)
    assert abs(out["blocked_until"] - until) < 1e-3
    assert "blocked until" in run("host", job, "b.example").output
    with Frontier(job) as f:
        assert {h.host: h.blocked_until for h in f.hosts()}["b.example"] == out["blocked_until"]


def test_a_setting_for_a_host_without_requests_is_kept_with_a_note(tmp_path):
    job = str(tmp_path / "job")
    make(job)
    result = CliRunner().invoke(main, ["host", job, "A.example", "--delay", "3"], catch_exceptions=False)
    assert result.exit_code == 0 and "did you mean a.example?" in result.stderr
    assert "no requests" in run("host", job, "robots.example", "--budget", "5").stderr
    assert "note" not in run("host", job, "a.example", "--delay", "1").stderr
    assert "note" not in run("host", job, "A.example").stderr  # only shown, not changed
    rows = {r["host"]: r for r in json.loads(run("hosts", job, "--json").output)}
    assert rows["A.example"]["delay"] == 3 and rows["robots.example"]["budget"] == 5  # kept for later


def test_host_refuses_bad_input_and_a_live_directory(tmp_path):
    job = str(tmp_path / "job")
    make(job)
    for args in (["--block", "--unblock"], ["--delay", "1", "--default-delay"], ["--budget", "1", "--no-budget"],
                 ["--delay", "-1"], ["--budget", "-2"], ["--delay", "nan"], ["--delay", "inf"], ["--block-for", "nan"],
                 ["--block-until", "nan"], ["--budget", str(2**63)]):
        result = run("host", job, "a.example", *args)
        assert result.exit_code == 2 and "Traceback" not in result.output, args
    assert run("host", job, "", "--delay", "1").exit_code == 2
    with Frontier(job) as held:  # a live directory: the change goes through its inbox and is applied
        result = run("host", job, "a.example", "--delay", "1")
        assert result.exit_code == 0 and "applied by the crawl holding" in result.stderr, result.output
        info = held.host("a.example")
        assert info is not None and info.delay == 1.0


def test_inspect_and_peek_show_time(tmp_path):
    job = str(tmp_path / "job")
    make(job)
    info = json.loads(run("inspect", job, "--json").output)
    assert info["delayed"] == 1 and info["hosts"] == 2 and info["next_due_at"] > time.time()
    assert "waiting for a time" in run("inspect", job).output
    assert "not before" in run("peek", job, "-n", "10").output
