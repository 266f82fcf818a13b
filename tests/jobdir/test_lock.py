"""The job directory lock: only the process that took it releases it, and it never follows a link."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from diskfrontier import Frontier
from diskfrontier.core.errors import FrontierError, JobDirNotOwned, JobDirUnsafe
from diskfrontier.jobdir.lock import Lock, probe_lock

PRECIOUS = b"precious bytes that live outside the job directory\n"

OPEN_FRONTIER = textwrap.dedent("""
    import sys
    from diskfrontier import Frontier, JobDirLocked
    try:
        Frontier(sys.argv[1]).close()
    except JobDirLocked as exc:
        print(exc.pid)
        print(exc)
        sys.exit(3)
""")

ACQUIRE_LOCK = textwrap.dedent("""
    import sys
    from diskfrontier import JobDirLocked
    from diskfrontier.jobdir.lock import Lock
    lock = Lock(sys.argv[1])
    try:
        lock.acquire()
    except JobDirLocked as exc:
        print(exc.pid)
        print(exc)
        sys.exit(3)
    lock.release()
""")


def third_process(script: str, path) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with ``path`` in a new Python process; exit 3 and the holder's pid if locked."""
    return subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60)


def run_in_fork(child) -> int:
    """Fork; the child runs ``child()`` and exits with its return value (1 on an exception)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = child()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), f"the child ended with status {status}"
    return os.WEXITSTATUS(status)


def assert_locked_by(result, pid: int) -> None:
    assert result.returncode == 3, f"a third process opened the live directory: {result.stdout}{result.stderr}"
    printed_pid, message = result.stdout.splitlines()[:2]
    assert printed_pid == str(pid)
    assert f"held by pid {pid}" in message


def test_a_forked_child_closing_the_frontier_does_not_unlock_it_for_a_third_process(tmp_path):
    job = tmp_path / "job"
    frontier = Frontier(str(job))
    try:
        def child() -> int:
            with contextlib.suppress(FrontierError):  # refusing to close a frontier it did not open is fine too
                frontier.close()
            return 0

        assert run_in_fork(child) == 0
        assert_locked_by(third_process(OPEN_FRONTIER, job), os.getpid())
    finally:
        frontier.close()
    assert third_process(OPEN_FRONTIER, job).returncode == 0  # once the parent closes it, it opens


def test_a_forked_child_releasing_the_lock_leaves_it_held_by_the_parent(tmp_path):
    path = tmp_path / "lock"
    lock = Lock(str(path))
    lock.acquire()
    try:
        def child() -> int:
            if lock.owned():
                return 2
            try:
                lock.check_owner()
                return 4
            except JobDirNotOwned as exc:
                if f"opened by pid {os.getppid()}" not in str(exc):
                    return 5
            lock.release()
            return 0

        assert run_in_fork(child) == 0
        assert lock.owned()
        assert path.read_bytes() == f"{os.getpid()}\n".encode(), "the child emptied the pid file"
        assert_locked_by(third_process(ACQUIRE_LOCK, path), os.getpid())
        assert probe_lock(str(path)) == os.getpid()
    finally:
        lock.release()
    assert probe_lock(str(path)) is None
    assert path.read_bytes() == b""


HOLD_THEN_DIE = textwrap.dedent("""
    import os, sys, time
    from diskfrontier.jobdir.lock import Lock
    lock = Lock(sys.argv[1])
    lock.acquire()
    child = os.fork()
    if child == 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        time.sleep(60)
        os._exit(0)
    print(child, flush=True)
    os._exit(0)  # the holder dies without releasing, as under kill -9; its child lives on
""")


def test_a_child_outliving_its_parent_does_not_keep_the_directory_locked(tmp_path):
    path = tmp_path / "lock"
    result = subprocess.run([sys.executable, "-c", HOLD_THEN_DIE, str(path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    orphan = int(result.stdout.strip())
    try:
        os.kill(orphan, 0)  # still alive
        lock = Lock(str(path))
        lock.acquire()
        lock.release()
    finally:
        os.kill(orphan, signal.SIGKILL)


def test_the_pid_is_written_once_the_lock_is_held_and_cleared_at_release(tmp_path):
    path = tmp_path / "lock"
    path.write_bytes(b"4242\n")  # left by a holder that was killed
    lock = Lock(str(path))
    lock.acquire()
    assert path.read_bytes() == f"{os.getpid()}\n".encode()
    assert lock.owned() and lock.pid == os.getpid()
    lock.release()
    assert path.read_bytes() == b"" and not lock.owned()
    lock.release()  # twice is fine


def test_a_lock_link_to_an_outside_file_is_refused_and_the_file_left_alone(tmp_path):
    outside = tmp_path / "precious.txt"
    outside.write_bytes(PRECIOUS)
    job = tmp_path / "job"
    job.mkdir()
    (job / "lock").symlink_to(outside)
    with pytest.raises(JobDirUnsafe, match="lock is a symbolic link"):
        Lock(str(job / "lock")).acquire()
    with pytest.raises(JobDirUnsafe):
        probe_lock(str(job / "lock"))
    assert outside.read_bytes() == PRECIOUS


def test_a_dangling_lock_link_does_not_create_its_target(tmp_path):
    target = tmp_path / "created-through-the-link"
    job = tmp_path / "job"
    job.mkdir()
    (job / "lock").symlink_to(target)
    with pytest.raises(JobDirUnsafe):
        Lock(str(job / "lock")).acquire()
    assert not target.exists()


def test_probe_lock_on_a_missing_lock_file_creates_nothing(tmp_path):
    assert probe_lock(str(tmp_path / "lock")) is None
    assert os.listdir(tmp_path) == []


def test_probe_lock_names_a_holder_in_another_process(tmp_path):
    path = tmp_path / "lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from diskfrontier.jobdir.lock import Lock; "
         "Lock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(60)", str(path)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert probe_lock(str(path)) == holder.pid
        assert_locked_by(third_process(ACQUIRE_LOCK, path), holder.pid)
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 10
    while probe_lock(str(path)) is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert probe_lock(str(path)) is None  # the kernel dropped it with the process


FORK_AND_EXIT = textwrap.dedent("""
    import os, sys
    from collections import Counter
    from diskfrontier import Frontier, Request
    f = Frontier(sys.argv[1])
    f.push_many(Request(f"https://a.example/{i}") for i in range(2100))  # offsets spill to a buffered queue file
    pid = os.fork()
    if pid == 0:
        f.close()
        sys.exit(0)  # a normal exit: Python flushes the file objects the child inherited
    os.waitpid(pid, 0)
    got = Counter()
    while (r := f.pop()) is not None:
        got[r.url] += 1
        f.done(r)
    f.close()
    print(len(got), max(got.values()))
""")


def test_a_forked_child_that_exits_normally_does_not_write_the_parents_queue_buffers(tmp_path):
    result = subprocess.run([sys.executable, "-c", FORK_AND_EXIT, str(tmp_path / "job")], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2100", "1"]  # every request once: none lost, none twice


def test_a_forked_child_does_not_wait_for_a_lock_another_thread_held_at_the_fork(tmp_path):
    import threading

    from diskfrontier import Request

    job = str(tmp_path / "job")
    f = Frontier(job)
    f.push_many(Request(f"https://a.example/{i}") for i in range(10))
    inside, go_on = threading.Event(), threading.Event()

    def slow_progress(done, total):
        inside.set()
        go_on.wait(5)

    worker = threading.Thread(target=f.compact, kwargs={"progress": slow_progress})
    worker.start()
    inside.wait(5)
    pid = os.fork()
    if pid == 0:
        f.close()
        os._exit(0)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.waitpid(pid, os.WNOHANG)[0] == 0:
        time.sleep(0.05)
    finished = time.monotonic() < deadline
    if not finished:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    go_on.set()
    worker.join()
    f.close()
    assert finished, "the child's close() waited for a lock no thread of the child would release"
