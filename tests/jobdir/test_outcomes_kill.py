"""A job directory's outcome counters after a SIGKILL of its holder: what status.json showed (what
``serve`` exported) is on disk, and what was counted in the second before the kill is all a kill loses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from diskfrontier import Frontier

pytestmark = pytest.mark.crash

CHILD = """
import sys, time
from diskfrontier import Frontier
from diskfrontier.contract.outcomes import Outcome
frontier = Frontier(sys.argv[1])
n = 0
while True:
    frontier.record_outcome(Outcome(status=200, received_bytes=10, fetch_seconds=0.01))
    n += 1
    if n % 50 == 0:
        print(n, flush=True)
    time.sleep(0.001)
"""


def test_a_kill_keeps_what_status_json_showed(tmp_path):
    path = str(tmp_path / "job")
    Frontier(path).close()
    child = subprocess.Popen([sys.executable, "-c", CHILD, path], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        shown = printed = 0
        deadline = time.monotonic() + 60
        while shown < 500:  # status.json published a few times with counts in it
            assert time.monotonic() < deadline, "the child published no counts within 60 s"
            printed = int(child.stdout.readline())
            try:
                with open(os.path.join(path, "status.json"), encoding="utf-8") as f:
                    shown = json.load(f)["stats"]["responses_2xx"]
            except (FileNotFoundError, ValueError, KeyError):
                continue
        with open(os.path.join(path, "status.json"), encoding="utf-8") as f:
            shown = json.load(f)["stats"]["responses_2xx"]
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        counted = max([printed, *map(int, child.stdout.read().split())])
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    with Frontier(path) as frontier:
        stats = frontier.stats()
    assert shown <= stats["responses_2xx"] <= counted + 50  # printed every 50: counted is up to 49 behind
    assert stats["received_bytes"] == 10 * stats["responses_2xx"]
    assert stats["fetch_seconds_count"] == stats["responses_2xx"]
