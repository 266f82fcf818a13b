"""The writing commands on a job directory that a running crawl holds: they go through its inbox."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from diskfrontier import Frontier, Request

# A crawl that holds the directory: it pops a request every 20 ms and finishes it.
CRAWL = textwrap.dedent("""
    import sys, time
    from diskfrontier import Frontier
    f = Frontier(sys.argv[1])
    print("ready", flush=True)
    while True:
        r = f.pop(timeout=0.02)
        if r is not None:
            time.sleep(0.02)
            f.done(r)
""")


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diskfrontier", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture
def held(tmp_path: Path):
    job = tmp_path / "job"
    with Frontier(job) as f:
        for i in range(300):
            f.push(Request(f"https://h{i % 3}.example/{i}"))
        for i in range(5):
            f.push(Request(f"https://slow.example/wait/{i}"), not_before=time.time() + 3600)
    script = tmp_path / "crawl.py"
    script.write_text(CRAWL)
    proc = subprocess.Popen([sys.executable, str(script), str(job)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield job, proc
    proc.kill()
    proc.wait()


def status(job: Path) -> dict:
    deadline = time.monotonic() + 30
    while True:
        try:
            return json.loads((job / "status.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            assert time.monotonic() < deadline, "the holder published no status.json"
            time.sleep(0.05)


def test_push_host_pause_resume_drop_reach_a_running_crawl(held) -> None:
    job, proc = held
    pushed = cli("push", str(job), "https://new.example/1", "https://new.example/2", "https://h0.example/0")
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stdout.strip() == "queued 2, duplicates 1, bad 0"
    assert "applied 1 command by the crawl holding" in pushed.stderr

    blocked = cli("host", str(job), "new.example", "--block-for", "600", "--json")
    assert blocked.returncode == 0, blocked.stderr
    assert json.loads(blocked.stdout)["blocked_until"] > time.time() + 500

    paused = cli("pause", str(job))
    assert paused.returncode == 0 and paused.stdout.startswith("paused since"), paused.stderr
    deadline = time.monotonic() + 30
    while (now := status(job))["paused_since"] is None or now["taken"] <= now["paused_since"] + 0.1:
        assert time.monotonic() < deadline, "status.json never showed the pause"
        time.sleep(0.05)
    done_then = now["stats"]["done"]
    time.sleep(1.5)
    later = status(job)
    assert later["paused_since"] is not None
    assert later["stats"]["done"] <= done_then + 1  # at most the request in flight at the pause

    dry = cli("drop", str(job), "--host", "h1.example", "--dry-run", "--show", "3")
    assert dry.returncode == 0, dry.stderr
    listed = dry.stdout.split()
    assert len(listed) == 3 and all(u.startswith("https://h1.example/") for u in listed)
    assert "would drop" in dry.stderr
    dropped = cli("drop", str(job), "--match", r"^https://h1\.example/", "--json")
    assert dropped.returncode == 0, dropped.stderr
    count = json.loads(dropped.stdout)["dropped"]
    assert count == int(dry.stderr.split("would drop ")[1].split()[0])

    requeued = cli("requeue-failed", str(job), "--timeout", "30")
    assert requeued.returncode == 0 and requeued.stdout.startswith("requeued 0"), requeued.stderr
    resumed = cli("resume", str(job))
    assert resumed.returncode == 0 and resumed.stdout.strip() == "resumed", resumed.stderr

    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with Frontier(job) as f:
        assert f.paused_since is None
        urls = []
        while (r := f.pop()) is not None:
            urls.append(r.url)
            f.done(r)
        assert not any(u.startswith("https://h1.example/") for u in urls)
        new = f.host("new.example")
        assert new is not None and new.blocked_until is not None and new.blocked_until > time.time()
        assert not f.push(Request("https://h1.example/1")), "a dropped request's fingerprint stays seen"


def test_no_wait_returns_once_the_command_is_queued(held, tmp_path: Path) -> None:
    job, proc = held
    os.kill(proc.pid, signal.SIGSTOP)  # it holds the directory and applies nothing
    try:
        queued = cli("push", str(job), "--no-wait", "https://late.example/")
        assert queued.returncode == 0, queued.stderr
        assert "queued 1 command" in queued.stderr
        late = cli("pause", str(job), "--timeout", "0.5")
        assert late.returncode == 1 and "did not apply command" in late.stderr
        nowait = [cli(c, str(job), "--no-wait") for c in ("resume", "requeue-failed")]
        assert all(r.returncode == 0 for r in nowait)
        blocked = cli("host", str(job), "late.example", "--block", "--no-wait")
        drop = cli("drop", str(job), "--host", "h2.example", "--no-wait")
        assert blocked.returncode == 0 and drop.returncode == 0
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    deadline = time.monotonic() + 30
    while [n for n in os.listdir(job / "inbox") if n.endswith(".cmd")]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    with Frontier(job) as f:
        assert f.paused_since is None  # paused, then resumed, in the order sent
        assert f.host("late.example") is not None
        h2 = f.host("h2.example")
        assert h2 is None or h2.pending == 0


def test_a_bad_drop_is_a_usage_error(tmp_path: Path) -> None:
    job = tmp_path / "job"
    Frontier(job).close()
    both = cli("drop", str(job), "--host", "a.example", "--match", "x")
    assert both.returncode == 2 and "exactly one of --host and --match" in both.stderr
    bad = cli("drop", str(job), "--match", "(unclosed")
    assert bad.returncode == 2 and "not a regular expression" in bad.stderr


def test_inspect_of_a_running_crawl_shows_what_it_published(held) -> None:
    job, proc = held
    status(job)  # published
    shown = cli("inspect", str(job))
    assert shown.returncode == 0, shown.stderr
    assert f"running, held by pid {proc.pid}" in shown.stdout
    assert "in flight" in shown.stdout and "unknown while" not in shown.stdout
    as_json = json.loads(cli("inspect", str(job), "--json").stdout)
    assert as_json["state"] == "running" and as_json["pid"] == proc.pid
    assert as_json["pending"] + as_json["in_flight"] <= 305
    assert cli("pause", str(job)).returncode == 0
    deadline = time.monotonic() + 30
    while "paused" not in (out := cli("inspect", str(job)).stdout):
        assert time.monotonic() < deadline, out
        time.sleep(0.2)
    assert "nothing is handed out until resume" in out
