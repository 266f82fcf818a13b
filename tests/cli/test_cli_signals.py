"""The installed ``diskfrontier`` script in real pipelines and under Ctrl-C: ``| head`` ends
it quietly, and SIGINT exits 130 leaving a sound job directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from diskfrontier import Frontier, Request
from diskfrontier.cli import main

SCRIPT = os.path.join(os.path.dirname(sys.executable), "diskfrontier")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def big_job(tmp_path_factory) -> str:
    """A job directory whose export is far larger than a pipe's buffer."""
    job = str(tmp_path_factory.mktemp("pipe") / "job")
    with Frontier(job) as frontier:
        frontier.push_many(Request(f"https://a.example/{i}", priority=i % 3) for i in range(30_000))
    return job


@pytest.mark.parametrize("command", [["export"], ["peek", "-n", "30000"], ["peek", "-n", "30000", "--json"]])
def test_a_reader_that_stops_early_ends_the_command_quietly(big_job, command):
    pipeline = f'"$0" {" ".join(command)} "$1" | head -1; echo "status ${{PIPESTATUS[0]}} ${{PIPESTATUS[1]}}"'
    result = subprocess.run(["bash", "-c", pipeline, SCRIPT, big_job], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0  # the status of the pipeline is head's
    assert result.stderr == ""  # no "Error: Broken pipe", no "Exception ignored ... BrokenPipeError"
    first, status = result.stdout.splitlines()
    assert "https://a.example/" in first
    assert status == "status 141 0"  # as a Unix tool killed by SIGPIPE


def test_export_to_a_file_says_how_many_and_to_stdout_says_nothing(big_job, tmp_path):
    result = cli("export", big_job)
    assert result.returncode == 0 and result.stderr == "" and len(result.stdout.splitlines()) == 30_000
    result = cli("export", big_job, "-o", str(tmp_path / "out.jsonl"))
    assert result.returncode == 0 and result.stderr.strip() == "exported 30,000 pending requests"


def _wait_for(condition, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 60
    assert proc.stderr is not None
    while not condition():
        assert proc.poll() is None, f"ended before {what}: {proc.stderr.read()!r}"
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.01)


def test_ctrl_c_during_a_slow_import_exits_130_and_leaves_a_sound_directory(tmp_path):
    job = str(tmp_path / "job")
    proc = subprocess.Popen([SCRIPT, "import", job, "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    try:
        lines = "".join(json.dumps({"url": f"https://a.example/{i}", "priority": i % 4}) + "\n" for i in range(12_000))
        proc.stdin.write(lines.encode())  # one batch of 10,000 goes in; the rest waits for more input
        proc.stdin.flush()
        journal = os.path.join(job, "requests.urls")
        _wait_for(lambda: os.path.exists(journal) and os.path.getsize(journal) > 300_000, proc, "pushed a batch")
        time.sleep(0.2)  # reading stdin, which stays open
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert stderr.decode().strip() == "Aborted."
    verified = cli("verify", job)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    info = json.loads(cli("inspect", job, "--json").stdout)
    assert info["state"] == "clean" and info["pending"] == 10_000


def test_ctrl_c_during_the_demo_exits_130_and_leaves_a_sound_directory(tmp_path):
    job = str(tmp_path / "demo")
    proc = subprocess.Popen([SCRIPT, "demo", job, "--pages", "5000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        log = os.path.join(job, "demo-fetches.log")
        _wait_for(lambda: os.path.exists(log) and os.path.getsize(log) > 200, proc, "fetched a page")
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert stdout.startswith("interrupted: fetched ") and "Traceback" not in stderr
    verified = cli("verify", job)
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.parametrize("command", ["inspect", "peek", "verify", "compact", "export"])
def test_ctrl_c_in_any_command_is_aborted_and_130(tmp_path, monkeypatch, command):
    job = str(tmp_path / "job")
    Frontier(job).close()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    target = {"inspect": "cli.inspect.inspect_jobdir", "peek": "access.targets.pending_requests",
              "verify": "jobdir.maintenance.verify.verify", "compact": "cli.maintain.compact_jobdir",
              "export": "access.targets.pending_requests"}[command]
    monkeypatch.setattr(f"diskfrontier.{target}", interrupted)
    result = CliRunner().invoke(main, [command, job])
    assert result.exit_code == 130 and result.output == "Aborted.\n"
