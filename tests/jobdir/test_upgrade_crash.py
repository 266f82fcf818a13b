"""An upgrade (format 3 to 4) killed with SIGKILL at every write, fsync, rename and unlink it makes.

A child process opens a copy of a format-3 fixture (``tests/data``), which upgrades it, and
kills itself at its N-th call of ``os.write``, ``os.fsync``, ``os.replace``, ``os.rename``,
``os.unlink`` or ``os.ftruncate``, for every N until the open completes. After each kill the
directory must open (finishing the upgrade), hand out exactly the pending requests the
release that wrote it gave back, keep its failed requests and host settings, refuse every
done URL, and verify sound.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from paths import DATA

from diskfrontier import Frontier, Request
from diskfrontier.jobdir.maintenance.verify import verify

pytestmark = [pytest.mark.crash, pytest.mark.slow]

CHILD = """
import os, signal, sys
target, calls = int(sys.argv[2]), [0]
for name in ("write", "fsync", "replace", "rename", "unlink", "ftruncate"):
    real = getattr(os, name)
    def hooked(*args, _real=real, **kwargs):
        calls[0] += 1
        if calls[0] == target:
            os.kill(os.getpid(), signal.SIGKILL)
        return _real(*args, **kwargs)
    setattr(os, name, hooked)
from diskfrontier import Frontier
Frontier(sys.argv[1])
print("opened", calls[0], flush=True)
os._exit(0)
"""


def check(job: str, want: dict) -> None:
    with Frontier(job) as frontier:
        failed = sorted([item.request.url, item.error] for item in frontier.failed())
        delays = {info.host: info.delay for info in frontier.hosts() if info.delay}
        refused = [url for url in want["done"] if not frontier.push(Request(url))]
        for host in delays:
            frontier.set_delay(host, 0.0)  # checked: the drain need not wait for it
        pending = []
        while not frontier.finished:
            request = frontier.pop(timeout=5)
            assert request is not None
            pending.append(request.url)
            frontier.done(request)
    assert failed == want["failed"] and delays == want["delays"]
    assert refused == want["done"]
    assert sorted(pending) == want["pending"]
    assert verify(job).sound


@pytest.mark.parametrize("name", ["format3-killed-lifo", "format3-clean-lifo"])
def test_an_upgrade_killed_at_any_write_finishes_at_the_next_open(tmp_path, name):
    with open(os.path.join(DATA, f"{name}.expected.json")) as f:
        want = json.load(f)
    kills = 0
    for point in range(1, 200):
        job = str(tmp_path / f"job{point}")
        shutil.copytree(os.path.join(DATA, name), job)
        child = subprocess.run([sys.executable, "-c", CHILD, job, str(point)], capture_output=True, text=True,
                               timeout=60)
        if child.returncode == 0:
            assert child.stdout.startswith("opened"), child.stdout
            break
        assert child.returncode == -9, child.stderr[-2000:]
        kills += 1
        check(job, want)
        shutil.rmtree(job)
    else:
        raise AssertionError("the open never completed")
    assert kills >= 20, kills
    sys.stdout.write(f"\n{name}: killed at {kills} points, each finished the upgrade at the next open\n")


def test_an_upgrade_on_a_full_disk_is_named_and_starts_again_from_the_old_journal(tmp_path, monkeypatch):
    import errno

    from diskfrontier.core.errors import DiskFull
    from diskfrontier.jobdir.maintenance import upgrade

    name = "format3-killed-lifo"
    with open(os.path.join(DATA, f"{name}.expected.json")) as f:
        want = json.load(f)
    job = str(tmp_path / "job")
    shutil.copytree(os.path.join(DATA, name), job)
    with open(os.path.join(job, "requests.urls"), "rb") as journal:
        old = journal.read()

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(upgrade, "write_all", full)
    with pytest.raises(DiskFull) as info:
        Frontier(job)
    assert info.value.filename.endswith("requests.urls.compact") and "free space" in str(info.value)
    with open(os.path.join(job, "requests.urls"), "rb") as journal:
        assert journal.read() == old  # the old journal stands
    assert not os.path.exists(os.path.join(job, "requests.urls.compact"))
    monkeypatch.undo()
    check(job, want)
