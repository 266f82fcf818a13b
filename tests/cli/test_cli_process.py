"""The installed ``diskfrontier`` script run as a real process: verify on every kind of damage,
and ``compact`` killed with SIGKILL at several moments."""

from __future__ import annotations

import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from paths import EXAMPLE

from diskfrontier import Frontier, Request

SCRIPT = [os.path.join(os.path.dirname(sys.executable), "diskfrontier")]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(SCRIPT + list(args), capture_output=True, text=True, timeout=120)


def _flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def _append(path: str, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _overwrite(path: str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


# kind -> (damage, exit code of verify, file named, offset named or None, pending after --repair or None)
DAMAGE = {
    "torn-journal-tail": (lambda j: _append(f"{j}/requests.urls", b"\x00\x00\x01\x00\x12"), 0, None, None, 18),
    "flipped-journal-byte": (lambda j: _flip(f"{j}/requests.urls", 30), 1, "requests.urls", 8, 18),
    "garbage-after-journal": (
        lambda j: _append(f"{j}/requests.urls", b"\xff\xff\xff\xff" + random.Random(1).randbytes(300)),
        1, "requests.urls", "end", 18),
    "journal-deleted": (lambda j: os.unlink(f"{j}/requests.urls"), 1, "requests.urls", 0, 0),
    "seen-bad-length": (lambda j: _overwrite(f"{j}/requests.seen", 22, b"\x00\x05"), 1, "requests.seen", 22, 18),
    "active-json-garbage": (lambda j: _write(f"{j}/requests.queue/active.json", b"[1, oops"), 1, "active.json", 0, 18),
    "queue-file-truncated": (lambda j: os.truncate(f"{j}/requests.queue/p0", 40), 1, "p0", 0, 18),
    "cursor-garbage": (lambda j: _write(f"{j}/requests.cursor", b"\x00\x01garbage"), 0, None, None, 18),
    "frontier-json-garbage": (lambda j: _write(f"{j}/frontier.json", b"{not json"), 1, "frontier.json", 0, None),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_verify_names_each_kind_of_damage_and_repair_recovers(tmp_path, kind):
    job = str(tmp_path / "job")
    shutil.copytree(EXAMPLE, job)
    damage, code, file, offset, pending_after = DAMAGE[kind]
    journal_size = os.path.getsize(f"{job}/requests.urls")
    damage(job)
    result = cli("verify", job, "--json")
    assert "Traceback" not in result.stderr
    assert result.returncode == code, result.stdout + result.stderr
    report = json.loads(result.stdout)
    if file is None:
        assert report["sound"] and report["notes"], report
    else:
        finding = report["findings"][0]
        assert finding["where"].endswith(file), finding
        assert finding["offset"] == (journal_size if offset == "end" else offset), finding
        human = cli("verify", job)
        assert f"damaged: {finding['where']} at byte {finding['offset']}" in human.stdout
    if pending_after is None:  # frontier.json: nothing in the directory can rebuild it
        opened = cli("inspect", job)
        assert opened.returncode == 1 and "write it anew" in opened.stderr
        return
    cli("verify", job, "--repair")
    assert cli("verify", job).returncode == 0
    with Frontier(job) as frontier:
        assert len(frontier) == pending_after
        assert not frontier.push(Request("https://shop.example/hats/"))  # still seen


# Moments of a compaction, each told by what the job directory looks like from outside.
def _locked_by(pid: int):
    def check(job: str, size: int) -> bool:
        try:
            with open(f"{job}/lock") as f:
                return f.read().strip() == str(pid)
        except OSError:
            return False
    return check


def _new_journals(job: str) -> list[str]:
    """The journal a compaction is writing (``requests.urls.compact.<random>``), if one is."""
    return glob.glob(f"{job}/requests.urls.compact.*")


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:  # renamed in since it was listed
        return 0


MOMENTS = {
    "while-starting": lambda job, size: True,
    "writing-the-new-journal": lambda job, size: bool(_new_journals(job)),
    "new-journal-half-written": lambda job, size: any(_size(path) > 300_000 for path in _new_journals(job)),
    "just-renamed": lambda job, size: os.path.getsize(f"{job}/requests.urls") < size,
    "closing": lambda job, size: b'"clean"' in Path(f"{job}/requests.cursor").read_bytes(),
}


@pytest.fixture(scope="module")
def long_journal(tmp_path_factory):
    """A job directory whose journal is mostly finished work, as after a crash (no checkpoint)."""
    job = tmp_path_factory.mktemp("compact") / "job"
    frontier = Frontier(job, maintenance=None)  # no background checkpoint either: recovery reads it all
    frontier.push_many(Request(f"https://a.example/{i}", priority=i % 4) for i in range(120_000))
    finished = []
    for _ in range(100_000):
        request = frontier.pop()
        assert request is not None
        finished.append(request.url)
        frontier.done(request)
    frontier._state.seen.flush()
    frontier._closing.release_files()  # no close(): no checkpoint, no compaction at close
    frontier._lock.release()
    pending = {f"https://a.example/{i}" for i in range(120_000)} - set(finished)
    return str(job), pending, finished


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.parametrize("moment", list(MOMENTS))
def test_compact_command_killed_leaves_old_or_new_directory(tmp_path, long_journal, moment):
    source, pending, finished = long_journal
    job = str(tmp_path / "job")
    shutil.copytree(source, job)
    size = os.path.getsize(f"{job}/requests.urls")
    proc = subprocess.Popen([*SCRIPT, "compact", job], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reached = MOMENTS[moment]
    deadline = time.monotonic() + 60
    assert proc.stderr is not None
    while not reached(job, size):
        assert proc.poll() is None, f"compact finished before the moment {moment!r}: {proc.stderr.read()[-500:]!r}"
        assert time.monotonic() < deadline
        time.sleep(0.0002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    after = os.path.getsize(f"{job}/requests.urls")
    state = "old" if after == size else "new"
    result = cli("verify", job)
    assert result.returncode == 0, result.stdout + result.stderr
    with Frontier(job) as frontier:
        got = []
        while (request := frontier.pop()) is not None:
            got.append(request.url)
            frontier.done(request)
        assert len(got) == len(set(got)) and set(got) == pending, f"{moment}: the {state} directory lost requests"
        assert not any(frontier.push(Request(url)) for url in finished[::997]), "finished work came back"
    print(f"\n{moment}: killed with the {state} journal in place")


def test_push_from_stdin_of_the_installed_script(tmp_path):
    job = str(tmp_path / "job")
    lines = "https://a.example/\nnot a url\nhttps://b.example/\nhttps://a.example/\nhttp://[::1/\n"
    result = subprocess.run([*SCRIPT, "push", job, "-f", "-"], input=lines, capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[0].startswith("line 2: skipped: Request.url 'not a url' has no scheme")
    assert result.stderr.splitlines()[1].startswith("line 5: skipped: Request.url 'http://[::1/'")
    assert result.stdout.strip() == "queued 2, duplicates 1, bad 2"
    with Frontier(job) as frontier:
        assert len(frontier) == 2
