"""Behaviour of the Frontier, run twice: straight through, and with a close/reopen between steps."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections import OrderedDict

import pytest
from popkit import take

from diskfrontier import Frontier, FrontierClosed, JobDirLocked, NotInFlight, Request


class Session:
    """Opens the frontier; with reopen=True every step() closes and reopens it."""

    def __init__(self, path, reopen: bool, **kwargs):
        self.path, self.reopen, self.kwargs = path, reopen, kwargs
        self.frontier = Frontier(path, **kwargs)

    def step(self) -> Frontier:
        if self.reopen:
            self.frontier.close()
            self.frontier = Frontier(self.path)
        return self.frontier

    def close(self):
        self.frontier.close()


@pytest.fixture(params=[False, True], ids=["same-run", "reopen"])
def session(request, tmp_path):
    s = Session(tmp_path / "job", request.param)
    yield s
    s.close()


def drain(frontier):
    out = []
    while (r := frontier.pop()) is not None:
        out.append(r)
        frontier.done(r)
    return out


def test_push_dedupes_and_dont_filter_bypasses(session):
    f = session.frontier
    assert f.push(Request("https://a.example/")) is True
    f = session.step()
    assert f.push(Request("https://a.example/")) is False
    assert f.push(Request("https://a.example/#frag")) is False  # same canonical URL
    assert f.push(Request("https://a.example/", dont_filter=True)) is True
    f = session.step()
    assert len(f) == 2
    assert f.stats()["duplicates"] >= (0 if session.reopen else 2)


def test_priority_then_lifo_order(session):
    f = session.frontier
    for i in range(6):
        f.push(Request(f"https://a.example/{i}", priority=i % 3))
    f = session.step()
    assert [r.url[-1] for r in drain(f)] == ["5", "2", "4", "1", "3", "0"]


def test_fifo_order(tmp_path):
    with Frontier(tmp_path / "j", order="fifo") as f:
        f.push_many(Request(f"https://a.example/{i}", priority=-(i % 2)) for i in range(6))
    with Frontier(tmp_path / "j") as f:
        assert f.order == "fifo"
        assert [r.url[-1] for r in drain(f)] == ["0", "2", "4", "1", "3", "5"]
    with pytest.raises(ValueError, match="created with order='fifo'"):
        Frontier(tmp_path / "j", order="lifo")


def test_done_is_final_and_in_flight_comes_back(session):
    f = session.frontier
    f.push_many([Request("https://a.example/1"), Request("https://a.example/2")])
    first = f.pop()
    f.done(first)
    with pytest.raises(NotInFlight):
        f.done(first)
    second = f.pop()
    assert f.pop() is None and len(f) == 0
    assert f.stats()["in_flight"] == 1
    f.close()
    with Frontier(session.path) as f2:  # closed with one in flight: it is back
        back = drain(f2)
    assert [r.url for r in back] == [second.url]
    session.frontier = Frontier(session.path)


def test_request_round_trips(session):
    f = session.frontier
    original = Request("https://a.example/api", method="POST", headers={"X": ["1", b"2"]}, body=b"\x00x",
                       priority=-3, meta={"depth": 2, "tags": ["a"], "raw": b"\xff", "jar": ("a", 1),
                                         "nested": [(1, {2, 3}), frozenset({b"x"})], "ordered": OrderedDict(b=1)})
    f.push(original)
    f = session.step()
    got = f.pop()
    assert got == original
    assert type(got.meta["jar"]) is tuple and type(got.meta["nested"][0][1]) is set  # not lists
    assert got.fingerprint == original.fingerprint


def test_unencodable_meta_goes_to_memory_in_priority_order(session, caplog):
    f = session.frontier
    caplog.set_level(logging.WARNING, logger="diskfrontier")
    f.push(Request("https://a.example/low", priority=0))
    assert f.push(Request("https://a.example/obj", priority=5, meta={"x": object()})) is True
    f.push(Request("https://a.example/high", priority=9))
    f.push(Request("https://a.example/obj2", priority=1, meta={"c": 1j}))
    assert sum("cannot be stored on disk" in r.message for r in caplog.records) == 1
    assert f.stats()["unserializable"] == 2 and f.stats()["memory_only"] == 2
    assert [r.url.rsplit("/", 1)[1] for r in drain(f)] == ["high", "obj", "obj2", "low"]


def test_memory_only_push_is_served_in_order_and_not_logged(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="diskfrontier")
    with Frontier(tmp_path / "j") as f:
        f.push(Request("https://a.example/disk", priority=1))
        assert f.push(Request("https://a.example/mem", priority=2), memory_only=True) is True
        assert f.push(Request("https://a.example/mem"), memory_only=True) is False  # dedupe still applies
        assert f.has_seen(Request("https://a.example/mem").fingerprint)
        assert [r.url for r in drain(f)] == ["https://a.example/mem", "https://a.example/disk"]
    assert not [r for r in caplog.records if "cannot be stored" in r.message]
    with Frontier(tmp_path / "j") as f:
        assert not f.has_seen(Request("https://a.example/mem").fingerprint)
        assert f.has_seen(Request("https://a.example/disk").fingerprint)


def test_memory_only_requests_are_reported_lost_and_not_marked_seen(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="diskfrontier")
    f = Frontier(tmp_path / "j")
    f.push(Request("https://a.example/obj", meta={"x": object()}))
    f.close()
    assert f.stats()["memory_lost"] == 1
    assert any("lost at close" in r.message for r in caplog.records)
    with Frontier(tmp_path / "j") as f:
        assert len(f) == 0
        assert f.push(Request("https://a.example/obj")) is True  # not blocked by a lost request


def test_closed_frontier_refuses_use(tmp_path):
    f = Frontier(tmp_path / "j")
    f.close()
    f.close()  # idempotent
    with pytest.raises(FrontierClosed, match="closed"):
        f.push(Request("https://a.example/"))


def test_compact_keeps_pending_and_dedupe(session):
    f = session.frontier
    f.push_many(Request(f"https://a.example/{i}") for i in range(300))
    for _ in range(250):
        f.done(f.pop())
    f = session.step()
    before = f.stats()["journal_bytes"]
    result = f.compact()
    assert result.bytes_after < before
    f = session.step()
    assert len(f) == 50
    assert f.push(Request("https://a.example/3")) is False
    assert sorted(int(r.url.rsplit("/", 1)[1]) for r in drain(f)) == list(range(50))


def test_compact_with_requests_in_flight_keeps_them_in_flight(tmp_path):
    with Frontier(tmp_path / "j", watch=False, maintenance=None) as f:
        f.push_many(Request(f"https://a.example/{i}") for i in range(6))
        held = [take(f) for _ in range(4)]
        f.done(held.pop(0))
        before = f.stats()["journal_bytes"]
        result = f.compact()
        assert result.bytes_after < before and result.pending == 5
        f.done(held[0])  # finished by a record naming its new place
        f.retry(held[1])
        f.fail(held[2], "boom")
        assert [r.url for r in (take(f), take(f), take(f))] == ["https://a.example/3", "https://a.example/1",
                                                                 "https://a.example/0"]  # the retried one first
        assert f.pop() is None and [e.request.url for e in f.failed()] == ["https://a.example/2"]
    with Frontier(tmp_path / "j", watch=False, maintenance=None) as f:
        assert sorted(r.url for r in (take(f), take(f), take(f))) == [f"https://a.example/{i}" for i in (0, 1, 3)]
        assert f.pop() is None and [e.request.url for e in f.failed()] == ["https://a.example/2"]


def test_one_writer_second_open_fails_naming_pid(tmp_path):
    path = tmp_path / "j"
    with Frontier(path), pytest.raises(JobDirLocked, match=f"held by pid {os.getpid()}"):
        Frontier(path)


def test_one_writer_across_processes(tmp_path):
    path = tmp_path / "j"
    code = ("import sys,time; from diskfrontier import Frontier; f=Frontier(sys.argv[1]); "
            "print('ok', flush=True); time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE)
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == b"ok"
        with pytest.raises(JobDirLocked) as info:
            Frontier(path)
        assert info.value.pid == child.pid
        assert f"pid {child.pid}" in str(info.value)
    finally:
        child.kill()
        child.wait()
    with Frontier(path) as f:  # the kernel released the lock with the killed holder
        assert len(f) == 0


def test_stats_counts(tmp_path):
    with Frontier(tmp_path / "j") as f:
        f.push_many([Request("https://a.example/1", priority=2), Request("https://a.example/1"), Request("https://a.example/2")])
        f.done(take(f))
        s = f.stats()
    assert (s["pushed"], s["duplicates"], s["popped"], s["done"], s["pending"]) == (2, 1, 1, 1, 1)
    assert s["pending_by_priority"] == {0: 1}


@pytest.mark.parametrize("limit", [10_000, 10_000_000])
def test_close_compacts_only_a_journal_that_is_quick_to_compact(tmp_path, monkeypatch, caplog, limit):
    import diskfrontier.jobdir.closing as closing_module

    monkeypatch.setattr(closing_module, "AUTO_COMPACT_MIN_BYTES", 1_000)
    monkeypatch.setattr(closing_module, "AUTO_COMPACT_MAX_BYTES", limit)
    caplog.set_level("INFO", logger="diskfrontier")
    job = tmp_path / "job"
    with Frontier(job) as f:
        f.push_many(Request(f"https://a.example/{i}") for i in range(500))
        for _ in range(450):
            f.done(take(f))
        before = f.stats()["journal_bytes"]
    after = os.path.getsize(job / "requests.urls")
    if limit < before:
        assert after == before  # left alone, and said so
        assert any("diskfrontier compact" in r.getMessage() for r in caplog.records)
    else:
        assert after < before // 5
    with Frontier(job) as f:
        assert len(f) == 50


def test_done_with_a_stale_request_after_a_compaction_is_refused(tmp_path):
    with Frontier(tmp_path / "job", order="fifo") as f:
        f.push_many(Request(f"https://a.example/{i}") for i in range(3))
        first = f.pop()
        assert first is not None
        f.done(first)
        f.compact()  # offsets are reused: a later request may sit where the first one was
        second = f.pop()
        assert second is not None
        first._seq = second._seq  # make it so: the stale object names a live offset
        with pytest.raises(NotInFlight):
            f.done(first)
        assert [r.url for r in f.in_flight] == [second.url]


def test_a_compact_progress_callback_may_read_and_change_the_frontier(tmp_path):
    f = Frontier(tmp_path / "job")
    f.push_many(Request(f"https://a.example/{i}") for i in range(10))
    seen: list[str] = []

    def progress(done, total):
        seen.append(f"{f!r} {len(f)}")
        f.push(Request(f"https://b.example/{len(seen)}"))  # written while the compaction runs: kept

    f.compact(progress)
    assert seen and seen[0].endswith(" 10")
    assert len(f) == 10 + len(seen)
    f.close()
    with Frontier(tmp_path / "job") as f:
        assert len(f) == 10 + len(seen)
