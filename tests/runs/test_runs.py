"""crawl(): a real 2,000-page crawl with 16 worker threads and politeness on, stopped by SIGINT,
SIGTERM, duration and max_requests and resumed each time; a SIGKILL; repeated runs; failures."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from urllib.parse import urlsplit

import pytest
from paths import KITS
from sharedruns import check_failures_kept

from diskfrontier import Frontier, Request, crawl
from diskfrontier.jobdir.reader import pending_requests
from diskfrontier.run.demo import MultiHostSite

CHILD = os.path.join(KITS, "crawl_child.py")
PAGES = 2000


def run_child(job: str, site: MultiHostSite, stats: str, *options: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, CHILD, job, f"{site.base}/page/0", stats, *options],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_for_pages(site: MultiHostSite, proc: subprocess.Popen, pages: int, timeout: float = 60,
                   fetches: bool = False) -> None:
    """Wait until the site has served ``pages`` distinct pages (``fetches``: that many requests)."""
    deadline = time.monotonic() + timeout
    assert proc.stderr is not None
    while (sum(site.fetched().values()) if fetches else len(site.fetched())) < pages:
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, f"the crawl did not reach {pages} pages"
        time.sleep(0.002)


def finish(proc: subprocess.Popen, stats: str) -> list[dict]:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-3000:]
    with open(stats) as f:
        return json.load(f)


@pytest.mark.slow
@pytest.mark.crash
def test_stopped_by_sigint_sigterm_duration_and_max_requests_then_resumed_fetches_every_page_once(tmp_path):
    job, stats = str(tmp_path / "job"), str(tmp_path / "stats.json")
    with MultiHostSite(PAGES, hosts=8, share=0.5) as site:
        reasons = []
        for sig, pages in ((signal.SIGINT, 300), (signal.SIGTERM, 700)):
            proc = run_child(job, site, stats, "workers=16")
            wait_for_pages(site, proc, pages)
            proc.send_signal(sig)
            runs = finish(proc, stats)
            reasons.append(runs[-1]["stopped_by"])
        before = len(site.fetched())
        runs = finish(run_child(job, site, stats, "workers=16", "duration=0.5"), stats)
        reasons.append(runs[-1]["stopped_by"])
        assert len(site.fetched()) > before  # the duration run did work
        runs = finish(run_child(job, site, stats, "workers=16", "max_requests=150"), stats)
        reasons.append(runs[-1]["stopped_by"])
        assert runs[-1]["handled"] == 150
        runs = finish(run_child(job, site, stats, "workers=16"), stats)
        reasons.append(runs[-1]["stopped_by"])
        fetched = site.fetched()
    assert reasons == ["SIGINT", "SIGTERM", "duration", "max_requests", "finished"]
    assert set(fetched) == {f"/page/{n}" for n in range(PAGES)}  # every page
    assert max(fetched.values()) == 1  # none twice: each stop finished the requests in hand
    with Frontier(job) as frontier:
        assert frontier.finished and frontier.stats()["recovery"] == "clean"


def in_hand(job: str, site: MultiHostSite) -> set[str]:
    """Pages fetched and not done: the job directory still holds them (they will be fetched again)."""
    return set(site.fetched()) & {urlsplit(r.url).path for r in pending_requests(job)}


@pytest.mark.slow
@pytest.mark.crash
def test_a_sigkill_refetches_only_what_was_in_hand_and_a_second_ctrl_c_stops_at_once(tmp_path):
    job, stats = str(tmp_path / "job"), str(tmp_path / "stats.json")
    with MultiHostSite(600, hosts=4, share=0.5) as site:
        proc = run_child(job, site, stats, "workers=16")
        wait_for_pages(site, proc, 200)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        held = in_hand(job, site)
        # a slow handler: the first Ctrl-C waits for the pages in hand, the second leaves at once
        proc = run_child(job, site, stats, "workers=4", "slow=30")
        wait_for_pages(site, proc, sum(site.fetched().values()) + 4, fetches=True)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        assert proc.poll() is None  # waiting for the pages in hand
        proc.send_signal(signal.SIGINT)
        runs = finish(proc, stats)
        assert time.monotonic() - started < 30 / 2 and runs[-1]["stopped_by"] == "interrupted"  # not after slow=30
        interrupted = in_hand(job, site)
        assert interrupted  # left in flight, and given back at close
        runs = finish(run_child(job, site, stats, "workers=16"), stats)
        assert runs[-1]["stopped_by"] == "finished"
        fetched = site.fetched()
    assert set(fetched) == {f"/page/{n}" for n in range(600)}
    twice = {path for path, count in fetched.items() if count > 1}
    assert twice <= held | interrupted, sorted(twice - held - interrupted)[:5]


def test_failures_are_retried_with_backoff_then_listed(tmp_path):
    attempts: dict[str, list[float]] = {}
    lock = threading.Lock()

    def handler(request, frontier):
        with lock:
            attempts.setdefault(request.url, []).append(time.monotonic())
        if "bad" in request.url:
            raise ConnectionError(f"refused by {request.slot}")

    with Frontier(tmp_path / "job") as frontier:
        frontier.push_many([Request("https://a.example/bad"), Request("https://a.example/good"),
                            Request("https://b.example/bad")])
        stats = crawl(frontier, handler, workers=4, retries=2, backoff=0.05, progress=False)
        assert (stats.done, stats.retried, stats.failed, stats.stopped_by) == (1, 4, 2, "finished")
        failed = {f.request.url: f for f in frontier.failed()}
        assert set(failed) == {"https://a.example/bad", "https://b.example/bad"}
        assert all(f.request.attempts == 2 and f.error.startswith("ConnectionError: refused") for f in failed.values())
        for url in failed:
            times = attempts[url]
            assert len(times) == 3
            assert times[1] - times[0] >= 0.05 - 0.005 and times[2] - times[1] >= 0.1 - 0.005  # doubled
        assert frontier.finished and frontier.stats()["failed"] == 2
    with Frontier(tmp_path / "job") as frontier:  # kept across a reopen
        assert len(frontier.failed()) == 2
        assert frontier.requeue_failed() == 2 and len(frontier) == 2


def test_a_handler_may_finish_its_request_itself(tmp_path):
    def handler(request, frontier):
        if request.url.endswith("/feed"):
            frontier.done(request, refetch_after=3600)
        elif request.url.endswith("/later"):
            frontier.retry(request, delay=3600)

    with Frontier(tmp_path / "job") as frontier:
        frontier.push_many([Request("https://a.example/feed"), Request("https://a.example/later"),
                            Request("https://a.example/page")])
        stats = crawl(frontier, handler, workers=2, progress=False, duration=0.5)
        assert stats.done == 3 and stats.failed == 0
        assert len(frontier) == 2 and frontier.stats()["delayed"] == 2
        assert stats.stopped_by == "duration"  # two requests wait an hour: not finished, not stalled


def test_repeated_runs_start_on_schedule(tmp_path):
    with Frontier(tmp_path / "job") as frontier:
        t0 = time.monotonic()
        crawl(frontier, lambda r, f: None, workers=2, progress=False)  # an empty run: its cost, measured
        cost = time.monotonic() - t0
        frontier.push(Request("https://a.example/"))
        every, times = 0.4, 4
        stats = crawl(frontier, lambda r, f: f.done(r, refetch_after=0.01), workers=2, every=every, times=times,
                      duration=0.1, progress=False)
    starts = [run.started for run in stats.runs]
    assert len(starts) == times
    tolerance = 5 * cost + 0.05
    for n, start in enumerate(starts):
        lateness = start - (starts[0] + n * every)
        assert -0.01 <= lateness <= tolerance, (n, lateness, tolerance)
    assert all(run.handled >= 1 for run in stats.runs)  # each run fetched the page again


@pytest.mark.parametrize("bad", [{"workers": 0}, {"times": 0}, {"duration": -1}, {"max_requests": 1.5},
                                 {"backoff": float("nan")}, {"retries": True}])
def test_bad_arguments_are_refused(tmp_path, bad):
    with Frontier(tmp_path / "job") as frontier, pytest.raises(ValueError, match=r"crawl\(\)"):
        crawl(frontier, lambda r, f: None, **bad)


def test_an_async_handler_runs_as_tasks(tmp_path):
    import asyncio

    seen = []

    async def handler(request, frontier):
        await asyncio.sleep(0.001)
        seen.append(request.url)
        if request.url.endswith("/0"):
            frontier.push_many(Request(f"https://h{i % 3}.example/{i}") for i in range(1, 50))

    with Frontier(tmp_path / "job") as frontier:
        frontier.push(Request("https://h0.example/0"))
        stats = crawl(frontier, handler, workers=8, progress=False)
        assert stats.done == 50 and len(set(seen)) == 50 and frontier.finished


def test_crawl_runs_over_redis_with_failures_kept_there(redis_url, crawl_name):
    from diskfrontier import RedisFrontier

    check_failures_kept(lambda **settings: RedisFrontier(redis_url, crawl=crawl_name, **settings))
    with RedisFrontier(redis_url, crawl=crawl_name) as frontier:
        assert {r.attempts for r in frontier.pending_requests()} == {0}


def test_a_status_line_and_logs_tell_how_the_run_goes(tmp_path, capsys, caplog):
    import logging

    def handler(request, frontier):
        time.sleep(0.3)

    with Frontier(tmp_path / "job") as frontier, caplog.at_level(logging.INFO, logger="diskfrontier"):
        frontier.push_many(Request(f"https://a.example/{i}") for i in range(4))
        crawl(frontier, handler, workers=2, progress=True)
    line = capsys.readouterr().err.rstrip("\n").split("\r")[-1]
    assert "pending 0" in line and "done 4" in line and "failed 0" in line and "/s" in line
    assert "run 1 ended (finished): 4 handled, 4 done" in caplog.text


def test_review_findings_max_requests_async_objects_and_huge_backoff(tmp_path):
    with Frontier(tmp_path / "a", delay=0.2) as frontier:  # max_requests counts handled requests
        frontier.push_many(Request(f"https://a.example/{i}") for i in range(20))
        stats = crawl(frontier, lambda r, f: None, workers=4, max_requests=4, progress=False)
        assert stats.handled == 4 and stats.stopped_by == "max_requests"

    class Handler:  # an object whose __call__ is async is run as a task, not dropped
        def __init__(self):
            self.calls = 0

        async def __call__(self, request, frontier):
            self.calls += 1

    handler = Handler()
    with Frontier(tmp_path / "b") as frontier:
        frontier.push_many(Request(f"https://b.example/{i}") for i in range(3))
        assert crawl(frontier, handler, workers=2, progress=False).done == 3 and handler.calls == 3

    def boom(request, frontier):
        raise OSError("down")

    with Frontier(tmp_path / "c") as frontier:  # a backoff beyond the longest delay is capped, not a hang
        frontier.push(Request("https://c.example/"))
        stats = crawl(frontier, boom, workers=2, retries=3, backoff=2e10, duration=1.0, progress=False)
        assert stats.retried == 1 and stats.stopped_by == "duration"


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_paused_crawl_idles_until_resumed_and_then_finishes(tmp_path, asynchronous):
    """pause() from a handler: the run neither finishes nor stalls while paused; resume() from another
    thread lets it take the rest."""
    from diskfrontier import Frontier, Request, crawl

    pause_for = 1.0
    with Frontier(tmp_path / "job") as frontier:
        frontier.push_many(Request(f"https://p.example/{i}") for i in range(30))
        taken: list[float] = []

        def resume_later() -> None:
            time.sleep(pause_for)
            frontier.resume()

        def note(request, f) -> None:
            taken.append(time.monotonic())
            if len(taken) == 10:
                f.pause()
                threading.Thread(target=resume_later).start()

        if asynchronous:
            async def handler(request, f) -> None:
                note(request, f)
        else:
            def handler(request, f) -> None:  # type: ignore[misc]
                note(request, f)

        started = time.monotonic()
        stats = crawl(frontier, handler, workers=2)
        assert stats.stopped_by == "finished" and stats.done == 30
        assert time.monotonic() - started >= pause_for
        gaps = [b - a for a, b in itertools.pairwise(taken)]
        assert max(gaps) >= pause_for * 0.9  # the requests after the pause waited for the resume
