"""Reads of a killed or live job directory (inspect, peek, failed, hosts, the seen set) start from the last checkpoint.

Each view is computed twice: from the directory as it is (the checkpoint names a saved state, so only the journal
after it is read) and from a copy whose state file was removed (the journal read from its start). They must
agree, and the first must really have started from the state.
"""

from __future__ import annotations

import os
import shutil

import pytest
from popkit import take

import diskfrontier.jobdir.reader as reader
from diskfrontier import Frontier, Maintenance, Request
from diskfrontier.jobdir.reader import (
    all_seen_fingerprints,
    failed_requests,
    host_table,
    inspect_jobdir,
    pending_requests,
)

OFF = Maintenance(checkpoint_records=None, checkpoint_seconds=None, compact_share=None)


def _killed_after_a_checkpoint(job: str) -> int:
    f = Frontier(job, maintenance=OFF, watch=False)
    f.push_many(Request(f"https://h{i % 4}.example/{i}", priority=i % 3) for i in range(3000))
    for i in range(2000):
        request = f.pop()
        assert request is not None
        if i % 50 == 0:
            f.fail(request, f"error {i}")
        else:
            f.done(request)
    f.set_delay("h1.example", 2.0)
    f.checkpoint()
    at = f._state.states[0].at
    f.push_many(Request(f"https://h{i % 4}.example/late/{i}") for i in range(50))
    for _ in range(20):
        f.done(take(f))
    f.pop()  # in flight at the kill: pending as far as the journal goes
    f._closing.release_files()  # no close: what a kill leaves
    f._lock.release()
    return at


def _views(job: str) -> dict:
    info = inspect_jobdir(job).as_dict()
    info.pop("path")
    return {
        "inspect": info,
        "peek": [r.url for r in pending_requests(job)],
        "failed": [(e.request.url, e.error) for e in failed_requests(job)],
        "hosts": host_table(job),
        "seen": sorted(set(all_seen_fingerprints(job))),
    }


def test_the_views_of_a_killed_directory_start_from_its_checkpoint_and_agree_with_a_full_read(tmp_path, monkeypatch):
    job, copy = str(tmp_path / "job"), str(tmp_path / "copy")
    at = _killed_after_a_checkpoint(job)
    shutil.copytree(job, copy)
    for name in os.listdir(copy):
        if name.startswith("requests.state."):
            os.unlink(os.path.join(copy, name))  # the copy's checkpoint names a state that is gone
    starts: list[int] = []
    real = reader.read_state

    def spy(*args, **kwargs):
        start = kwargs.get("start")
        starts.append(0 if start is None else start.at)
        return real(*args, **kwargs)

    monkeypatch.setattr(reader, "read_state", spy)
    from_state = _views(job)
    assert starts and all(s == at for s in starts), starts
    starts.clear()
    from_start = _views(copy)
    assert starts and not any(starts)
    assert from_state == from_start
    assert from_state["inspect"]["pending"] == 1000 + 50 - 20 and len(from_state["failed"]) == 40


def test_a_damaged_state_is_not_used_by_a_view(tmp_path):
    job = str(tmp_path / "job")
    _killed_after_a_checkpoint(job)
    expected = _views(job)
    (name,) = [n for n in os.listdir(job) if n.startswith("requests.state.")]
    with open(os.path.join(job, name), "r+b") as f:
        f.seek(40)
        byte = f.read(1)
        f.seek(40)
        f.write(bytes([byte[0] ^ 1]))
    assert _views(job) == expected


@pytest.mark.parametrize("runner", ["process", "thread"])
def test_a_live_directory_is_read_from_its_latest_checkpoint(tmp_path, runner):
    job = str(tmp_path / "job")
    with Frontier(job, maintenance=Maintenance(checkpoint_records=200, checkpoint_seconds=None, compact_share=None,
                                                runner=runner)) as f:
        f.push_many(Request(f"https://a.example/{i}") for i in range(500))
        for _ in range(400):
            f.done(take(f))
        f.checkpoint()
        assert pending_requests(job).__len__() == 100
        assert [r.url for r in pending_requests(job)][:3] == [f"https://a.example/{i}" for i in (99, 98, 97)]


def test_verify_checks_the_saved_state_against_the_journal(tmp_path):
    from diskfrontier.jobdir.layout import Layout, read_meta, salt_of
    from diskfrontier.jobdir.maintenance.verify import verify
    from diskfrontier.jobdir.statefile import encode_state, read_state_file

    job = str(tmp_path / "job")
    _killed_after_a_checkpoint(job)
    assert verify(job).sound
    # a state whose own checks hold but which says something else than the journal (one pending request left
    # out): what no kill or damage makes, and what a recovery must never start from
    from diskfrontier.jobdir import checkpoint

    layout = Layout(job)
    meta = read_meta(layout)
    saved = checkpoint.read_checkpoint(layout.cursor, meta["id"])
    (record,) = saved.states
    state = read_state_file(job, record, meta["id"], salt_of(meta))
    for name in ("order", "codes", "hosts", "sizes"):
        del getattr(state, name)[-1]
    data = encode_state(state, salt_of(meta))
    with open(os.path.join(job, record.name), "wb") as f:
        f.write(data)
    import zlib

    forged = type(record)(record.name, len(data), zlib.crc32(data), record.at, record.journal_crc)
    checkpoint.write_open(layout.cursor, meta["id"], saved.floor, saved.seen_tail, saved.seen_index,
                          saved.journal_crc, [forged])
    report = verify(job)
    assert not report.sound and any("does not say what the journal says" in str(f) for f in report.findings)
    assert verify(job, repair=True).repaired and verify(job).sound
