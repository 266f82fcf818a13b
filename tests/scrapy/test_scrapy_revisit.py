"""Revisits in a real Scrapy crawl of a loopback site whose pages change at known rates: conditional
headers sent from the stored state, a 304 taken as unchanged, a changed page back sooner than an
unchanged one, and the learned intervals kept across a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from diskfrontier.jobdir.reader import pending_requests
from diskfrontier.run.changingsite import ChangingSite, PageClass

CHILD = os.path.join(os.path.dirname(__file__), "..", "kits", "scrapy_revisit_child.py")
POLICY = {"initial": 1.0, "min": 0.3, "max": 6.0, "inc": 0.4, "dec": 0.3}
FAST, NEVER = 0, 1


def _start(job: str, site: ChangingSite, stats: str, seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, CHILD, job, site.url(0), stats, str(seconds), json.dumps(POLICY)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _intervals(job: str, site: ChangingSite) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {FAST: [], NEVER: []}
    for request in pending_requests(job):
        if request.revisit is not None:
            out[site.class_of(int(request.url.rsplit("/", 1)[1]))].append(request.revisit.interval)
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


@pytest.mark.slow
def test_a_scrapy_crawl_revisits_changed_pages_sooner_and_sends_conditional_requests(tmp_path):
    job, stats_path = str(tmp_path / "job"), str(tmp_path / "stats.json")
    with ChangingSite(40, [PageClass(0.3, 0.5), PageClass(0.7, None)], hosts=3) as site:
        proc = _start(job, site, stats_path, 12)
        _out, err = proc.communicate(timeout=120)
        report = site.report()
    log = err.decode(errors="replace")
    assert proc.returncode == 0, log[-3000:]
    with open(stats_path) as f:
        stats = json.load(f)
    print(report, {k: v for k, v in stats.items() if 'revisit' in k})
    assert stats["diskfrontier/revisits_scheduled"] > 40, stats
    assert stats.get("diskfrontier/revisit/not_modified", 0) > 0 and stats.get("diskfrontier/revisit/changed", 0) > 0
    assert report["not_modified_share"] >= 0.9, report  # the stored ETag was sent back, and honoured
    intervals = _intervals(job, site)
    assert intervals[FAST] and intervals[NEVER]
    assert _mean(intervals[FAST]) < _mean(intervals[NEVER]), intervals
    assert "Traceback" not in log, log[-3000:]


@pytest.mark.slow
@pytest.mark.crash
def test_the_learned_intervals_survive_a_sigkill(tmp_path):
    job, stats_path = str(tmp_path / "job"), str(tmp_path / "stats.json")
    with ChangingSite(30, [PageClass(0.3, 0.5), PageClass(0.7, None)], hosts=3) as site:
        proc = _start(job, site, stats_path, 60)
        deadline = time.monotonic() + 60
        while sum(s.status == 304 for s in site.log()) < 60:  # some pages revisited several times
            assert proc.poll() is None, proc.stderr.read().decode(errors="replace")[-3000:] if proc.stderr else ""
            assert time.monotonic() < deadline, "the crawl never revisited"
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = {r.url: r.revisit for r in pending_requests(job) if r.revisit is not None}
        assert before and any(state.interval != POLICY["initial"] for state in before.values())
        fetched = len(site.log())
        proc = _start(job, site, stats_path, 4)
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
        assert len(site.log()) > fetched  # the resumed crawl went on revisiting
    after = {r.url: r.revisit for r in pending_requests(job) if r.revisit is not None}
    # every page revisited before the kill kept its learned state: it was revisited again from there, or
    # waits with it (requests in flight at the kill are handed out again with the state they had)
    assert set(before) <= set(after)
    assert all(after[url].visits >= state.visits for url, state in before.items())
    assert sum(after[url].visits > state.visits for url, state in before.items()) > 0
