"""requests.seen.index: the seen index saved at a clean close and loaded in bulk at the next open.

It is a cache of requests.seen: every way it can be wrong (damaged, stale, from another
directory, cut short, larger than the seen file) must end in the seen file being read,
with dedupe exactly as before, never in an open that forgets what was seen.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from jobkit import dir_id

from diskfrontier import Frontier, Request
from diskfrontier.core.errors import JobDirCorrupt
from diskfrontier.jobdir import closing as closing_module
from diskfrontier.jobdir.seenindex import IndexRecord, IndexUnusable, SeenIndex, key_of


@pytest.fixture(autouse=True)
def save_at_every_close(monkeypatch):
    monkeypatch.setattr(closing_module, "INDEX_MIN_NEW_KEYS", 1)


def url(i: int) -> str:
    return f"https://h{i % 13}.example/page/{i}"


def fill(path, start: int, stop: int) -> None:
    with Frontier(path) as frontier:
        assert frontier.push_many([Request(url(i)) for i in range(start, stop)]) == stop - start


def all_duplicates(path, stop: int) -> bool:
    with Frontier(path) as frontier:
        return frontier.push_many([Request(url(i)) for i in range(stop)]) == 0 and frontier.push(Request(url(stop)))


def cursor(path) -> dict:
    with open(os.path.join(path, "requests.cursor")) as f:
        return json.load(f)


def test_round_trip_keeps_every_key_and_only_those(tmp_path):
    index = SeenIndex()
    keys = [key_of(os.urandom(20)) for _ in range(30_000)]
    index.update(keys)
    record = index.save(str(tmp_path / "idx"), seen_bytes=1234)
    loaded = SeenIndex.load(str(tmp_path / "idx"), record)
    assert len(loaded) == len(index) == len(set(keys))
    assert all(k in loaded for k in keys)
    assert sum(key_of(os.urandom(20)) in loaded for _ in range(10_000)) == 0
    assert loaded.add(keys[0]) is False and loaded.add(key_of(b"new" * 7)) is True


def test_a_record_that_does_not_match_is_refused(tmp_path):
    index = SeenIndex()
    index.update(range(1, 5000))
    path = str(tmp_path / "idx")
    record = index.save(path, seen_bytes=99)
    for wrong in (IndexRecord(98, record.count, record.crc, record.size),
                  IndexRecord(99, record.count + 1, record.crc, record.size),
                  IndexRecord(99, record.count, record.crc ^ 1, record.size),
                  IndexRecord(99, record.count, record.crc, record.size + 8)):
        with pytest.raises(IndexUnusable):
            SeenIndex.load(path, wrong)
    data = bytearray(Path(path).read_bytes())
    for at in (3, 20, 40, len(data) // 2, len(data) - 2):
        damaged = bytearray(data)
        damaged[at] ^= 0x40
        Path(path).write_bytes(damaged)
        with pytest.raises(IndexUnusable):
            SeenIndex.load(path, record)


def test_clean_open_loads_the_saved_index(tmp_path):
    path = str(tmp_path / "job")
    fill(path, 0, 3000)
    saved = cursor(path)["seen_index"]
    assert saved[0] == os.path.getsize(os.path.join(path, "requests.seen")) and saved[1] == 3000
    with Frontier(path) as frontier:
        assert frontier._state.seen.index_record is not None and len(frontier._state.seen.index) == 3000
    assert all_duplicates(path, 3000)


def test_a_stale_index_is_completed_from_the_seen_file(tmp_path, monkeypatch):
    path = str(tmp_path / "job")
    fill(path, 0, 2000)
    monkeypatch.setattr(closing_module, "INDEX_MIN_NEW_KEYS", 10**9)  # the next closes keep the old index
    fill(path, 2000, 2500)
    assert cursor(path)["seen_index"][1] == 2000
    with Frontier(path) as frontier:
        record = frontier._state.seen.index_record
        assert record is not None and record.count == 2000 and len(frontier._state.seen.index) == 2500
    assert all_duplicates(path, 2500)


@pytest.mark.parametrize("how", ["damaged", "truncated", "foreign", "deleted", "empty"])
def test_a_bad_index_means_reading_the_seen_file(tmp_path, how, caplog):
    path = str(tmp_path / "job")
    fill(path, 0, 2000)
    index_path = os.path.join(path, "requests.seen.index")
    if how == "damaged":
        data = bytearray(Path(index_path).read_bytes())
        data[len(data) // 3] ^= 1
        Path(index_path).write_bytes(data)
    elif how == "truncated":
        os.truncate(index_path, os.path.getsize(index_path) - 8)
    elif how == "foreign":  # a valid index of another directory with as many keys
        other = str(tmp_path / "other")
        fill(other, 10_000, 12_000)
        shutil.copyfile(os.path.join(other, "requests.seen.index"), index_path)
    elif how == "deleted":
        os.unlink(index_path)
    else:
        open(index_path, "wb").close()
    with caplog.at_level(logging.WARNING, logger="diskfrontier"), Frontier(path) as frontier:
        assert frontier._state.seen.index_record is None and len(frontier._state.seen.index) == 2000
    assert "requests.seen.index not used" in caplog.text
    assert all_duplicates(path, 2000)


def test_an_index_past_the_end_of_the_seen_file_is_not_believed(tmp_path):
    path = str(tmp_path / "job")
    fill(path, 0, 2000)
    seen = os.path.join(path, "requests.seen")
    os.truncate(seen, os.path.getsize(seen) - 22)
    with pytest.raises(JobDirCorrupt, match="truncated"):
        Frontier(path)


def test_recovery_after_sigkill_uses_the_index_and_the_journal(tmp_path):
    path = str(tmp_path / "job")
    fill(path, 0, 2000)
    # 100 more pushes, then SIGKILL: their fingerprints are still buffered, so only the journal has them
    child = (
        "import os, signal, sys\n"
        "from diskfrontier import Frontier, Request\n"
        "f = Frontier(sys.argv[1])\n"
        "f.push_many([Request(f'https://h{i % 13}.example/page/{i}') for i in range(2000, 2100)])\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    run = subprocess.run([sys.executable, "-c", child, path], timeout=60)
    assert run.returncode == -signal.SIGKILL
    assert os.path.getsize(os.path.join(path, "requests.seen")) == 2000 * 22
    with Frontier(path) as reopened:
        assert reopened.recovery == "rebuilt" and reopened._state.seen.index_record is not None
        assert len(reopened._state.seen.index) == 2100 and len(reopened) == 2100
        assert reopened.stats()["seen_added_from_journal"] == 100
    assert all_duplicates(path, 2100)


def test_a_missing_seen_file_with_an_index_is_named(tmp_path):
    path = str(tmp_path / "job")
    fill(path, 0, 2000)
    os.unlink(os.path.join(path, "requests.seen"))
    with pytest.raises(JobDirCorrupt, match=r"requests\.seen"):
        Frontier(path)


def test_a_repair_stopped_half_way_leaves_a_directory_rebuilt_from_zero(tmp_path, monkeypatch):
    from diskfrontier.jobdir import checkpoint
    from diskfrontier.jobdir.maintenance import verify as verify_module

    path = str(tmp_path / "job")
    fill(path, 0, 2000)
    journal = os.path.join(path, "requests.urls")
    data = bytearray(Path(journal).read_bytes())
    data[100] ^= 1  # damage in the first record: the journal is rewritten
    Path(journal).write_bytes(data)

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(verify_module, "_check_seen", stopped)
    with pytest.raises(KeyboardInterrupt):
        verify_module.verify(path, repair=True)
    assert checkpoint.read_checkpoint(os.path.join(path, "requests.cursor"), dir_id(path)).state == "repaired"
    assert not os.path.exists(os.path.join(path, "requests.seen.index"))
    with Frontier(path) as frontier:
        assert frontier.recovery == "rebuilt" and len(frontier) == 1999
    assert all_duplicates(path, 2000)


FULL_DISK_AT_CLOSE = """
import os, resource, signal, sys
import diskfrontier.jobdir.closing
from diskfrontier import Frontier, Request
diskfrontier.jobdir.closing.INDEX_MIN_NEW_KEYS = 1
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
f = Frontier(sys.argv[1])
f.push_many(Request(f"https://a.example/{i}") for i in range(300))
resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, resource.RLIM_INFINITY))  # the index is larger
f.close()
print("closed")
"""


def test_a_seen_index_that_cannot_be_saved_does_not_spoil_the_close(tmp_path):
    job = str(tmp_path / "job")
    result = subprocess.run([sys.executable, "-c", FULL_DISK_AT_CLOSE, job], capture_output=True, text=True,
                            timeout=120)
    assert result.stdout.strip() == "closed", result.stderr
    assert "could not save" in result.stderr
    assert not os.path.exists(os.path.join(job, "requests.seen.index"))
    with Frontier(job) as f:
        assert f.recovery == "clean" and len(f) == 300


@pytest.mark.parametrize("width", [8, 12, 32])
def test_fingerprints_that_share_their_first_bytes_are_not_duplicates(tmp_path, width):
    """A fingerprinter whose fingerprints are not 20-byte hashes (here: a shared prefix, then a
    counter) must not make distinct requests look seen: their whole bytes are hashed."""
    job = tmp_path / "job"

    def request(i: int) -> Request:
        fingerprint = (b"https://" * 4)[:width - 4] + i.to_bytes(4, "big")
        return Request(f"https://a.example/{i}", fingerprint=fingerprint)

    with Frontier(job) as f:
        assert f.push_many(request(i) for i in range(500)) == 500
        assert all(not f.push(request(i)) for i in range(500))
    for new in (500, 501):  # the seen file is read at each open (too few keys to save an index)
        with Frontier(job) as f:
            assert all(not f.push(request(i)) for i in range(new)) and f.push(request(new))
