"""Tests that tests/test_suite_exits.py runs in a pytest subprocess and interrupts: each runs
for a long time in a way that could keep a Ctrl-C from ending the run, or a process alive after
it. Not collected with the suite (the file name does not start with ``test_``)."""

from __future__ import annotations

import subprocess
import sys
import time

from diskfrontier import Frontier, Request, crawl

RUNS_FOR = 60  # seconds each case runs if nothing stops it: a stop must come well before
SLEEPER = "import time; time.sleep(120)"
# A child that starts a grandchild of its own, then sleeps: both must end with the run.
PARENT = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {SLEEPER!r}]); time.sleep(120)"


def test_an_in_process_crawl_takes_the_ctrl_c_for_itself(tmp_path):
    with Frontier(tmp_path / "job") as frontier:
        frontier.push_many(Request(f"https://a.example/{i}") for i in range(3000))  # 75 s of work at least
        stats = crawl(frontier, lambda r, f: time.sleep(0.05), workers=2, duration=RUNS_FOR,
                      progress=False)
    assert stats.stopped_by == "SIGINT"  # the crawl stopped as asked; the run must stop too


def test_catches_keyboard_interrupt(tmp_path):
    # As tests/test_descriptors_interrupted.py does: raise KeyboardInterrupt and catch it, again
    # and again for a few seconds; a real Ctrl-C meanwhile is caught as if it were one of these.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            time.sleep(0.01)
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            pass


def test_a_redis_server_children_and_a_grandchild(redis_url, tmp_path):
    children = [subprocess.Popen([sys.executable, "-c", code]) for code in (SLEEPER, PARENT)]
    time.sleep(RUNS_FOR)
    for child in children:
        child.kill()
        child.wait()
