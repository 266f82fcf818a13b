"""A full disk is named: the file, and what to do (issue 19, defect 6a).

Before, a crawl stopped by a full disk raised a bare ``OSError(28)`` naming no file. Now
every write of a job directory raises ``DiskFull`` (a ``FrontierError`` and an
``OSError``) naming the file, saying to free space and open it again, and keeps its
rollback: nothing acknowledged is lost. Tested on a real full filesystem (a small tmpfs,
when this process may mount one) and with the error injected.
"""

from __future__ import annotations

import errno
import os

import pytest
from click.testing import CliRunner

import diskfrontier.files.atomic
from diskfrontier import Frontier, FrontierError, Request
from diskfrontier.cli import main
from diskfrontier.core.errors import DiskFull


def _fill(disk: str, leave: int) -> str:
    """Fill ``disk`` up, then give back ``leave`` bytes; return the filler's path."""
    filler = os.path.join(disk, "filler")
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    size = os.path.getsize(filler)
    os.truncate(filler, max(0, size - leave))
    return filler


def _drain(job: str) -> list[str]:
    with Frontier(job) as frontier:
        out = []
        while (request := frontier.pop()) is not None:
            out.append(request.url)
            frontier.done(request)
    return out


def test_pushes_onto_a_full_disk_raise_diskfull_naming_the_file(small_disk):
    job = os.path.join(small_disk, "job")
    Frontier(job).close()
    filler = _fill(small_disk, 16 << 10)
    acked: list[str] = []
    frontier = Frontier(job)
    failed_url = None
    with pytest.raises(DiskFull) as raised:
        for i in range(100_000):
            url = f"https://full.example/{i}"
            failed_url = url
            if frontier.push(Request(url, meta={"pad": "x" * 300})):
                acked.append(url)
    error = raised.value
    assert isinstance(error, FrontierError) and isinstance(error, OSError) and error.errno == errno.ENOSPC
    assert error.filename.startswith(job + os.sep), error.filename
    assert "free space on the disk" in str(error) and "nothing acknowledged was lost" in str(error)
    assert len(acked) > 10
    try:
        frontier.close()
    except FrontierError as exc:  # the checkpoint may not fit either: named too
        assert isinstance(exc, DiskFull), exc
    os.unlink(filler)
    drained = _drain(job)
    assert set(acked) <= set(drained) <= {*acked, failed_url}


def test_export_onto_a_full_disk_is_one_line_naming_the_output(small_disk, tmp_path):
    job = str(tmp_path / "job")
    with Frontier(job) as frontier:
        frontier.push_many(Request(f"https://a.example/{i}", meta={"pad": "y" * 500}) for i in range(3000))
    out = os.path.join(small_disk, "out.jsonl")
    result = CliRunner().invoke(main, ["export", job, "-o", out])
    assert result.exit_code == 1
    assert f"cannot write {out}: No space left on device" in result.output
    assert "run the export again" in result.output and "Traceback" not in result.output


def _fail_writes_to(monkeypatch, target) -> list[int]:
    """Make ``os.write`` raise ENOSPC for the descriptors ``target()`` names; return the calls refused."""
    real = os.write
    refused: list[int] = []

    def write(fd, data):
        if fd in target():
            refused.append(fd)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    return refused


def test_an_injected_enospc_on_the_journal_names_it_and_leaves_the_frontier_usable(tmp_path, monkeypatch):
    job = str(tmp_path / "job")
    with Frontier(job) as frontier:
        frontier.push(Request("https://a.example/1"))
        refused = _fail_writes_to(monkeypatch, lambda: {frontier._state.journal.fd})
        with pytest.raises(DiskFull) as raised:
            frontier.push(Request("https://a.example/2"))
        assert refused and raised.value.filename == os.path.join(job, "requests.urls")
        with pytest.raises(DiskFull):
            frontier.push_many([Request("https://a.example/3"), Request("https://a.example/4")])
        monkeypatch.undo()
        assert frontier.push(Request("https://a.example/5"))
        assert frontier.stats()["dirty"] is None  # cut back: as before the call
    assert sorted(_drain(job)) == ["https://a.example/1", "https://a.example/5"]


def test_an_injected_enospc_on_the_seen_file_names_it(tmp_path, monkeypatch):
    job = str(tmp_path / "job")
    with Frontier(job) as frontier:
        refused = _fail_writes_to(monkeypatch, lambda: {frontier._state.seen.fd})
        with pytest.raises(DiskFull) as raised:
            frontier.mark_seen([bytes([i]) * 20 for i in range(3)])
        assert refused and raised.value.filename == os.path.join(job, "requests.seen")
        monkeypatch.undo()


def test_an_injected_enospc_at_close_names_the_file_and_loses_nothing(tmp_path, monkeypatch):
    job = str(tmp_path / "job")
    frontier = Frontier(job)
    frontier.push_many(Request(f"https://a.example/{i}") for i in range(20))
    real = diskfrontier.files.atomic.write_all

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(diskfrontier.files.atomic, "write_all", full)
    with pytest.raises(DiskFull) as raised:
        frontier.close()
    assert raised.value.filename.startswith(job + os.sep)
    assert not [n for n in os.listdir(job) if ".tmp-" in n]  # the temp file went with the error
    monkeypatch.setattr(diskfrontier.files.atomic, "write_all", real)
    assert sorted(_drain(job)) == sorted(f"https://a.example/{i}" for i in range(20))


def test_other_os_errors_are_not_renamed(tmp_path, monkeypatch):
    job = str(tmp_path / "job")
    with Frontier(job) as frontier:
        real = os.write

        def write(fd, data):
            if fd == frontier._state.journal.fd:
                raise OSError(errno.EBADF, os.strerror(errno.EBADF))
            return real(fd, data)

        monkeypatch.setattr(os, "write", write)
        with pytest.raises(OSError) as raised:
            frontier.push(Request("https://a.example/1"))
        assert not isinstance(raised.value, FrontierError)
        monkeypatch.undo()
