"""Stops that are bounded whatever a robots.txt fetch or a handler does: crawl() and acrawl() children
stopped by their duration, SIGTERM and Ctrl-C while stuck in a robots.txt sent one byte every 2 s (a
socket timeout, per read, never fires) end as an ordinary run does; a user's fetch_robots that hangs is
not waited for; a handler past its grace is left behind, never acknowledged, and its request comes back.

Every bound is the documented one, next to what the same test measured for an ordinary run."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from paths import KITS
from sharedruns import check_handler_left_behind_given_back
from stopbounds import GRACE, in_thread, ordinary_run
from tricklesite import TrickleSite

from diskfrontier import AsyncFrontier, Frontier, Request, acrawl, crawl
from diskfrontier.jobdir.reader import pending_requests
from diskfrontier.run.demo import MultiHostSite, SyntheticSite

CANCEL_WAIT = 1.0  # how long acrawl() waits for handlers it cancelled (documented)


# ------------------------------------------------------------------ a whole crawl in a child, stopped
CRAWL_CHILD, ACRAWL_CHILD = os.path.join(KITS, "crawl_child.py"), os.path.join(KITS, "acrawl_child.py")


def ordinary_site(runner: str) -> MultiHostSite | SyntheticSite:
    """A site a run cannot finish in seconds: the crawl child follows absolute links, the acrawl child relative ones."""
    if runner == "crawl":
        return MultiHostSite(100_000, hosts=4, share=0.5, delay=0.005)
    return SyntheticSite(100_000, delay=0.005)


def start_child(runner: str, job: str, start: str, out: str, *options: str) -> subprocess.Popen:
    child = CRAWL_CHILD if runner == "crawl" else ACRAWL_CHILD
    return subprocess.Popen([sys.executable, child, job, start, out, "robots=true", 'user_agent="testbot"',
                             *options], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def run_stats(runner: str, proc: subprocess.Popen, out: str) -> dict:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-3000:]
    with open(out) as f:
        result = json.load(f)
    return result[-1] if runner == "crawl" else result["stats"][0]


def wait_until(condition: Callable[[], bool], proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    assert proc.stderr is not None
    while not condition():
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, "the child never got there"
        time.sleep(0.01)


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["crawl", "acrawl"])
def test_a_run_stuck_in_a_robots_txt_sent_a_byte_every_2s_ends_at_its_duration(tmp_path, runner):
    duration, out = 2.0, str(tmp_path / "out.json")
    with ordinary_site(runner) as site:  # an ordinary run: it cannot finish in its duration
        proc, started = start_child(runner, str(tmp_path / "a"), f"{site.base}/page/0", out,
                                    f"duration={duration}"), time.monotonic()
        ordinary = run_stats(runner, proc, out)
        baseline = time.monotonic() - started
    with TrickleSite("headers", interval=2.0, seconds=60.0) as hostile:
        job = str(tmp_path / "b")
        proc, started = start_child(runner, job, f"{hostile.base}/page/0", out,
                                    f"duration={duration}"), time.monotonic()
        stats = run_stats(runner, proc, out)
        elapsed = time.monotonic() - started
    print(f"\n{runner}(duration={duration}): an ordinary run took {baseline:.2f}s, one stuck in a robots.txt "
          f"sent a byte every 2s {elapsed:.2f}s (the process, start to exit)")
    assert ordinary["stopped_by"] == stats["stopped_by"] == "duration" and ordinary["done"] > 0
    # The documented bound: a run stops at once for robots.txt fetches (handlers have a grace, here
    # none runs): no later than an ordinary run's end, give or take that run's own time again.
    assert elapsed <= 2 * baseline
    assert hostile.asked >= 1 and stats["handled"] == 0 and stats["abandoned"] == 1
    assert [r.url for r in pending_requests(job)] == [f"{hostile.base}/page/0"]  # it came back


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_a_crawl_stuck_in_a_robots_txt_sent_a_byte_every_2s(tmp_path, sig):
    out = str(tmp_path / "out.json")
    with ordinary_site("crawl") as site:  # an ordinary run, signalled in the middle of its work
        proc = start_child("crawl", str(tmp_path / "a"), f"{site.base}/page/0", out)
        wait_until(lambda: sum(site.fetched().values()) >= 50, proc)
        proc.send_signal(sig)
        stopped = time.monotonic()
        ordinary = run_stats("crawl", proc, out)
        baseline = time.monotonic() - stopped
    with TrickleSite("body", interval=2.0, seconds=60.0) as hostile:
        job = str(tmp_path / "b")
        proc = start_child("crawl", job, f"{hostile.base}/page/0", out)
        wait_until(lambda: hostile.asked >= 1, proc)
        proc.send_signal(sig)
        stopped = time.monotonic()
        stats = run_stats("crawl", proc, out)
        elapsed = time.monotonic() - stopped
    print(f"\n{sig.name}: an ordinary crawl() child ended {baseline:.2f}s after it, one stuck in a robots.txt "
          f"sent a byte every 2s {elapsed:.2f}s after it")
    assert ordinary["stopped_by"] == stats["stopped_by"] == sig.name and ordinary["done"] >= 50
    assert elapsed <= baseline + GRACE  # the documented bound of a stop
    assert stats["abandoned"] == 1 and [r.url for r in pending_requests(job)] == [f"{hostile.base}/page/0"]


# ------------------------------------------------------------------ in this process: fetches and handlers that hang
@pytest.mark.parametrize("runner", ["crawl", "acrawl"])
def test_a_stop_does_not_wait_for_a_fetch_robots_that_hangs(tmp_path, runner):
    duration, release = 1.0, threading.Event()

    def hang(url: str, user_agent: str) -> tuple[int, bytes]:
        release.wait()
        return 404, b""

    async def ahang(url: str, user_agent: str) -> tuple[int, bytes]:
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):  # swallowed: the run must not wait for it anyway
                await asyncio.sleep(0.05)
        return 404, b""

    baseline = ordinary_run(tmp_path, runner, duration)
    frontier = Frontier(tmp_path / "job")
    frontier.push(Request("https://hangs.example/"))
    options: dict[str, Any] = {"robots": True, "user_agent": "testbot", "duration": duration, "progress": False}
    if runner == "crawl":
        thread, box = in_thread(lambda: crawl(frontier, lambda r, f: None, fetch_robots=hang, **options))
    else:
        async def handle(request: Request, f: Any) -> None:
            pass

        async def main() -> Any:
            started = time.monotonic()
            stats = await acrawl(frontier, handle, fetch_robots=ahang, **options)
            box["acrawl"] = time.monotonic() - started  # asyncio.run() itself ends with the fetch's task
            return stats

        thread, box = in_thread(lambda: asyncio.run(main()))
    try:
        thread.join(baseline + GRACE)
        seconds = box.get("acrawl", box.get("seconds"))
        assert seconds is not None, f"{runner}() still runs {baseline + GRACE:.1f}s later"
        assert seconds <= 2 * baseline  # the documented bound: robots.txt fetches are not waited for
    finally:
        release.set()
        thread.join(60)
    stats = box["result"]
    assert stats.stopped_by == "duration" and stats.handled == 0 and stats.abandoned == 1
    assert frontier.stats()["in_flight"] == 1
    frontier.close()
    assert [r.url for r in pending_requests(str(tmp_path / "job"))] == ["https://hangs.example/"]


@pytest.mark.parametrize("runner", ["crawl", "crawl-async", "acrawl"])
def test_a_handler_past_its_grace_is_left_behind_and_its_request_comes_back(tmp_path, runner):
    duration, grace, release = 0.5, 1.0, threading.Event()
    returned: list[str] = []

    def stuck(request: Request, frontier: Any) -> None:
        if "stuck" in request.url:
            release.wait()
        returned.append(request.url)

    async def astuck(request: Request, frontier: Any) -> None:
        if "stuck" in request.url:
            while not release.is_set():
                await asyncio.sleep(0.05)  # cancelled at the end of the grace
        returned.append(request.url)

    baseline = ordinary_run(tmp_path, runner, duration, grace=grace)
    frontier = Frontier(tmp_path / "job")
    frontier.push_many([Request("https://a.example/stuck"), Request("https://a.example/fine")])
    if runner == "acrawl":
        thread, box = in_thread(lambda: asyncio.run(acrawl(frontier, astuck, workers=2, duration=duration,
                                                           grace=grace, progress=False)))
    else:
        handler = stuck if runner == "crawl" else astuck
        thread, box = in_thread(lambda: crawl(frontier, handler, workers=2, duration=duration, grace=grace,
                                              progress=False))
    try:
        thread.join(baseline + grace + GRACE)
        assert "seconds" in box, f"{runner} still runs {baseline + grace + GRACE:.1f}s later"
        # the documented bound: the stop, then the grace (give or take an ordinary run's own time again)
        assert box["seconds"] <= 2 * baseline + grace
        stats = box["result"]
        assert stats.stopped_by == "duration" and stats.done == 1 and stats.abandoned == 1
        assert returned == ["https://a.example/fine"]
    finally:
        release.set()
    time.sleep(0.2)  # a thread left behind returns from its handler now: the run does not acknowledge it
    assert frontier.stats()["done"] == 1 and [r.url for r in frontier.in_flight] == ["https://a.example/stuck"]
    frontier.close()
    assert [r.url for r in pending_requests(str(tmp_path / "job"))] == ["https://a.example/stuck"]


@pytest.mark.slow
def test_a_stop_leaves_a_stuck_handler_behind_after_the_default_grace(tmp_path):
    duration, release = 0.5, threading.Event()
    baseline = ordinary_run(tmp_path, "crawl", duration)
    frontier = Frontier(tmp_path / "job")
    frontier.push(Request("https://a.example/stuck"))
    thread, box = in_thread(lambda: crawl(frontier, lambda r, f: release.wait(), duration=duration, progress=False))
    try:
        thread.join(baseline + 2 * GRACE)
        assert "seconds" in box, f"crawl() still runs {baseline + 2 * GRACE:.1f}s later"
        assert box["seconds"] <= 2 * baseline + GRACE  # the documented bound: the stop, then the grace
        assert box["result"].abandoned == 1 and frontier.stats()["in_flight"] == 1
    finally:
        release.set()
        frontier.close()
    assert [r.url for r in pending_requests(str(tmp_path / "job"))] == ["https://a.example/stuck"]


def test_acrawl_leaves_a_handler_that_swallows_its_cancellation(tmp_path):
    duration, grace, release = 0.3, 0.5, threading.Event()

    async def deaf(request: Request, frontier: Any) -> None:
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.05)

    async def main() -> tuple[Any, float]:
        async with AsyncFrontier(tmp_path / "job") as frontier:
            await frontier.push(Request("https://a.example/deaf"))
            started = time.monotonic()
            stats = await acrawl(frontier, deaf, workers=1, duration=duration, grace=grace, progress=False)
            seconds = time.monotonic() - started
            release.set()  # the handler left running in this loop ends now
            return stats, seconds

    baseline = ordinary_run(tmp_path, "acrawl", duration, grace=grace)
    thread, box = in_thread(lambda: asyncio.run(main()))
    thread.join(baseline + grace + GRACE)
    release.set()
    assert "result" in box, "acrawl() waited for a handler that never ends"
    stats, seconds = box["result"]
    # the documented bound: the grace, then one second for the cancelled handlers to end
    assert seconds <= 2 * baseline + grace + CANCEL_WAIT
    assert stats.stopped_by == "duration" and stats.abandoned == 1
    assert [r.url for r in pending_requests(str(tmp_path / "job"))] == ["https://a.example/deaf"]


def test_over_redis_a_handler_left_behind_is_given_back_at_close(tmp_path, redis_url, crawl_name):
    from diskfrontier import RedisFrontier

    check_handler_left_behind_given_back(tmp_path, lambda **settings: RedisFrontier(redis_url, crawl=crawl_name,
                                                                                     **settings))
