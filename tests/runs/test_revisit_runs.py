"""crawl() and acrawl() with revisit=: against a loopback site whose pages change at known rates, the
stored validators are sent back (most revisits of unchanged pages are answered 304), changed pages come
back sooner than unchanged ones, and a crawl killed with SIGKILL keeps every page's learned interval."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from paths import KITS

from diskfrontier.access.targets import open_view
from diskfrontier.jobdir.reader import pending_requests
from diskfrontier.run.changingsite import ChangingSite, PageClass

CHILD = os.path.join(KITS, "revisit_child.py")
POLICY = {"initial": 1.0, "min": 0.3, "max": 6.0, "inc": 0.4, "dec": 0.3}
FAST, NEVER = 0, 1


def _start(job: str, site: ChangingSite, seconds: float, mode: str) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, CHILD, job, site.url(0), str(seconds), mode, json.dumps(POLICY)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "crawling", process.stderr
    return process


def _states(job: str) -> dict[str, object]:
    if job.startswith("redis://"):
        with open_view(job, "revisits") as view:
            return {r.url: r.revisit for r in view.pending_requests() if r.revisit is not None}
    return {r.url: r.revisit for r in pending_requests(job) if r.revisit is not None}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_revisits_send_the_validators_and_bring_changed_pages_back_sooner(tmp_path, mode):
    job = str(tmp_path / "job")
    with ChangingSite(40, [PageClass(0.3, 0.5), PageClass(0.7, None)], hosts=3) as site:
        process = _start(job, site, 8, mode)
        _out, err = process.communicate(timeout=120)
        report = site.report()
    assert process.returncode == 0, err[-3000:]
    assert report["not_modified_share"] >= 0.9, report  # the stored ETag went back and was honoured
    intervals: dict[int, list[float]] = {FAST: [], NEVER: []}
    for url, state in _states(job).items():
        intervals[site.class_of(int(url.rsplit("/", 1)[1]))].append(state.interval)  # type: ignore[attr-defined]
    assert len(intervals[FAST]) + len(intervals[NEVER]) == 40
    fast, never = (sum(values) / len(values) for values in (intervals[FAST], intervals[NEVER]))
    assert fast < never, intervals


KILLS = 5  # per backend and mode: each at a random moment after the crawl has been revisiting a while


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.parametrize(("backend", "mode"), [("jobdir", "sync"), ("jobdir", "async"), ("redis", "sync")])
def test_sigkills_keep_every_learned_interval(tmp_path, request, backend, mode):
    """Killed with SIGKILL at random moments and resumed each time: every page's revisit state read after a
    kill is the one read after the kill before, or one that went on from it (more visits); none is lost and
    none is back to its first interval."""
    job = request.getfixturevalue("redis_url") if backend == "redis" else str(tmp_path / "job")
    rng = random.Random(f"{backend}-{mode}")
    tally = {"kills": 0, "states": 0, "kept": 0, "went_on": 0, "learned": 0}
    before: dict[str, object] = {}
    with ChangingSite(30, [PageClass(0.3, 0.5), PageClass(0.7, None)], hosts=3) as site:
        for _ in range(KILLS):
            process = _start(job, site, 120, mode)
            answered = sum(s.status == 304 for s in site.log())
            target = answered + rng.randint(15, 60)
            deadline = time.monotonic() + 60
            while sum(s.status == 304 for s in site.log()) < target:
                assert process.poll() is None, process.communicate()[1][-3000:]
                assert time.monotonic() < deadline, "the crawl never revisited"
                time.sleep(0.05)
            process.send_signal(signal.SIGKILL)
            process.wait()
            tally["kills"] += 1
            after = _states(job)
            assert set(before) <= set(after)
            for url, state in before.items():
                now = after[url]
                tally["states"] += 1
                if now.visits == state.visits:  # type: ignore[attr-defined]
                    assert now == state, url
                    tally["kept"] += 1
                else:
                    assert now.visits > state.visits, url  # type: ignore[attr-defined]
                    tally["went_on"] += 1
            learned = [s for s in after.values() if s.visits >= 2]  # type: ignore[attr-defined]
            assert learned and all(s.interval != POLICY["initial"] for s in learned)  # type: ignore[attr-defined]
            tally["learned"] += len(learned)
            before = after
        served = len(site.log())
        process = _start(job, site, 3, mode)
        _out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err[-3000:]
        assert len(site.log()) > served
    after = _states(job)
    assert set(before) <= set(after)
    assert all(after[url].visits >= state.visits for url, state in before.items())  # type: ignore[attr-defined]
    assert any(after[url].visits > state.visits for url, state in before.items())  # type: ignore[attr-defined]
    print(f"{backend} {mode}: {tally}")
