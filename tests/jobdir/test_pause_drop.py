"""pause, resume and drop on a job directory: what they keep across a clean close, compaction and kill -9."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from diskfrontier import Frontier, Request


def pending_urls(job: Path) -> list[str]:
    with Frontier(job, watch=False) as f:
        f.resume()
        out = []
        while (r := f.pop()) is not None:
            out.append(r.url)
            f.done(r)
        return sorted(out)


def test_a_pause_holds_across_a_clean_close_a_compaction_and_kill_9(tmp_path: Path) -> None:
    job = tmp_path / "job"
    with Frontier(job) as f:
        f.push(Request("https://a.example/1"))
        f.pause()
        since = f.paused_since
        assert since is not None and f.pop() is None and f.next_ready() is None
        assert f.pop(timeout=0.2) is None
    with Frontier(job) as f:
        assert f.recovery == "clean" and f.paused_since == since
        f.compact()
    with Frontier(job) as f:
        assert f.paused_since == since
    code = textwrap.dedent(f"""
        import os
        from diskfrontier import Frontier
        f = Frontier({str(job)!r})
        assert f.paused_since is not None
        f.resume()
        f.pause()
        os.kill(os.getpid(), 9)
    """)
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == -signal.SIGKILL
    with Frontier(job) as f:
        assert f.recovery == "rebuilt" and f.paused_since is not None and f.paused_since >= since
        f.resume()
        assert f.pop() is not None
    with Frontier(job) as f:
        assert f.paused_since is None


def test_a_waiting_pop_returns_once_another_thread_resumes(tmp_path: Path) -> None:
    import threading

    with Frontier(tmp_path / "job") as f:
        f.push(Request("https://a.example/"))
        f.pause()
        threading.Timer(0.3, f.resume).start()
        started = time.monotonic()
        got = f.pop(timeout=None)
        assert got is not None and time.monotonic() - started >= 0.25


def test_drop_takes_ready_and_delayed_requests_and_leaves_in_flight_failed_and_seen(tmp_path: Path) -> None:
    job = tmp_path / "job"
    with Frontier(job, delay=0.0) as f:
        for i in range(6):
            f.push(Request(f"https://ads.example/{i}"))
        f.push(Request("https://ads.example/later"), not_before=time.time() + 3600)
        f.push(Request("https://keep.example/1"))
        held = f.pop()  # keep.example/1 (LIFO): in flight
        assert held is not None and held.url == "https://keep.example/1"
        taken = f.pop()
        assert taken is not None and taken.url.startswith("https://ads.example/")
        f.fail(taken, "gone")
        dry = f.drop(host="ads.example", dry_run=True, show=2)
        assert dry.count == 6 and len(dry.urls) == 2  # 5 ready + 1 delayed; not the failed one
        assert len(f) == 6
        dropped = f.drop(host="ads.example")
        assert dropped.count == 6 and dropped.urls == [] and len(f) == 0
        assert f.stats()["dropped"] == 6 and f.stats()["delayed"] == 0
        info = f.host("ads.example")
        assert info is not None and info.pending == 0
        assert len(f.failed()) == 1
        f.done(held)  # still in flight after the drop
        assert not f.push(Request("https://ads.example/3")), "a dropped request's fingerprint stays seen"
        assert f.drop(match=r"nothing-matches").count == 0
        with pytest.raises(ValueError, match="exactly one of"):
            f.drop()
        with pytest.raises(ValueError, match="not a regular expression"):
            f.drop(match="(")


DROPPER = textwrap.dedent("""
    import os, sys, time
    from diskfrontier import Frontier
    f = Frontier(sys.argv[1])
    held = [f.pop() for _ in range(3)]
    print(",".join(r.url for r in held), flush=True)
    f.drop(match=sys.argv[2])
    print("dropped", flush=True)
    time.sleep(60)
""")


def kill_a_dropper(job: Path, match: str, wait_for_drop: bool, delay: float) -> set[str]:
    """Run DROPPER on ``job``, SIGKILL it ``delay`` seconds after its pops (or after its drop); the
    URLs it had in flight."""
    proc = subprocess.Popen([sys.executable, "-c", DROPPER, str(job), match], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    in_flight = set(proc.stdout.readline().strip().split(","))
    if wait_for_drop:
        assert proc.stdout.readline().strip() == "dropped"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return in_flight


N = 40000
EVERYTHING = {f"https://h{i % 4}.example/{i}" for i in range(N)}
H3 = {u for u in EVERYTHING if u.startswith("https://h3.example/")}


def test_a_drop_survives_kill_9_and_the_requests_in_flight_at_it_come_back(tmp_path: Path) -> None:
    job = tmp_path / "job"
    with Frontier(job) as f:
        f.push_many(Request(u) for u in sorted(EVERYTHING))
    in_flight = kill_a_dropper(job, r"^https://h3\.example/", wait_for_drop=True, delay=0.0)
    left = pending_urls(job)
    assert len(left) == len(set(left))
    assert set(left) == (EVERYTHING - H3) | (H3 & in_flight)


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3])
def test_a_kill_during_a_drop_leaves_each_request_pending_or_dropped(tmp_path: Path, delay: float) -> None:
    job = tmp_path / "job"
    with Frontier(job) as f:
        f.push_many(Request(u) for u in sorted(EVERYTHING))
    in_flight = kill_a_dropper(job, r"^https://h3\.example/", wait_for_drop=False, delay=delay)
    left = pending_urls(job)
    assert len(left) == len(set(left)), "a request pending twice"
    assert (EVERYTHING - H3) | (H3 & in_flight) <= set(left) <= EVERYTHING, "a request lost or made up"
