"""Checkpoints and compactions while a frontier runs (``jobdir/upkeep.py``): done in the background, invisible
to the calls, and abandoned without harm when they fail (a full disk, an I/O error, their process killed,
Ctrl-C).

Each workload keeps a set of the requests it expects pending and checks it against a drain after a reopen,
and against the journal's own scan: nothing acknowledged lost, nothing done back.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
import time
from typing import Any

import pytest
from jobkit import dir_salt
from popkit import take

import diskfrontier.jobdir.maintenance.compaction as compaction_module
import diskfrontier.jobdir.tailcopy as tailcopy_module
from diskfrontier import Frontier, Maintenance, Request
from diskfrontier.jobdir import inbox
from diskfrontier.jobdir.replay import read_state

FAST: dict[str, Any] = {"checkpoint_records": 300, "checkpoint_seconds": None, "compact_share": 0.5,
                        "compact_min_bytes": 32 << 10}


def _url(n: int) -> str:
    return f"https://h{n % 5}.example/{n}"


class Steady:
    """A crawl-like loop on one frontier: a steady number pending, requests popped, finished and replaced."""

    def __init__(self, frontier: Frontier, pending: int) -> None:
        self.f = frontier
        self.n = 0
        self.expected: set[str] = set()
        self.inflight: list[Request] = []
        self.push(pending)

    def push(self, count: int) -> None:
        batch = [Request(_url(self.n + i)) for i in range(count)]
        self.n += count
        assert self.f.push_many(batch) == count
        self.expected.update(r.url for r in batch)

    def cycle(self) -> None:
        request = self.f.pop()
        assert request is not None
        self.inflight.append(request)
        if len(self.inflight) > 3:
            done = self.inflight.pop(0)
            self.f.done(done)
            self.expected.discard(done.url)
        self.push(1)

    def run(self, cycles: int) -> None:
        for _ in range(cycles):
            self.cycle()


def _wait_for(predicate, what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"waited {seconds}s for {what}"
        time.sleep(0.05)


def _pending_urls(job) -> set[str]:
    with Frontier(job, watch=False, maintenance=None) as f:
        out = set()
        while (request := f.pop()) is not None:
            out.add(request.url)
        return out


@pytest.mark.parametrize("runner", ["process", "thread"])
def test_the_background_keeps_the_journal_to_the_size_of_what_is_live(tmp_path, runner):
    job = tmp_path / "job"
    f = Frontier(job, maintenance=Maintenance(**FAST, runner=runner))
    work = Steady(f, 400)
    largest = 0
    for _ in range(40):
        work.run(250)
        stats = f.stats()
        largest = max(largest, stats["journal_bytes"])

    def compacted() -> bool:  # 10,000 cycles wrote some 2 MB; what is live stays about 60 KB, and so does the
        # journal once the background has caught up (on a loaded machine it may still be behind when the work ends)
        stats = f.stats()
        assert stats["maintenance_error"] is None, stats
        return (stats["compactions"] >= 2 and stats["maintenance_running"] is None
                and stats["journal_bytes"] < 4 * stats["live_bytes"] + FAST["compact_min_bytes"])

    _wait_for(compacted, "two compactions and a journal the size of what is live", 120.0)
    stats = f.stats()
    assert stats["checkpoints"] >= stats["compactions"] >= 2, stats
    scan = read_state(os.path.join(job, "requests.urls"), salt=dir_salt(job), sizes=True)
    assert (scan.live_bytes, scan.pushes, scan.dones) == (f._state.live_bytes, f._state.pushes, f._state.dones)
    inflight = {r.url for r in work.inflight}
    f.close()
    assert _pending_urls(job) == work.expected | inflight
    assert not [n for n in os.listdir(job) if ".compact" in n or ".map." in n or ".old." in n]


def test_a_compaction_swapped_in_with_requests_in_flight_finishes_them_where_they_went(tmp_path):
    job = tmp_path / "job"
    with Frontier(job, maintenance=Maintenance(**FAST)) as f:
        work = Steady(f, 300)
        work.run(3000)
        held = [take(f) for _ in range(20)]
        offsets = [r._seq for r in held]
        f.compact()
        assert [r._seq for r in held] != offsets  # they moved: the journal was rewritten
        for request in held[:10]:
            f.done(request)
            work.expected.discard(request.url)
        for request in held[10:15]:
            f.retry(request)
        for request in held[15:]:
            f.fail(request, "gone")
            work.expected.discard(request.url)
        failed = sorted(r.url for r in held[15:])
        inflight = {r.url for r in work.inflight}
    assert _pending_urls(job) == work.expected | inflight
    with Frontier(job, watch=False, maintenance=None) as f:
        assert sorted(e.request.url for e in f.failed()) == failed


@pytest.mark.parametrize("order", ["lifo", "fifo"])
def test_a_close_after_a_compaction_with_requests_in_flight_keeps_the_queue_order(tmp_path, order):
    """The compacted queues hold what was in flight, skipped; the close drops those entries and keeps the rest
    in the order they had (a LIFO queue came back reversed once), and what was in flight goes after them."""
    job = tmp_path / "job"
    urls = [f"https://h{i % 3}.example/{i}" for i in range(12)]
    with Frontier(job, order=order, maintenance=None) as f:
        f.push_many(Request(u) for u in urls[:6])
        held = [take(f) for _ in range(2)]
        f.push_many(Request(u) for u in urls[6:])
        f.compact()
    with Frontier(job, order=order, maintenance=None) as f:
        got = [take(f).url for _ in range(len(urls))]
        assert f.pop() is None
    popped = {r.url for r in held}
    rest = [u for u in urls if u not in popped]
    given_back = [r.url for r in held]
    if order == "lifo":
        assert got == [*reversed(given_back), *reversed(rest)]
    else:
        assert got == [*rest, *given_back]


def test_a_kill_after_a_checkpoint_reads_only_the_journal_after_it(tmp_path):
    job = tmp_path / "job"
    f = Frontier(job, maintenance=Maintenance(checkpoint_records=None, checkpoint_seconds=None, compact_share=None))
    work = Steady(f, 500)
    work.run(2000)
    f.checkpoint()
    named = f._state.states[0]
    work.run(100)
    inflight = {r.url for r in work.inflight}
    f._closing.release_files()  # as a kill leaves it: no close, no checkpoint beyond the last
    f._lock.release()
    assert f._watcher is not None
    f._watcher.stop()
    with Frontier(job, watch=False, maintenance=None) as g:
        assert g.recovery == "rebuilt" and g.stats()["recovered_from"] == named.at > 0
        assert len(g) == len(work.expected | inflight)
    assert _pending_urls(job) == work.expected | inflight


def test_a_killed_maintenance_process_is_abandoned_and_the_frontier_goes_on(tmp_path):
    job = tmp_path / "job"
    settings = Maintenance(checkpoint_records=None, checkpoint_seconds=None, compact_share=0.2,
                           compact_min_bytes=1 << 10)
    f = Frontier(job, maintenance=settings)
    work = Steady(f, 20000)  # enough for a job to take a while
    deadline = time.monotonic() + 120
    while f.stats()["maintenance_error"] is None:  # a job that ended before the kill landed: the next one
        assert time.monotonic() < deadline, "no job of the background could be killed while it ran"
        work.run(500)
        pending = f._upkeep.job
        if pending is not None and pending.job is not None and pending.job.pid is not None:
            os.kill(pending.job.pid, signal.SIGKILL)
            _wait_for(lambda job=pending: f._upkeep.job is not job, "the killed job to be collected")
    assert "status -9" in f.stats()["maintenance_error"]
    work.run(500)  # it goes on
    inflight = {r.url for r in work.inflight}
    f._upkeep.stop()
    f.close()
    assert not [n for n in os.listdir(job) if ".compact" in n or ".map." in n]
    assert _pending_urls(job) == work.expected | inflight


def test_ctrl_c_in_a_compaction_leaves_the_frontier_as_it_was(tmp_path):
    job = tmp_path / "job"
    with Frontier(job, maintenance=None) as f:
        work = Steady(f, 200)
        work.run(4000)

        def interrupt(done, total):
            if done > total // 3:
                raise KeyboardInterrupt

        before = f.stats()["journal_bytes"]
        with pytest.raises(KeyboardInterrupt):
            f.compact(interrupt)
        assert f.stats()["journal_bytes"] == before
        assert not [n for n in os.listdir(job) if ".compact" in n or n.startswith("requests.state.")]
        work.run(100)
        inflight = {r.url for r in work.inflight}
    assert _pending_urls(job) == work.expected | inflight


@pytest.mark.parametrize("where", ["the job's writes", "the swap's copy of the tail"])
def test_an_io_error_in_a_compaction_abandons_it_and_the_frontier_goes_on(tmp_path, monkeypatch, where, caplog):
    job = tmp_path / "job"
    f = Frontier(job, maintenance=Maintenance(**FAST, runner="thread"))
    work = Steady(f, 300)
    work.run(1000)
    module = compaction_module if where == "the job's writes" else tailcopy_module

    def failing(fd, data):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(module, "write_all", failing)
    work.run(2000)
    _wait_for(lambda: f.stats()["maintenance_error"] is not None, "the failed compaction")
    assert "Input/output error" in f.stats()["maintenance_error"]
    assert "compaction was abandoned" in caplog.text
    monkeypatch.undo()
    work.run(500)
    assert f.push(Request("https://z.example/after"))
    work.expected.add("https://z.example/after")
    inflight = {r.url for r in work.inflight}
    f.close()
    assert _pending_urls(job) == work.expected | inflight


def test_a_full_disk_abandons_a_compaction_and_the_frontier_goes_on(small_disk, caplog):
    job = os.path.join(small_disk, "job")
    settings = Maintenance(checkpoint_records=None, checkpoint_seconds=None, compact_share=0.5,
                           compact_min_bytes=8 << 10, runner="thread")
    f = Frontier(job, maintenance=settings)
    work = Steady(f, 500)
    while f.stats()["journal_bytes"] < 1.7 * f.stats()["live_bytes"]:
        work.run(20)
    assert f.stats()["compactions"] == 0
    # room for the crawl's own appends, not for a compacted journal beside the old one
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    filler = os.path.join(small_disk, "filler")
    with open(filler, "wb") as out:
        out.write(b"\0" * max(0, free - 2 * f.stats()["live_bytes"] // 3))
    def failed() -> bool:
        work.run(5)
        return f.stats()["maintenance_error"] is not None

    _wait_for(failed, "the compaction to fail")
    error = f.stats()["maintenance_error"]
    assert error.startswith("compact:") and "No space left on device" in error, error
    assert f.stats()["compactions"] == 0
    os.unlink(filler)
    def compacted() -> bool:
        work.run(5)
        return f.stats()["compactions"] > 0

    _wait_for(compacted, "a compaction once there is room")
    inflight = {r.url for r in work.inflight}
    f.close()
    assert not [n for n in os.listdir(job) if ".compact" in n or ".map." in n]
    assert _pending_urls(job) == work.expected | inflight


def test_inbox_commands_applied_during_a_compaction_hold_after_its_swap(tmp_path, monkeypatch):
    """A push and a drop sent through the inbox land while the background copies the journal: the swap
    carries their records over, each is applied once, and the reopened directory agrees."""
    job = tmp_path / "job"
    f = Frontier(job, maintenance=Maintenance(**FAST, runner="thread"))
    work = Steady(f, 300)
    work.run(1000)
    copying, release = threading.Event(), threading.Event()
    real_write = compaction_module.write_all

    def slow_write(fd, data):
        copying.set()
        assert release.wait(60), "the test never let the compaction go on"
        return real_write(fd, data)

    monkeypatch.setattr(compaction_module, "write_all", slow_write)
    before = f.stats()["compactions"]
    def copying_started() -> bool:
        work.run(20)
        return copying.is_set()

    _wait_for(copying_started, "a compaction to start copying")
    pushed = [f"https://inbox.example/{i}" for i in range(5)]
    ident_push = inbox.send(str(job), "push", {"urls": pushed})
    ident_drop = inbox.send(str(job), "drop", {"host": "h3.example"})
    answers: dict[str, dict] = {}

    def answered() -> bool:
        for ident in (ident_push, ident_drop):
            if ident not in answers and (answer := inbox.answer_of(str(job), ident)) is not None:
                answers[ident] = answer  # read once: reading an answer removes it
        return len(answers) == 2

    _wait_for(answered, "the commands' answers")
    answer_push, answer_drop = answers[ident_push], answers[ident_drop]
    assert answer_push["queued"] == 5, answer_push
    assert answer_drop["dropped"] > 0, answer_drop
    assert f.stats()["compactions"] == before, "the commands landed after the compaction, not during it"
    release.set()
    _wait_for(lambda: f.stats()["compactions"] > before, "the compaction's swap")
    assert f.stats()["maintenance_error"] is None
    dropped = {url for url in work.expected if url.startswith("https://h3.example/")}
    work.expected -= dropped
    work.expected.update(pushed)
    inflight = {r.url for r in work.inflight}
    monkeypatch.undo()
    f.close()
    survivors = _pending_urls(job)
    assert survivors == (work.expected | inflight) - (dropped - inflight)
    assert not survivors & (dropped - inflight), "a dropped request came back after the swap"


def test_maintenance_settings_are_checked():
    with pytest.raises(ValueError, match="compact_share"):
        Maintenance(compact_share=1.5)
    with pytest.raises(ValueError, match="checkpoint_records"):
        Maintenance(checkpoint_records=0)
    with pytest.raises(ValueError, match="runner"):
        Maintenance(runner="fork")
    with pytest.raises(TypeError, match="maintenance"):
        Frontier("/nonexistent-never-made", maintenance={"compact_share": 0.5})  # type: ignore[arg-type]
