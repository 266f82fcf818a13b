"""Guarantee 6: bad bytes are named, not swallowed; torn tails are cut; repair keeps every intact record."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from popkit import take

from diskfrontier import FormatError, Frontier, JobDirCorrupt, Request
from diskfrontier.jobdir.maintenance.verify import verify

N = 200


def make_job(path, *, clean: bool, done: int = 20):
    """A job directory with N pushed and `done` finished; closed cleanly or left as after a crash."""
    f = Frontier(path)
    f.push_many(Request(f"https://a.example/{i}", priority=i % 3 - 1) for i in range(N))
    popped = [take(f) for _ in range(done)]
    for r in popped:
        f.done(r)
    finished = {r.url for r in popped}
    if clean:
        f.close()
    else:  # as after kill -9: nothing of close() happens; the lock goes with the process
        f._state.seen.flush()
        f._closing.release_files()
        f._lock.release()
    return finished


def urls_after_open(path):
    with Frontier(path) as f:
        out = []
        while (r := f.pop()) is not None:
            out.append(r.url)
            f.done(r)
    return set(out)


def expected(finished):
    return {f"https://a.example/{i}" for i in range(N)} - finished


@pytest.mark.parametrize("clean", [True, False], ids=["after-clean-close", "after-crash"])
def test_torn_journal_tail_is_cut_and_reported(tmp_path, caplog, clean):
    job = tmp_path / "job"
    finished = make_job(job, clean=clean)
    with open(job / "requests.urls", "ab") as f:
        f.write(b"\x00\x00\x01\x00\x12\x34")  # the start of a record that never finished
    got = urls_after_open(job)
    assert got == expected(finished)
    assert any("torn tail" in r.message for r in caplog.records)
    assert list(tmp_path.glob("job/requests.urls.torn-*"))  # the cut bytes were kept aside


def test_last_record_torn_by_a_crash_loses_only_that_record(tmp_path):
    job = tmp_path / "job"
    with Frontier(job) as f:
        f.push_many(Request(f"https://a.example/{i}") for i in range(10))
    f = Frontier(job)
    f.push(Request("https://a.example/last"))  # written after the open: a crash may tear it
    f._state.seen.flush()
    f._closing.release_files()
    f._lock.release()
    size = os.path.getsize(job / "requests.urls")
    os.truncate(job / "requests.urls", size - 5)
    got = urls_after_open(job)
    assert got == {f"https://a.example/{i}" for i in range(10)}


@pytest.mark.parametrize("keep", [0.4, 0.99])
def test_journal_cut_below_a_clean_checkpoint_is_damage_not_a_torn_tail(tmp_path, keep):
    job = tmp_path / "job"
    make_job(job, clean=True)
    size = os.path.getsize(job / "requests.urls")
    os.truncate(job / "requests.urls", int(size * keep))
    with pytest.raises(JobDirCorrupt, match="truncated") as info:
        Frontier(job)
    assert info.value.offset == int(size * keep)
    report = verify(job)
    assert not report.sound and "truncated" in report.findings[0].problem


def test_journal_cut_at_a_record_boundary_below_the_floor_of_an_open_directory_is_damage(tmp_path):
    job = tmp_path / "job"
    make_job(job, clean=True)
    f = Frontier(job)  # open: the checkpoint records the journal's length as its floor
    f.push(Request("https://a.example/after-open"))
    f._state.seen.flush()
    f._closing.release_files()
    f._lock.release()  # killed
    with Frontier(job):  # recovery; the floor is now the length after recovery
        pass
    size = os.path.getsize(job / "requests.urls")
    os.truncate(job / "requests.urls", size - 30)
    with pytest.raises(JobDirCorrupt, match=r"requests\.urls"):
        Frontier(job)


@pytest.mark.parametrize("clean", [True, False], ids=["after-clean-close", "after-crash"])
def test_flipped_byte_in_journal_is_named_with_offset(tmp_path, clean):
    job = tmp_path / "job"
    make_job(job, clean=clean)
    offset = 8 + 40  # inside the first PUSH record's body
    with open(job / "requests.urls", "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(JobDirCorrupt) as info, Frontier(job) as f:  # popped, never done: all re-queued at close
        while f.pop() is not None:
            pass
    assert info.value.file.endswith("requests.urls")
    assert info.value.offset == 8
    assert "byte 8" in str(info.value) and "verify --repair" in str(info.value)
    report = verify(job)
    assert not report.sound and report.findings[0].offset == 8
    repaired = verify(job, repair=True)
    assert repaired.repaired
    assert verify(job).sound
    got = urls_after_open(job)
    assert len(got) == N - 20 - 1 or len(got) == N - 20  # only the damaged record is gone


def test_repair_keeps_done_records_pointing_at_their_push(tmp_path):
    job = tmp_path / "job"
    finished = make_job(job, clean=False)
    with open(job / "requests.urls", "r+b") as f:  # damage the very first record's fingerprint
        f.seek(30)
        f.write(b"\x5a\xa5\x5a")
    verify(job, repair=True)
    got = urls_after_open(job)
    assert not got & finished  # no resurrection through shifted offsets
    assert len(got) == len(expected(finished)) - (0 if "https://a.example/0" in finished else 1)


def test_garbage_appended_to_journal_is_named_then_repaired(tmp_path):
    job = tmp_path / "job"
    finished = make_job(job, clean=True)
    size = os.path.getsize(job / "requests.urls")
    with open(job / "requests.urls", "ab") as f:
        f.write(b"\xff\xff\xff\xff" + os.urandom(3000))  # not a prefix of any record
    with pytest.raises(JobDirCorrupt) as info:
        Frontier(job)
    assert info.value.offset == size
    verify(job, repair=True)
    assert urls_after_open(job) == expected(finished)


@pytest.mark.parametrize("damage", ["emptied", "deleted", "bad-magic"])
def test_journal_missing_or_emptied_is_an_error_not_an_empty_crawl(tmp_path, damage):
    job = tmp_path / "job"
    make_job(job, clean=True)
    path = job / "requests.urls"
    if damage == "emptied":
        path.write_bytes(b"")
    elif damage == "deleted":
        path.unlink()
    else:
        path.write_bytes(b"NOTAJRNL" + path.read_bytes()[8:])
    with pytest.raises(JobDirCorrupt, match=r"requests\.urls"):
        Frontier(job)
    assert not verify(job).sound


def test_newer_journal_version_is_a_format_error(tmp_path):
    job = tmp_path / "job"
    make_job(job, clean=False)
    data = (job / "requests.urls").read_bytes()
    (job / "requests.urls").write_bytes(data[:7] + b"\x09" + data[8:])
    with pytest.raises(FormatError, match="got v9, can handle v1"):
        Frontier(job)


def test_newer_job_directory_format_is_refused(tmp_path):
    job = tmp_path / "job"
    make_job(job, clean=True)
    meta = json.loads((job / "frontier.json").read_text())
    meta["version"] = 7
    (job / "frontier.json").write_text(json.dumps(meta))
    with pytest.raises(FormatError, match="got v7, can handle v1 to v6"):
        Frontier(job)


@pytest.mark.parametrize("version", [4, 5])
def test_a_format_4_or_5_directory_is_upgraded_by_its_version_alone(tmp_path, version):
    """Formats 5 and 6 only add to what records hold: a format-4 or 5 directory opens as it was (its clean
    checkpoint trusted, nothing rebuilt) and is format 6 from then on, so an older release refuses it."""
    job = tmp_path / "job"
    make_job(job, clean=True)
    with Frontier(job) as frontier:
        pending = len(frontier)
    journal = (job / "requests.urls").read_bytes()
    meta = json.loads((job / "frontier.json").read_text())
    meta["version"] = version
    (job / "frontier.json").write_text(json.dumps(meta))
    with Frontier(job) as frontier:
        assert frontier.recovery == "clean" and len(frontier) == pending
    assert json.loads((job / "frontier.json").read_text())["version"] == 6
    assert (job / "requests.urls").read_bytes() == journal


def test_garbage_frontier_json_is_named(tmp_path):
    job = tmp_path / "job"
    make_job(job, clean=True)
    (job / "frontier.json").write_bytes(b"\x00{garbage")
    with pytest.raises(JobDirCorrupt, match=r"frontier\.json") as info:
        Frontier(job)
    assert "write it anew" in str(info.value) and "verify --repair" not in str(info.value)


@pytest.mark.parametrize("damage", ["torn", "emptied", "deleted"])
@pytest.mark.parametrize("clean", [True, False], ids=["after-clean-close", "after-crash"])
def test_seen_file_damage_keeps_dedupe_of_everything_in_the_journal(tmp_path, damage, clean):
    job = tmp_path / "job"
    finished = make_job(job, clean=clean)
    path = job / "requests.seen"
    if damage == "torn":
        os.truncate(path, os.path.getsize(path) - 7)
    elif damage == "emptied":
        path.write_bytes(b"")
    else:
        path.unlink()
    if clean:  # fsynced at the close: anything missing now is damage, named; repair refills from the journal
        with pytest.raises(JobDirCorrupt, match=r"requests\.seen"):
            Frontier(job)
        assert verify(job, repair=True).repaired
    with Frontier(job) as f:
        assert not any(f.push(Request(f"https://a.example/{i}")) for i in range(N))
    assert urls_after_open(job) == expected(finished)


def test_seen_file_bad_length_is_named_with_offset(tmp_path):
    job = tmp_path / "job"
    make_job(job, clean=True)
    with open(job / "requests.seen", "r+b") as f:
        f.seek(22 * 5)
        f.write(b"\x00\x63")
    with pytest.raises(JobDirCorrupt) as info:
        Frontier(job)
    assert info.value.file.endswith("requests.seen") and info.value.offset == 110
    assert verify(job, repair=True).repaired
    with Frontier(job) as f:
        assert len(f) == N - 20


@pytest.mark.parametrize("target", ["requests.cursor", "requests.queue/active.json", "requests.queue/p0"])
@pytest.mark.parametrize("damage", ["garbage", "emptied", "deleted", "truncated"])
def test_checkpoint_and_queue_damage_is_rebuilt_from_the_journal(tmp_path, target, damage):
    job = tmp_path / "job"
    finished = make_job(job, clean=True)
    path = job / target
    assert path.exists()
    if damage == "garbage":
        path.write_bytes(os.urandom(64))
    elif damage == "emptied":
        path.write_bytes(b"")
    elif damage == "deleted":
        path.unlink()
    else:
        os.truncate(path, max(0, os.path.getsize(path) // 2))
    assert urls_after_open(job) == expected(finished)


def test_queue_entries_flipped_in_place_are_found_by_verify(tmp_path):
    job = tmp_path / "job"
    finished = make_job(job, clean=True)
    path = job / "requests.queue" / "p0"
    data = bytearray(path.read_bytes())
    data[-12:-4] = (123456789).to_bytes(8, "big")  # the top entry now points nowhere
    path.write_bytes(bytes(data))
    report = verify(job)
    assert not report.sound and "p0" in report.findings[0].file
    # the checkpoint's checksum of the queue file no longer matches: the queues are rebuilt
    assert urls_after_open(job) == expected(finished)


def test_legacy_hex_seen_file_of_old_scrapy_is_adopted(tmp_path):
    job = tmp_path / "scrapy-job"
    job.mkdir()
    fps = [Request(f"https://a.example/{i}").fingerprint for i in range(50)]
    (job / "requests.seen").write_text("".join(fp.hex() + "\n" for fp in fps))
    (job / "requests.queue").mkdir()
    (job / "requests.queue" / "p0").write_bytes(b"pickled things")
    with Frontier(job) as f:
        assert not any(f.push(Request(f"https://a.example/{i}")) for i in range(50))
        assert f.push(Request("https://a.example/new"))
    data = (job / "requests.seen").read_bytes()
    assert data[:2] == b"\x00\x14" and len(data) == 51 * 22  # now Scrapy 2.19's binary format
    assert list(tmp_path.glob("scrapy-job/requests.queue.scrapy-*/p0"))  # set aside, never unpickled


def test_binary_seen_file_of_scrapy_is_adopted(tmp_path):
    job = tmp_path / "scrapy-job"
    job.mkdir()
    fps = [Request(f"https://a.example/{i}").fingerprint for i in range(50)]
    (job / "requests.seen").write_bytes(b"".join(len(fp).to_bytes(2, "big") + fp for fp in fps) + b"\x00\x14abc")
    with Frontier(job) as f:
        assert not any(f.push(Request(f"https://a.example/{i}")) for i in range(50))


def test_verify_is_read_only(tmp_path):
    job = tmp_path / "job"
    make_job(job, clean=False)
    before = {p.name: p.read_bytes() for p in job.iterdir() if p.is_file()}
    verify(job)
    after = {p.name: p.read_bytes() for p in job.iterdir() if p.is_file()}
    assert before == after
    shutil.rmtree(job)
