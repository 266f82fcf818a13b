"""``inspect`` of a cleanly closed directory reads its checkpoint, not its journal, and
says exactly what a scan of the journal says."""

from __future__ import annotations

import pytest
from jobkit import dir_id
from popkit import take

import diskfrontier.jobdir.reader as jobinfo
from diskfrontier import Frontier, Request
from diskfrontier.jobdir import checkpoint as checkpoint_module
from diskfrontier.jobdir.layout import Layout


def crawled(path, *, compact: bool) -> None:
    with Frontier(path) as f:
        f.push_many(Request(f"https://a.example/{i}", priority=i % 4, meta={"n": i}) for i in range(300))
        for i in range(40):
            f.push(Request(f"https://b.example/{i}" + "x" * i))
        for _ in range(120):
            f.done(take(f))
        batch = [take(f) for _ in range(30)]
        f.done_many(batch[:20])  # ten stay in flight and are put back at the close
    if compact:
        with Frontier(path) as f:
            for _ in range(5):
                f.done(take(f))
            f.compact()
            f.push(Request("https://c.example/after-compaction"))
            f.done(take(f))


@pytest.mark.parametrize("compact", [False, True])
def test_inspect_of_a_clean_directory_reads_no_journal_and_agrees_with_a_scan(tmp_path, monkeypatch, compact):
    job = str(tmp_path / "job")
    crawled(job, compact=compact)

    def no_scan(*args, **kwargs):
        raise AssertionError("the journal of a clean directory was scanned")

    with monkeypatch.context() as patch:
        patch.setattr(jobinfo, "read_state", no_scan)
        fast = jobinfo.inspect_jobdir(job)
    assert fast.state == "clean"
    layout = Layout(job)
    checkpoint_module.write_open(layout.cursor, dir_id(layout.root), 0, None)  # as if a crawl had it open: scanned now
    scanned = jobinfo.inspect_jobdir(job)
    assert scanned.state.startswith("needs recovery")
    for field in ("pending", "pending_by_priority", "done", "seen", "reclaimable_bytes", "journal_bytes"):
        assert getattr(fast, field) == getattr(scanned, field), field
    assert fast.pending == 340 - 140 - (5 if compact else 0) and fast.reclaimable_bytes > 0


@pytest.mark.parametrize("order", ["lifo", "fifo"])
@pytest.mark.parametrize("push_order", [False, True])
def test_pending_of_a_clean_directory_reads_its_queue_files_lazily_in_pop_order(tmp_path, monkeypatch, order,
                                                                                 push_order):
    job = str(tmp_path / "job")
    with Frontier(job, order=order) as f:
        f.push_many(Request(f"https://a.example/{i}", priority=i % 3) for i in range(3000))
        for _ in range(100):
            f.done(take(f))
        f.pop()  # in flight at the close: put back on top of its queue
    reads: list[int] = []
    real_read = jobinfo.read_record

    def counted(fd, offset, path, salt, version=4):
        reads.append(offset)
        return real_read(fd, offset, path, salt, version)

    def no_scan(*args, **kwargs):
        raise AssertionError("the journal of a clean directory was scanned")

    with monkeypatch.context() as patch:
        patch.setattr(jobinfo, "read_state", no_scan)
        patch.setattr(jobinfo, "read_record", counted)
        pending = jobinfo.pending_requests(job, push_order=push_order)
        first = [r.url for _, r in zip(range(7), pending, strict=False)]
        assert len(pending) == 2900 and len(reads) <= 8  # a generator may read one ahead
        everything = [r.url for r in jobinfo.pending_requests(job, push_order=push_order)]
    with Frontier(job) as f:
        popped = [take(f).url for _ in range(2900)]
    if push_order and order == "lifo":  # within each priority, reversed
        by_priority: dict[int, list[str]] = {}
        for u in popped:
            by_priority.setdefault(int(u.rsplit("/", 1)[1]) % 3, []).append(u)
        popped = [u for p in sorted(by_priority, reverse=True) for u in reversed(by_priority[p])]
    assert everything == popped and first == popped[:7]


def test_done_counts_requests_done_not_retries_nor_compactions(tmp_path):
    from diskfrontier.jobdir.reader import inspect_jobdir

    job = str(tmp_path / "job")
    with Frontier(job) as f:
        f.push_many(Request(f"https://a.example/{i}") for i in range(5))
        for _ in range(3):
            f.retry(take(f))
        f.done(take(f))
        f.done(take(f), refetch_after=3600)  # a re-fetch: done now, pending again later
    assert inspect_jobdir(job).done == 2
    with Frontier(job) as f:
        f.compact()
    assert inspect_jobdir(job).done == 2  # kept across a compaction


KILLED = """
import os, signal, sys
from diskfrontier import Frontier, Request
f = Frontier(sys.argv[1])
f.push_many(Request(f"https://late.example/{i}", priority=i % 3) for i in range(50))
for _ in range(7):
    f.done(f.pop())
f.pop()  # in flight at the kill
os.kill(os.getpid(), signal.SIGKILL)
"""


def killed_after_a_clean_close(job: str) -> None:
    import subprocess
    import sys

    crawled(job, compact=False)
    subprocess.run([sys.executable, "-c", KILLED, job], check=False)


def test_a_killed_directory_is_read_with_its_checkpointed_start_vouched_and_agrees_with_a_full_scan(tmp_path,
                                                                                                      monkeypatch):
    """inspect and peek of a killed directory take the journal below its last open's length on that
    checkpoint's crc, as the next open does, and say what a scan of every record says."""
    job = str(tmp_path / "job")
    killed_after_a_clean_close(job)
    saved = checkpoint_module.read_checkpoint(Layout(job).cursor, dir_id(job))
    assert saved.state == "open" and saved.journal_crc is not None and saved.floor > 1000
    vouched = jobinfo.inspect_jobdir(job), [r.url for r in jobinfo.pending_requests(job)]
    prefixes = []
    real = jobinfo.read_state

    def record(*args, **kwargs):
        prefixes.append(kwargs.get("prefix"))
        return real(*args, **kwargs)

    monkeypatch.setattr(jobinfo, "read_state", record)
    jobinfo.inspect_jobdir(job)
    jobinfo.pending_requests(job)
    assert prefixes == [(saved.floor, saved.journal_crc)] * 2
    monkeypatch.setattr(jobinfo, "_vouched", lambda saved: None)
    scanned = jobinfo.inspect_jobdir(job), [r.url for r in jobinfo.pending_requests(job)]
    assert vouched == scanned and scanned[0].pending == 300 + 40 - 120 - 20 + 50 - 7


def test_a_changed_byte_in_the_vouched_start_is_damage_named_not_taken(tmp_path):
    from diskfrontier import JobDirCorrupt

    job = str(tmp_path / "job")
    killed_after_a_clean_close(job)
    layout = Layout(job)
    with open(layout.journal, "r+b") as f:
        f.seek(200)
        value = f.read(1)[0]
        f.seek(200)
        f.write(bytes([value ^ 0x40]))
    with pytest.raises(JobDirCorrupt):
        jobinfo.inspect_jobdir(job)
    with pytest.raises(JobDirCorrupt):
        list(jobinfo.pending_requests(job))
