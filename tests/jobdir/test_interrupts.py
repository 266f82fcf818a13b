"""Every call is atomic for the process's own state: Ctrl-C half-way, threads, a full disk.

A call interrupted after its journal write leaves the frontier dirty, and close() then
writes no clean checkpoint; a write that fails part-way is cut back from the journal.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
from popkit import take

from diskfrontier import Frontier, FrontierError, Request
from diskfrontier.jobdir.maintenance.verify import verify
from diskfrontier.jobdir.seen import SeenFile


def pending_urls(job) -> list[str]:
    """Every pending URL, popped and done (so the directory ends empty)."""
    out = []
    with Frontier(job) as f:
        while (r := f.pop()) is not None:
            out.append(r.url)
            f.done(r)
    return out


def assert_nothing_blocked(job, urls) -> None:
    """Each URL is pending, or not seen (pushable again): none is seen but never to be crawled."""
    pending = set(pending_urls(job))
    with Frontier(job) as f:
        blocked = [u for u in urls if u not in pending and not f.push(Request(u))]
    assert blocked == [], f"{len(blocked)} URLs are seen but not pending: lost for good"


def test_interrupt_inside_push_many_bookkeeping_leaves_nothing_blocked(tmp_path, monkeypatch):
    job = tmp_path / "job"
    urls = [f"https://a.example/{i}" for i in range(5000)]
    calls = 0
    real_add = SeenFile.add

    def add_then_interrupt(self, fingerprint, key=None):
        nonlocal calls
        calls += 1
        if calls == 1234:
            raise KeyboardInterrupt
        return real_add(self, fingerprint, key)

    monkeypatch.setattr(SeenFile, "add", add_then_interrupt)
    with pytest.raises(KeyboardInterrupt), Frontier(job) as f:
        f.push_many(Request(u) for u in urls)
    monkeypatch.setattr(SeenFile, "add", real_add)
    assert verify(job).sound
    assert sorted(pending_urls(job)) == sorted(urls)  # the journal write went through: all of it is pending


class _Interrupting(dict):
    def __delitem__(self, key):
        raise KeyboardInterrupt


def interrupt_done(f: Frontier, popped: Request) -> None:
    """A Ctrl-C inside ``f.done(popped)``: the DONE record is written, the bookkeeping is cut short."""
    f._state.inflight = _Interrupting(f._state.inflight)
    with pytest.raises(KeyboardInterrupt):
        f.done(popped)
    assert f.stats()["dirty"]
    f._state.inflight = dict(f._state.inflight)


def test_interrupt_inside_pop_and_done_keeps_every_request(tmp_path, monkeypatch):
    job = tmp_path / "job"
    with Frontier(job) as f:
        f.push_many(Request(f"https://a.example/{i}") for i in range(100))
    f = Frontier(job)
    done = set()
    for _ in range(10):
        r = f.pop()
        assert r is not None
        f.done(r)
        done.add(r.url)
    popped = f.pop()
    assert popped is not None

    interrupt_done(f, popped)
    f.close()
    done.add(popped.url)
    got = pending_urls(job)
    assert sorted(got) == sorted({f"https://a.example/{i}" for i in range(100)} - done)


CHILD = textwrap.dedent("""
    import sys
    from diskfrontier import Frontier, Request
    job, start, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with Frontier(job) as f:
        for b in range(batches):
            print("start", b, flush=True)
            f.push_many(Request(f"https://a.example/{start + b}/{i}") for i in range(5000))
            print("acked", b, flush=True)
""")


@pytest.mark.slow
@pytest.mark.crash
def test_real_sigint_during_push_many_loses_nothing(tmp_path):
    """Batches of 5,000 under real SIGINT at random moments: nothing acknowledged is lost, nothing blocked."""
    job = str(tmp_path / "job")
    rng = random.Random(8)
    everything: list[str] = []
    acked: list[str] = []
    interrupted = 0
    for run in range(12):
        start = run * 100
        child = subprocess.Popen([sys.executable, "-c", CHILD, job, str(start), "4"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stderr is not None
        first = child.stdout.readline()  # the frontier is open and the first batch has begun
        assert first.startswith("start"), first + child.stderr.read()
        threading.Event().wait(rng.uniform(0.0, 0.25))
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
        interrupted += "KeyboardInterrupt" in err
        assert "Traceback" not in err or "KeyboardInterrupt" in err, err
        for line in (first + out).splitlines():
            kind, batch = line.split()
            urls = [f"https://a.example/{start + int(batch)}/{i}" for i in range(5000)]
            if kind == "start":
                everything += urls
            else:
                acked += urls
    assert interrupted >= 6  # most runs were cut in the middle of a call
    assert verify(job).sound
    pending = set(pending_urls(job))
    assert set(acked) <= pending  # nothing acknowledged is lost
    with Frontier(job) as f:
        blocked = [u for u in everything if u not in pending and not f.push(Request(u))]
    assert blocked == []


def test_threads_share_one_frontier(tmp_path):
    """8 threads push, pop and done at once; the directory then holds exactly what the model says."""
    job = tmp_path / "job"
    f = Frontier(job)
    f.push_many(Request(f"https://seed.example/{i}") for i in range(2000))
    done: list[str] = []
    pushed: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        rng = random.Random(n)
        try:
            for step in range(600):
                r = f.pop()
                if r is not None and rng.random() < 0.8:
                    f.done(r)
                    with lock:
                        done.append(r.url)
                url = f"https://t{n}.example/{step}"
                if rng.random() < 0.5 and f.push(Request(url, priority=rng.randint(-2, 2))):
                    with lock:
                        pushed.append(url)
                if rng.random() < 0.05:
                    batch = [Request(f"https://m{n}.example/{step}/{i}") for i in range(20)]
                    f.push_many(batch)
                    with lock:
                        pushed.extend(r.url for r in batch)
                    f.stats()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert f.stats()["dirty"] is None
    f.close()
    assert verify(job).sound
    expected = sorted(set([f"https://seed.example/{i}" for i in range(2000)] + pushed) - set(done))
    assert len(done) == len(set(done))  # nothing handed out twice
    assert sorted(pending_urls(job)) == expected


FULL_DISK_CHILD = textwrap.dedent("""
    import os, resource, signal, sys
    from diskfrontier import Frontier, Request
    job = sys.argv[1]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    f = Frontier(job)
    f.push_many(Request(f"https://a.example/{i}") for i in range(200))
    limit = os.path.getsize(os.path.join(job, "requests.urls")) + 3000
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    failed = 0
    for i in range(200):
        try:
            if f.push_many([Request(f"https://b.example/{i}/{j}") for j in range(20)]):
                print("acked", i, flush=True)
        except OSError:
            failed += 1
    assert failed, "the limit was never reached"
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space is freed
    f.push(Request("https://c.example/after"))
    print("acked after", flush=True)
    f.close()
""")


def test_full_disk_cuts_back_the_failed_write_and_goes_on(tmp_path):
    job = str(tmp_path / "job")
    result = subprocess.run([sys.executable, "-c", FULL_DISK_CHILD, job], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    acked = []
    for line in result.stdout.splitlines():
        if line == "acked after":
            acked.append("https://c.example/after")
        else:
            i = int(line.split()[1])
            acked += [f"https://b.example/{i}/{j}" for j in range(20)]
    assert verify(job).sound  # no partial record behind later pushes
    got = pending_urls(job)
    assert sorted(got) == sorted(acked + [f"https://a.example/{i}" for i in range(200)])


def test_failed_compaction_leaves_a_usable_frontier(tmp_path, monkeypatch):
    job = tmp_path / "job"
    f = Frontier(job)
    f.push_many(Request(f"https://a.example/{i}") for i in range(300))
    for _ in range(200):
        f.done(take(f))
    import diskfrontier.jobdir.maintenance.compaction as compaction

    def no_space(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(compaction, "write_all", no_space)
    with pytest.raises(OSError):
        f.compact()
    monkeypatch.undo()
    assert not os.path.exists(job / "requests.urls.compact")
    assert f.push(Request("https://a.example/new"))
    assert len(f) == 101
    f.close()
    assert verify(job).sound
    assert len(pending_urls(job)) == 101


def test_failed_close_still_releases_the_lock(tmp_path, monkeypatch):
    job = tmp_path / "job"
    f = Frontier(job)
    f.push(Request("https://a.example/"))
    import diskfrontier.jobdir.closing as closing_module

    def no_space(path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(closing_module, "fsync_path", no_space)
    with pytest.raises(OSError):
        f.close()
    monkeypatch.undo()
    with Frontier(job) as again:  # not locked, and rebuilt from the journal
        assert again.recovery == "rebuilt" and len(again) == 1


def test_a_frontier_that_cannot_go_on_says_so(tmp_path, monkeypatch):
    job = tmp_path / "job"
    f = Frontier(job)
    f.push_many(Request(f"https://a.example/{i}") for i in range(10))
    import diskfrontier.jobdir.swap as swap_module

    def broken_install(new, path):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(swap_module, "install", broken_install)
    with pytest.raises(FrontierError, match="Input/output error"):
        f.compact()
    with pytest.raises(FrontierError, match="close it and open it again"):
        f.pop()
    f.close()
    monkeypatch.undo()
    assert len(pending_urls(job)) == 10


@pytest.mark.parametrize("order", ["lifo", "fifo"])
def test_closing_after_an_interrupted_call_leaves_no_descriptor_open(tmp_path, monkeypatch, order):
    job = tmp_path / "job"
    with Frontier(job, order=order) as f:
        f.push_many(Request(f"https://a.example/{i}", priority=i % 7) for i in range(700))
    before = set(os.listdir("/proc/self/fd"))
    f = Frontier(job)
    for _ in range(350):  # priorities emptied on the way: their queues are kept open as spares
        f.done(take(f))
    popped = f.pop()
    assert popped is not None

    interrupt_done(f, popped)
    f.close()  # no checkpoint: the queue files are to be rebuilt, but their descriptors are closed
    assert set(os.listdir("/proc/self/fd")) == before
    with Frontier(job) as again:
        assert again.recovery == "rebuilt" and len(again) == 700 - 351
