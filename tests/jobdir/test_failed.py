"""Failed requests: ``fail``, ``failed``, ``requeue_failed`` and ``holds``; the FAIL record through a
clean close, SIGKILLs, compaction, verify and repair; the ``failed`` and ``requeue-failed`` commands."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace

import msgpack
import pytest
from click.testing import CliRunner
from crashkit import kill_after_acks
from jobkit import dir_id, dir_salt
from paths import KITS
from popkit import take

from diskfrontier import FailedRequest, Frontier, JobDirCorrupt, NotInFlight, Request
from diskfrontier.cli import main
from diskfrontier.jobdir import checkpoint as checkpoint_module
from diskfrontier.jobdir.hostfile import HOSTS_MAGIC, HostFileRecord, load_host_state, save_host_state
from diskfrontier.jobdir.journal import MAX_ERROR, RETRY, done_body, fail_body, frame, parse_push, push_body
from diskfrontier.jobdir.layout import Layout
from diskfrontier.jobdir.maintenance.verify import verify
from diskfrontier.jobdir.opening import Opening
from diskfrontier.jobdir.reader import failed_requests, inspect_jobdir, pending_requests

CHILD = os.path.join(KITS, "failed_child.py")
SCRIPT = [os.path.join(os.path.dirname(sys.executable), "diskfrontier")]  # the installed console script
HOSTS = ["h0.example", "h1.example", "h2.example"]


def listing(failed: Iterable[FailedRequest]) -> list[tuple[str, int, str, float]]:
    """What a failed list says, comparable across the ways of reading it."""
    return [(f.request.url, f.request.attempts, f.error, f.failed_at) for f in failed]


def cap(error: str) -> str:
    return error.encode()[:MAX_ERROR].decode("utf-8", "ignore")


def host_done(frontier: Frontier) -> dict[str, int]:
    return {info.host: info.done for info in frontier.hosts()}


def failing_crawl(job: str) -> list[tuple[str, int, str, float]]:
    """A crawl with done, retried, failed (one after two retries) and pending requests; returns failed()."""
    with Frontier(job) as f:
        f.push_many(Request(f"https://{HOSTS[i % 3]}/{i}") for i in range(30))
        for i in range(12):
            request = f.pop()
            assert request is not None
            if i % 3 == 0:
                f.done(request)
            elif i % 3 == 1:
                f.fail(request, f"error {i}: " + "ü" * (i * 300))
            else:
                f.retry(request)
        twice = f.pop()  # the last one retried: its RETRY record is the newest (LIFO)
        assert twice is not None
        f.retry(twice)
        twice = f.pop()
        assert twice is not None
        assert twice.attempts == 2
        f.fail(twice, "gave up")
        return listing(f.failed())


# ------------------------------------------------------------------ the API
def test_fail_finishes_a_request_and_failed_lists_it_oldest_first(tmp_path):
    with Frontier(tmp_path / "job") as f:
        f.push_many([Request("https://a.example/1"), Request("https://a.example/2"), Request("https://b.example/3")])
        first, second, third = take(f), take(f), take(f)
        before = time.time()
        f.fail(second, "HTTP 500")
        f.fail(first, "timeout")
        assert [x.request.url for x in f.failed()] == [second.url, first.url]  # oldest failure first
        assert [x.error for x in f.failed()] == ["HTTP 500", "timeout"]
        assert all(before <= x.failed_at <= time.time() for x in f.failed())
        assert len(f) == 0 and not f.finished  # one is still in flight
        assert f.stats()["failed"] == 2 and f.stats()["done"] == 0
        done = {"a.example": 0, "b.example": 0}
        for request in (first, second):
            done[request.slot] += 1  # a failure is finished: counted in its host's done
        assert host_done(f) == done
        f.done(third)
        assert f.finished and f.pop() is None and f.pop(timeout=None) is None  # failed ones are not pending
        with pytest.raises(NotInFlight):
            f.done(first)
        with pytest.raises(NotInFlight):
            f.fail(first, "again")
        listed = f.failed()[0]
        assert isinstance(listed, FailedRequest) and listed.request.not_before is None
        with pytest.raises(NotInFlight):
            f.done(listed.request)  # a listed request is not in flight


def test_fail_keeps_attempts_and_cuts_the_error_on_a_character_boundary(tmp_path):
    with Frontier(tmp_path / "job") as f:
        f.push_many([Request("https://a.example/1"), Request("https://a.example/2"), Request("https://a.example/3")])
        request = f.pop()
        assert request is not None
        for _ in range(2):
            f.retry(request)
            request = next(r for r in iter(f.pop, None) if r.url == request.url)
        assert request.attempts == 2
        long_error = "ab" + "€" * 2000  # 6,002 bytes; 4,000 would cut a euro sign in two
        f.fail(request, long_error)
        other = f.pop()
        assert other is not None
        f.fail(other, "\ud800 lone surrogate")
        with pytest.raises(TypeError):
            f.fail(f.pop(), b"bytes")  # type: ignore[arg-type]
        failed = f.failed()
        assert failed[0].request.attempts == 2 and failed[1].request.attempts == 0
        assert failed[0].error == "ab" + "€" * 1332 and len(failed[0].error.encode()) == 3998
        assert failed[1].error == "? lone surrogate"
        assert f.stats()["failed"] == 2 and len(f.in_flight) == 1  # the TypeError left it in flight


def test_fail_refuses_what_is_not_in_flight(tmp_path):
    with Frontier(tmp_path / "job") as f:
        f.push(Request("https://a.example/1"))
        with pytest.raises(NotInFlight):
            f.fail(Request("https://a.example/1"), "never popped")
        request = take(f)
        assert request is not None
        with pytest.raises(NotInFlight):
            f.fail(Request("https://a.example/1"), "an equal object, not the one pop returned")
        size = f.stats()["journal_bytes"]
        f.fail(request, "x")
        assert f.stats()["journal_bytes"] > size
        size = f.stats()["journal_bytes"]
        with pytest.raises(NotInFlight):
            f.fail(request, "twice")
        assert f.stats()["journal_bytes"] == size and f.stats()["failed"] == 1


def test_requeue_failed_makes_them_pending_again_oldest_first(tmp_path):
    job = str(tmp_path / "job")
    with Frontier(job, order="fifo") as f:
        f.push_many(Request(f"https://a.example/{i}", priority=i) for i in range(4))
        popped = [take(f) for _ in range(4)]  # priorities 3, 2, 1, 0
        f.retry(popped[0])
        again = f.pop()
        assert again is not None
        assert again.attempts == 1
        for request in (popped[2], again, popped[1]):
            f.fail(request, f"failed {request.url}")
        with pytest.raises(ValueError):
            f.requeue_failed(0)
        assert f.requeue_failed(limit=1) == 1  # the oldest: a.example/1
        assert [x.request.url for x in f.failed()] == ["https://a.example/3", "https://a.example/2"]
        assert len(f) == 1 and f.stats()["failed"] == 2
        back = f.pop()
        assert back is not None
        assert (back.url, back.attempts, back.priority) == ("https://a.example/1", 0, 1)
        f.done(back)
        assert f.requeue_failed() == 2 and f.failed() == [] and len(f) == 2
        assert f.requeue_failed() == 0
        requeued = [take(f), take(f)]
        assert [(r.url, r.attempts) for r in requeued] == [("https://a.example/3", 0), ("https://a.example/2", 0)]
        f.fail(requeued[0], "failed again")  # a requeued request may fail again
        f.done(requeued[1])
        f.done(popped[3])
        assert [x.error for x in f.failed()] == ["failed again"] and f.finished
        # a failure stays counted in its host's done; a requeued request finished again counts again
        assert host_done(f) == {"a.example": 7}
    with Frontier(job) as f:
        assert f.recovery == "clean" and [x.error for x in f.failed()] == ["failed again"]
        assert host_done(f) == {"a.example": 7}


def test_a_memory_only_request_that_fails_is_dropped_and_counted(tmp_path):
    with Frontier(tmp_path / "job") as f:
        f.push(Request("https://a.example/memory"), memory_only=True)
        request = f.pop()
        assert request is not None
        size = f.stats()["journal_bytes"]
        assert f.holds(request)
        f.fail(request, "gone")
        assert f.stats()["journal_bytes"] == size  # no record
        assert f.stats()["failed"] == 1 and f.failed() == [] and f.finished and not f.holds(request)
        assert f.stats()["memory_only"] == 0 and host_done(f).get("a.example", 0) == 0
        with pytest.raises(NotInFlight):
            f.fail(request, "twice")


def test_holds_is_true_only_for_the_in_flight_object(tmp_path):
    f = Frontier(tmp_path / "job")
    f.push_many([Request("https://a.example/1"), Request("https://a.example/2")])
    request = f.pop()
    assert request is not None
    assert f.holds(request) and not f.holds(Request(request.url)) and not f.holds(object())  # type: ignore[arg-type]
    f.done(request)
    assert not f.holds(request)
    other = f.pop()
    assert other is not None
    f.retry(other)
    assert not f.holds(other)
    third = f.pop()
    assert third is not None
    assert f.holds(third)
    f.close()
    assert not f.holds(third)  # put back at the close


def test_threads_fail_and_requeue_at_once(tmp_path):
    job = str(tmp_path / "job")
    with Frontier(job) as f:
        f.push_many(Request(f"https://h{i % 5}.example/{i}") for i in range(400))

        def worker(n: int) -> None:
            rng = random.Random(n)
            while (request := f.pop()) is not None:
                if rng.random() < 0.5:
                    f.fail(request, f"worker {n}")
                else:
                    f.done(request)
                if rng.random() < 0.05:
                    f.requeue_failed(1)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        failed = listing(f.failed())
        assert f.finished and len(failed) == f.stats()["failed"] > 100
        assert len({url for url, *_ in failed}) == len(failed)
    with Frontier(job) as f:
        assert listing(f.failed()) == failed


# ------------------------------------------------------------------ persistence
def test_failed_survive_a_clean_close_without_a_scan(tmp_path, monkeypatch):
    job = str(tmp_path / "job")
    expected = failing_crawl(job)
    assert len(expected) == 5 and expected[-1][1:3] == (2, "gave up")
    assert expected[3][2] == cap("error 10: " + "ü" * 3000) and len(expected[3][2].encode()) == MAX_ERROR
    with monkeypatch.context() as patch:
        patch.setattr(Opening, "rebuild", lambda *a: pytest.fail("a clean open read the journal"))
        with Frontier(job) as f:
            assert f.recovery == "clean" and listing(f.failed()) == expected
            assert f.stats()["failed"] == 5 and len(f) == 30 - 4 - 5
    assert listing(failed_requests(job)) == expected


def test_a_hosts_file_written_before_fail_records_existed_loads_with_no_failures(tmp_path):
    path = str(tmp_path / "requests.hosts")
    head = msgpack.packb({"hosts": 1, "names": 9, "delayed": 0, "settings": []}, use_bin_type=True)
    data = (HOSTS_MAGIC + len(head).to_bytes(4, "little") + head + b"a.example" + (9).to_bytes(8, "little")
            + (2).to_bytes(4, "little") + (5).to_bytes(8, "little"))
    with open(path, "wb") as out:
        out.write(data)
    state = load_host_state(path, HostFileRecord(len(data), zlib.crc32(data)))
    assert state.failed == {} and state.counts.done[0] == 5 and state.counts.name(0) == "a.example"


def test_failed_survive_a_sigkill(tmp_path):
    job = str(tmp_path / "job")
    code = """if True:
        import os, signal, sys
        from diskfrontier import Frontier, Request
        f = Frontier(sys.argv[1])
        f.push_many(Request(f"https://h{i % 3}.example/{i}") for i in range(10))
        popped = [f.pop() for _ in range(7)]
        f.retry(popped[0])
        f.done(popped[1])
        for n, request in enumerate(popped[2:5]):
            f.fail(request, f"error {n} " + "é" * (n * 1500))
        f.requeue_failed(1)
        again = f.pop()
        f.fail(again, "failed twice")
        print(" ".join(f"{x.request.url}|{x.request.attempts}|{x.failed_at!r}" for x in f.failed()), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """
    child = subprocess.run([sys.executable, "-c", code, job], capture_output=True, text=True, timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr
    told = [entry.split("|") for entry in child.stdout.split()]
    scanned = listing(failed_requests(job))  # read-only, from the journal of the killed crawl
    assert [(url, int(attempts), float(at)) for url, attempts, at in told] == [(u, a, t) for u, a, _e, t in scanned]
    assert [error for *_, error, _ in scanned] == ["error 1 " + "é" * 1500, cap("error 2 " + "é" * 3000),
                                                  "failed twice"]
    with Frontier(job) as f:
        assert f.recovery == "rebuilt" and listing(f.failed()) == scanned
        assert f.stats()["failed"] == 3 and len(f) == 10 - 1 - 3  # the retried one and two in flight come back
        assert sum(host_done(f).values()) == 1 + 4  # a done and four failures (one of them requeued)
    assert verify(job).sound and listing(failed_requests(job)) == scanned


@dataclass
class Model:
    """What the acknowledged calls promise."""

    pending: dict[str, int] = field(default_factory=dict)  # url -> attempts (in flight included)
    failed: list[tuple[str, int, str]] = field(default_factory=list)  # (url, attempts, error), oldest first
    done: dict[str, int] = field(default_factory=lambda: dict.fromkeys(HOSTS, 0))

    def copy(self) -> Model:
        return Model(dict(self.pending), list(self.failed), dict(self.done))

    def apply(self, op: dict, count: int | None = None) -> None:
        kind = op["op"]
        if kind == "push":
            self.pending[op["url"]] = 0
        elif kind == "done":
            del self.pending[op["url"]]
            self.done[op["url"].split("/")[2]] += 1
        elif kind == "retry":
            self.pending[op["url"]] = op["attempts"] + 1
        elif kind == "fail":
            del self.pending[op["url"]]
            self.failed.append((op["url"], op["attempts"], cap(op["error"])))
            self.done[op["url"].split("/")[2]] += 1
        elif kind == "requeue":
            taken = op["count"] if count is None else count
            for url, _attempts, _error in self.failed[:taken]:
                self.pending[url] = 0
            del self.failed[:taken]


def run_child(job: str, seed: int, round_no: int, acks: int) -> tuple[list[dict], dict | None]:
    """Run the child until it has confirmed ``acks`` calls and SIGKILL it."""
    return kill_after_acks([CHILD, job, str(seed), str(round_no)], acks)


def observed(job: str) -> Model:
    """The state a recovered directory shows; every way of reading its failed requests must agree."""
    scanned = listing(failed_requests(job))
    seen = Model()
    with Frontier(job) as f:
        assert f.recovery in ("rebuilt", "clean")
        opened = listing(f.failed())
        seen.done.update(host_done(f))
        assert f.stats()["failed"] == len(opened)
    assert opened == scanned == listing(failed_requests(job))  # the scan, the open and the clean close
    seen.failed = [(url, attempts, error) for url, attempts, error, _at in opened]
    seen.pending = {r.url: r.attempts for r in pending_requests(job)}
    assert verify(job).sound
    return seen


@pytest.mark.parametrize("run", range(7))
def test_kill_at_random_points_keeps_what_was_acknowledged(tmp_path, run):
    rng = random.Random(run)
    job = str(tmp_path / "job")
    model = Model()
    for round_no in range(2):
        acked, begun = run_child(job, run, round_no, rng.randrange(20, 160))
        for op in acked:
            model.apply(op)
        seen = observed(job)
        candidates = [model]
        if begun is not None and begun["op"] == "requeue":  # it may have landed for a part of them
            most = len(model.failed) if begun["limit"] is None else min(begun["limit"], len(model.failed))
            for count in range(1, most + 1):
                landed = model.copy()
                landed.apply(begun, count)
                candidates.append(landed)
        elif begun is not None:
            landed = model.copy()
            landed.apply(begun)
            candidates.append(landed)
        assert seen in candidates, (begun, model, seen)
        model = seen


# ------------------------------------------------------------------ compaction
def test_compaction_keeps_failed_requests_and_done_counts(tmp_path):
    job = str(tmp_path / "job")
    with Frontier(job) as f:
        f.push_many(Request(f"https://{HOSTS[i % 3]}/{i}", priority=i % 2) for i in range(40))
        popped = [take(f) for _ in range(40)]
        for i, request in enumerate(popped):
            if i % 4 == 0:
                f.fail(request, f"error {i}")
            elif i % 4 == 1:
                f.retry(request)
            else:
                f.done(request)
        retried = [take(f) for _ in range(10)]
        assert all(r.attempts == 1 for r in retried)
        for request in retried[:3]:
            f.fail(request, f"after a retry {request.url}")  # a RETRY record that failed: carried as a PUSH
        for request in retried[3:6]:
            f.done(request)
        f.set_done_count("h2.example", 0)  # a host with failures but a done count of 0
        f.requeue_failed(2)
    pending = sorted((r.url, r.attempts) for r in pending_requests(job))
    with Frontier(job) as f:
        expected, done = listing(f.failed()), host_done(f)
        assert len(expected) == 10 + 3 - 2 and [a for _, a, *_ in expected].count(1) == 3
        assert done["h2.example"] == 0
        before = f.stats()["journal_bytes"]
        result = f.compact()
        assert result.bytes_after < before and result.failed == len(expected)
        assert listing(f.failed()) == expected and host_done(f) == done and len(f) == len(pending)
        f.push(Request("https://h2.example/after", priority=5))
        f.fail(take(f), "after compaction")
        expected, done = listing(f.failed()), host_done(f)
        assert done["h2.example"] == 1
    with Frontier(job) as f:  # clean
        assert f.recovery == "clean" and listing(f.failed()) == expected and host_done(f) == done
    assert inspect_jobdir(job).failed == len(expected)
    checkpoint_module.write_open(Layout(job).cursor, dir_id(job), 0, None)  # as if killed: rebuilt from the journal
    assert listing(failed_requests(job)) == expected
    with Frontier(job) as f:
        assert f.recovery == "rebuilt" and listing(f.failed()) == expected and host_done(f) == done
    assert sorted((r.url, r.attempts) for r in pending_requests(job)) == pending
    assert verify(job).sound


COMPACT = ("import sys; from diskfrontier import Frontier; f = Frontier(sys.argv[1]); print('open', flush=True); "
           "f.compact(); print('done', flush=True); f.close()")


@pytest.fixture(scope="module")
def long_journal(tmp_path_factory):
    """A journal of 20,000 requests: 15,000 done, 400 failed, the rest pending; killed, not closed."""
    job = str(tmp_path_factory.mktemp("failedcompact") / "job")
    f = Frontier(job)
    f.push_many(Request(f"https://{HOSTS[i % 3]}/{i}") for i in range(20000))
    for i in range(15400):
        request = f.pop()
        assert request is not None
        if i % 38 == 0 and i < 15200:
            f.fail(request, f"error {i} " + "x" * (i % 500))
        else:
            f.done(request)
    expected, done = listing(f.failed()), host_done(f)
    f._closing.release_files()  # no checkpoint: the next open rebuilds from the journal
    f._lock.release()
    return job, expected, done


@pytest.mark.parametrize("phase", ["opened", "writing", "installed"])
def test_compaction_killed_at_any_point_keeps_failed_requests(tmp_path, long_journal, phase):
    source, expected, done = long_journal
    job = str(tmp_path / "job")
    shutil.copytree(source, job)
    layout = Layout(job)
    size = os.path.getsize(layout.journal)
    reached = {"opened": lambda: True,
               "writing": lambda: any(n.startswith("requests.urls.compact.") for n in os.listdir(job)),
               "installed": lambda: os.path.getsize(layout.journal) < size}[phase]
    child = subprocess.Popen([sys.executable, "-c", COMPACT, job], stdout=subprocess.PIPE)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == b"open"
    deadline = time.monotonic() + 30
    while not reached() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.0002)
    seen = reached()
    child.kill()
    child.wait()
    child.stdout.close()
    assert seen, f"the compaction ended before it was seen {phase}"
    assert (os.path.getsize(layout.journal) < size) == (phase == "installed")
    assert listing(failed_requests(job)) == expected
    with Frontier(job) as f:
        assert listing(f.failed()) == expected and host_done(f) == done and len(f) == 20000 - 15400


# ------------------------------------------------------------------ verify and damage
def append_record(job: str, body: bytes) -> int:
    """Append one record framed for its place to the journal; return its offset."""
    path = Layout(job).journal
    offset = os.path.getsize(path)
    with open(path, "ab") as out:
        out.write(frame(offset, body, dir_salt(job)))
    return offset


def test_verify_accepts_fail_records_and_repair_keeps_failed_requests(tmp_path):
    job = str(tmp_path / "job")
    expected = failing_crawl(job)
    report = verify(job)
    assert report.sound, report.findings
    # damage at the start of the journal: the first request's record (a pending one) is lost
    pending = sorted(r.url for r in pending_requests(job))
    assert "https://h0.example/0" in pending
    path = Layout(job).journal
    with open(path, "r+b") as out:
        out.seek(8 + 10 + 5)  # inside the first record's body
        out.write(b"\xee")
    report = verify(job)
    assert not report.sound and report.findings[0].offset == 8
    repaired = verify(job, repair=True)
    assert repaired.repaired
    assert verify(job).sound
    assert listing(failed_requests(job)) == expected
    with Frontier(job) as f:
        assert f.recovery == "rebuilt" and listing(f.failed()) == expected
        assert sorted(r.url for r in iter(f.pop, None)) == [url for url in pending if url != "https://h0.example/0"]


@pytest.mark.parametrize("target", ["done", "failed", "nothing", "later"])
def test_a_fail_record_naming_a_request_that_is_not_pending_is_damage(tmp_path, target):
    job = str(tmp_path / "job")
    with Frontier(job) as f:
        f.push_many(Request(f"https://a.example/{i}") for i in range(3))
        finished, failing = take(f), take(f)
        f.done(finished)
        f.fail(failing, "real failure")
        assert finished._seq is not None and failing._seq is not None
        names = {"done": finished._seq, "failed": failing._seq, "nothing": finished._seq + 3}
        expected = listing(f.failed())
    size = os.path.getsize(Layout(job).journal)
    # as if the record was written before a kill
    checkpoint_module.write_open(Layout(job).cursor, dir_id(job), size, None)
    offset = append_record(job, fail_body(names.get(target, size + 100), time.time(), b"crafted"))
    if target == "later":  # a FAIL naming a byte after itself
        assert offset == size
    report = verify(job)
    assert [(finding.offset, "FAIL record" in finding.problem) for finding in report.findings] == [(offset, True)]
    with pytest.raises(JobDirCorrupt) as raised:
        Frontier(job)
    assert raised.value.offset == offset and "FAIL" in str(raised.value)
    assert verify(job, repair=True).repaired and verify(job).sound
    with Frontier(job) as f:
        assert listing(f.failed()) == expected and len(f) == 1


def test_a_done_naming_a_failed_request_is_damage_and_a_retry_is_its_requeue(tmp_path):
    job = str(tmp_path / "job")
    with Frontier(job) as f:
        f.push_many(Request(f"https://a.example/{i}") for i in range(2))
        failing = f.pop()
        assert failing is not None
        f.fail(failing, "failed")
        target = failing._seq
        assert target is not None
        pushed = parse_push(bytes(f._state.journal.read_body(target)))
    checkpoint_module.write_open(Layout(job).cursor, dir_id(job), os.path.getsize(Layout(job).journal), None)
    offset = append_record(job, done_body(target))
    report = verify(job)
    assert [finding.offset for finding in report.findings] == [offset]
    assert "failed" in report.findings[0].problem
    with pytest.raises(JobDirCorrupt):
        Frontier(job)
    assert verify(job, repair=True).repaired
    retry = push_body(pushed.priority, pushed.dont_filter, pushed.fingerprint, bytes(pushed.record), slot=pushed.slot,
                      kind=RETRY, target=target)
    append_record(job, retry)  # what requeue_failed writes
    assert verify(job).sound
    with Frontier(job) as f:
        assert f.failed() == [] and sorted(r.url for r in iter(f.pop, None)) == [
            "https://a.example/0", "https://a.example/1"]


def test_verify_names_a_hosts_file_whose_failed_set_is_not_the_journals(tmp_path):
    job = str(tmp_path / "job")
    failing_crawl(job)
    layout = Layout(job)
    saved = checkpoint_module.read_checkpoint(layout.cursor, dir_id(job))
    assert saved.hosts_file is not None
    state = load_host_state(layout.hosts, saved.hosts_file)
    wrong = dict(list(state.failed.items())[1:])  # one failure left out
    record = save_host_state(layout.hosts, SimpleNamespace(counts=state.counts, hot={}),  # type: ignore[arg-type]
                             state.delayed, wrong)
    with open(layout.cursor) as f:
        value = json.load(f)
    value.pop("crc")
    value["hosts_file"] = record.to_json()
    value["crc"] = checkpoint_module._crc(value)
    with open(layout.cursor, "w") as f:
        json.dump(value, f)
    report = verify(job)
    assert [finding.file for finding in report.findings] == [layout.hosts]
    assert "failed requests" in report.findings[0].problem


# ------------------------------------------------------------------ inspect and the command line
def test_inspect_counts_failed_requests_from_the_checkpoint_and_from_a_scan(tmp_path):
    job = str(tmp_path / "job")
    failing_crawl(job)
    clean = inspect_jobdir(job)
    checkpoint_module.write_open(Layout(job).cursor, dir_id(job), 0, None)
    scanned = inspect_jobdir(job)
    assert clean.state == "clean" and scanned.state.startswith("needs recovery")
    assert clean.failed == scanned.failed == 5
    assert clean.done == scanned.done == 4  # done, not retried; the failed ones apart
    result = CliRunner().invoke(main, ["inspect", job])
    assert result.exit_code == 0 and f"failed         5 (diskfrontier failed {job} lists them)" in result.output
    data = json.loads(CliRunner().invoke(main, ["inspect", job, "--json"]).output)
    assert data["failed"] == 5


def test_cli_failed_and_requeue_failed(tmp_path):
    job = str(tmp_path / "job")
    expected = failing_crawl(job)
    runner = CliRunner()
    result = runner.invoke(main, ["failed", job, "-n", "2"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 5 and lines[-1] == "... and 3 more (-n 0 shows all)"
    assert lines[0].endswith(f"  0 retries  GET  {expected[0][0]}")
    assert lines[1] == "    " + expected[0][2][:297] + "..."  # one line of at most 300 characters
    assert time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(expected[0][3])) == lines[0][:19]
    everything = runner.invoke(main, ["failed", job, "-n", "0"]).output.splitlines()
    assert len(everything) == 10 and everything[-2].endswith(f"  2 retries  GET  {expected[-1][0]}")
    rows = [json.loads(line) for line in runner.invoke(main, ["failed", job, "--json", "-n", "0"]).output.splitlines()]
    assert [(r["url"], r["attempts"], r["error"], r["failed_at"]) for r in rows] == expected
    assert set(rows[0]) >= {"url", "method", "headers", "body", "priority", "meta", "dont_filter", "attempts",
                            "error", "failed_at"}
    result = runner.invoke(main, ["requeue-failed", job, "--json"])
    assert result.exit_code == 0 and json.loads(result.output) == {"requeued": 5, "pending": 21 + 5}
    assert runner.invoke(main, ["failed", job]).output == "no failed requests\n"
    assert runner.invoke(main, ["failed", job, "--json"]).output == ""
    assert runner.invoke(main, ["requeue-failed", job]).output == "requeued 0 failed requests; 26 pending\n"
    for command in ("failed", "requeue-failed"):
        assert "Example: diskfrontier " + command in runner.invoke(main, [command, "--help"]).output
        plain = runner.invoke(main, [command, str(tmp_path)])
        assert plain.exit_code == 1 and "is not a diskfrontier job directory" in plain.output
        missing = runner.invoke(main, [command, "redis://localhost:1/0"])
        assert missing.exit_code == 2 and "--crawl NAME" in missing.output, missing.output
        down = runner.invoke(main, [command, "redis://localhost:1/0", "--crawl", "news"])
        assert down.exit_code == 1 and len(down.output.splitlines()) == 1, down.output
        assert "could not be reached" in down.output


def test_the_failed_commands_on_a_redis_crawl(redis_url, crawl_name):
    from diskfrontier import RedisFrontier

    with RedisFrontier(redis_url, crawl=crawl_name) as frontier:
        frontier.push_many(Request(f"https://r.example/{i}") for i in range(4))
        for _ in range(2):
            frontier.fail(take(frontier), "HTTPError: 500")
    runner = CliRunner()
    listed = runner.invoke(main, ["failed", redis_url, "--crawl", crawl_name, "--json"])
    assert listed.exit_code == 0, listed.output
    rows = [json.loads(line) for line in listed.output.splitlines()]
    assert [r["error"] for r in rows] == ["HTTPError: 500"] * 2 and {r["url"] for r in rows} < {
        f"https://r.example/{i}" for i in range(4)}
    result = runner.invoke(main, ["requeue-failed", redis_url, "--crawl", crawl_name, "--json"])
    assert result.exit_code == 0 and json.loads(result.output) == {"requeued": 2, "pending": 4}
    assert runner.invoke(main, ["failed", redis_url, "--crawl", crawl_name]).output == "no failed requests\n"


def snapshot(job: str) -> dict[str, bytes]:
    """Every file of the job directory's top level and its bytes."""
    out = {}
    for name in sorted(os.listdir(job)):
        if name in ("status.json", "outcomes.json"):
            continue  # the holder's figures, replaced about once a second while it runs
        path = os.path.join(job, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                out[name] = f.read()
    return out


def test_the_console_script_lists_the_failures_of_a_live_crawl_without_changing_it(tmp_path):
    job = str(tmp_path / "job")
    code = """if True:
        import sys, time
        from diskfrontier import Frontier, Request
        f = Frontier(sys.argv[1])
        f.push_many(Request(f"https://a.example/{i}") for i in range(5))
        for n in range(3):
            f.fail(f.pop(), f"live failure {n}")
        print("ok", flush=True)
        time.sleep(60)
    """
    child = subprocess.Popen([sys.executable, "-c", code, job], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ok"
        before = snapshot(job)
        out = subprocess.run([*SCRIPT, "failed", job, "--json"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        rows = [json.loads(line) for line in out.stdout.splitlines()]
        assert [r["error"] for r in rows] == ["live failure 0", "live failure 1", "live failure 2"]
        assert all(r["attempts"] == 0 and r["url"].startswith("https://a.example/") for r in rows)
        assert snapshot(job) == before
        requeue = subprocess.run([*SCRIPT, "requeue-failed", job], capture_output=True, text=True, timeout=60)
        assert requeue.returncode == 0 and requeue.stdout.startswith("requeued 3 failed"), requeue.stderr
        assert f"applied by the crawl holding {job}" in requeue.stderr
    finally:
        child.kill()
        child.wait()
