"""The test suite itself: a Ctrl-C stops a run with pytest's summary, and however a run ends
(Ctrl-C, SIGTERM, SIGKILL) no process it started, redis-server included, is left running.

Each test runs pytest on a few of the suite's own tests in a subprocess, marks that run's
environment, signals it while a test is running and looks in /proc for any process still
carrying the mark (the conftest's watchdog must have killed them all).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

import pytest
from paths import TESTS
from suite_exit_cases import RUNS_FOR

MARK = "DISKFRONTIER_TEST_RUN_MARK"

pytestmark = pytest.mark.slow  # a pytest subprocess each, a few seconds


class InnerRun:
    """``pytest`` on ``node_ids`` in a subprocess, its output collected as it comes."""

    def __init__(self, tmp_path, *node_ids: str, workers: int = 0) -> None:
        self.mark = uuid.uuid4().hex
        self.basetemp = str(tmp_path / "inner")
        self.output = b""
        self.pytests = 1 + workers  # pytest itself and its workers (pytest-xdist), each with its watchdog
        env = {**os.environ, MARK: self.mark}
        # A distributed run is started as a terminal starts a command (a process group of its own,
        # to which a Ctrl-C goes); the others as the suite starts any child.
        group: dict[str, Any] = {"process_group": 0} if workers else {}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--basetemp", self.basetemp,
             "-n", str(workers), *node_ids],
            cwd=TESTS, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **group)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while chunk := os.read(self.proc.stdout.fileno(), 65536):
            self.output += chunk

    @property
    def text(self) -> str:
        return self.output.decode(errors="replace")

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.text:
            assert self.proc.poll() is None, f"pytest ended before {text!r}:\n{self.text}"
            assert time.monotonic() < deadline, f"no {text!r} after {timeout} s:\n{self.text}"
            time.sleep(0.05)

    def stop(self, signum: int, within: float, *, group: bool = False) -> float:
        """Send ``signum`` to pytest (or to its process group, as a terminal sends a Ctrl-C); the
        seconds pytest took to exit (it must within ``within``)."""
        started = time.monotonic()
        if group:
            os.killpg(self.proc.pid, signum)
        else:
            self.proc.send_signal(signum)
        try:
            self.proc.wait(within)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"pytest still running {within} s after {signal.Signals(signum).name}:\n{self.text}")
        self.reader.join(10)
        return time.monotonic() - started

    def processes(self) -> list[str]:
        """``pid command`` of every live process whose environment carries this run's mark, or
        whose working directory is in the run's temporary folder (redis-server works in its
        folder there, and writes its process title over its environment)."""
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    environ = f.read()
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    command = f.read().replace(b"\0", b" ").decode(errors="replace")
                cwd = os.readlink(f"/proc/{name}/cwd")
            except OSError:  # gone meanwhile, a zombie, or not ours
                continue
            if (f"{MARK}={self.mark}".encode() in environ.split(b"\0")
                    or cwd == self.basetemp or cwd.startswith(self.basetemp + os.sep)):
                found.append(f"{name} {command}")
        return found

    def wait_for_process(self, word: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(word in line for line in self.processes()):
            assert self.proc.poll() is None, f"pytest ended before a {word} started:\n{self.text}"
            assert time.monotonic() < deadline, f"no {word} after {timeout} s:\n{self.text}"
            time.sleep(0.05)

    def assert_nothing_left(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while (left := self.processes()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert left == [], f"still running after pytest ended: {left}\n{self.text}"


CASES = "kits/suite_exit_cases.py"
IN_PROCESS_CRAWL = f"{CASES}::test_an_in_process_crawl_takes_the_ctrl_c_for_itself"
SWALLOWS_CTRL_C = f"{CASES}::test_catches_keyboard_interrupt"
CHILDREN = f"{CASES}::test_a_redis_server_children_and_a_grandchild"
REDIS_WORKERS = "redis/test_redis_workers.py"  # a real one: Redis, worker children, many seconds


def started(run: InnerRun, processes: int = 0) -> None:
    """Wait until the first test runs (and ``processes`` marked processes besides pytest live)."""
    run.wait_for("::test_")
    deadline = time.monotonic() + 60
    while len(run.processes()) < 2 * run.pytests + processes:  # each pytest and its watchdog, the children
        assert time.monotonic() < deadline, f"{run.processes()}\n{run.text}"
        time.sleep(0.05)
    time.sleep(1.0)


@pytest.mark.parametrize("target", [IN_PROCESS_CRAWL, SWALLOWS_CTRL_C, CHILDREN, REDIS_WORKERS],
                         ids=["in-process-crawl", "catches-KeyboardInterrupt", "children", "redis-workers"])
def test_ctrl_c_stops_the_run_with_its_summary_and_exit_code_2(tmp_path, target):
    run = InnerRun(tmp_path, target)
    started(run, processes=4 if target == CHILDREN else 0)
    took = run.stop(signal.SIGINT, within=RUNS_FOR / 2)
    assert run.proc.returncode == 2, run.text
    lines = run.text.splitlines()
    assert any("KeyboardInterrupt" in line and line.startswith("!!!") for line in lines), run.text
    assert lines[-1].startswith("=") and " in " in lines[-1], run.text  # the summary line
    assert took < RUNS_FOR / 2  # stopped, not run to its end
    run.assert_nothing_left()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_no_server_or_child_outlives_a_terminated_or_killed_run(tmp_path, signum):
    run = InnerRun(tmp_path, CHILDREN)
    started(run, processes=4)  # redis-server, two children, a grandchild
    assert sum("redis-server" in line for line in run.processes()) == 1, run.processes()
    run.stop(signum, within=RUNS_FOR / 2)
    if signum == signal.SIGTERM:  # as a Ctrl-C: the summary, after the fixtures' teardown
        assert run.proc.returncode == 2 and "KeyboardInterrupt" in run.text, run.text
    else:
        assert run.proc.returncode == -signal.SIGKILL
    run.assert_nothing_left()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=["Ctrl-C", "SIGTERM", "SIGKILL"])
def test_a_distributed_run_stops_its_workers_and_leaves_no_process(tmp_path, signum):
    """pytest -n 2: a Ctrl-C to the terminal's group, or a SIGTERM or SIGKILL to pytest, ends both workers
    (one running a test that starts a redis-server and children, one an in-process crawl that takes
    the SIGINT for itself) and every process they started."""
    run = InnerRun(tmp_path, CHILDREN, IN_PROCESS_CRAWL, workers=2)
    started(run, processes=4)  # redis-server, two children, a grandchild
    assert sum("redis-server" in line for line in run.processes()) == 1, run.processes()
    took = run.stop(signum, within=RUNS_FOR / 2, group=signum == signal.SIGINT)
    if signum == signal.SIGKILL:
        assert run.proc.returncode == -signal.SIGKILL
    else:
        assert run.proc.returncode == 2, run.text
        lines = run.text.splitlines()
        assert any("KeyboardInterrupt" in line and line.startswith("!!!") for line in lines), run.text
        assert lines[-1].startswith("=") and " in " in lines[-1], run.text
        assert took < RUNS_FOR / 2  # stopped, not run to their end
    run.assert_nothing_left()
