"""Run real Scrapy crawls (scrapy_child.py) of the synthetic site, stop or kill them, and read the results."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

import scrapy

from diskfrontier.jobdir.reader import pending_requests
from diskfrontier.run.demo import MultiHostSite, SyntheticSite

CHILD = os.path.join(os.path.dirname(__file__), "scrapy_child.py")
CONCURRENCY = 8


def start_crawl(jobdir: str, site: SyntheticSite | MultiHostSite, scheduler: str, stats_path: str,
                *settings: str) -> subprocess.Popen:
    """Start a crawl of ``site`` into ``jobdir`` with ``scheduler`` ("diskfrontier" or "scrapy")."""
    args = [sys.executable, CHILD, jobdir, site.base, scheduler, stats_path,
            f"CONCURRENT_REQUESTS={CONCURRENCY}", *settings]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen, timeout: float = 120) -> str:
    """Wait for a crawl to end; return its log (stderr)."""
    _, err = proc.communicate(timeout=timeout)
    return err.decode(errors="replace")


def stop_after(proc: subprocess.Popen, site: SyntheticSite, pages: int, sig: int, timeout: float = 60,
               stall: float | None = None) -> str:
    """Send ``sig`` once ``pages`` distinct pages of the site have been fetched; return the crawl's log.

    With ``stall`` (seconds), a crawl that ends, or fetches nothing new for that long,
    before reaching ``pages`` is stopped and its log returned; without, that is an error.
    """
    deadline = time.monotonic() + timeout
    last, progress_at = len(site.fetched()), time.monotonic()
    while (now := len(site.fetched())) < pages:
        if now != last:
            last, progress_at = now, time.monotonic()
        stalled = stall is not None and time.monotonic() - progress_at > stall
        if proc.poll() is not None or stalled:
            log = finish(proc) if proc.poll() is not None else ""
            if stall is not None:
                proc.kill()
                return log + finish(proc)
            raise AssertionError(f"the crawl ended before {pages} pages: {log[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the crawl did not reach {pages} pages in {timeout}s")
        time.sleep(0.001)
    proc.send_signal(sig)
    return finish(proc)


def pending_paths(jobdir: str) -> set[str]:
    """The paths of the requests a diskfrontier job directory still holds (read-only)."""
    return {urlsplit(request.url).path for request in pending_requests(jobdir)}


def settled_fetches(site, quiet: float = 0.3, longest: float = 10.0) -> Counter:
    """The site's fetch counts once no fetch came in for ``quiet`` seconds: a request the killed crawler
    sent just before its end may reach the site (be accepted from the backlog and counted) a little
    after it."""
    last = site.fetched()
    deadline = time.monotonic() + longest
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = site.fetched()
        if now == last:
            break
        last = now
    return last


def read_stats(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


@dataclass
class KillRun:
    """What a crawl killed several times and then run to its end did."""

    scheduler: str
    pages: int
    kills: int = 0
    in_flight_at_kills: list[int] = field(default_factory=list)
    fetches: Counter = field(default_factory=Counter)
    final_returncode: int | None = None
    final_stats: dict = field(default_factory=dict)
    final_log: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def never_fetched(self) -> int:
        return self.pages - sum(1 for n in range(self.pages) if self.fetches[f"/page/{n}"])

    @property
    def refetched(self) -> int:
        return sum(count - 1 for count in self.fetches.values())


def _note(log: str, when: str) -> str | None:
    if "struct.error" in log:
        return f"{when}: its queue failed with struct.error (a stale queue header, scrapy#3333) and the crawl stalled"
    return None


def crawl_with_kills(tmp_path, scheduler: str, pages: int, kill_at: list[int], sig: int = signal.SIGKILL,
                     delay: float = 0.02, stall: float | None = None, site=None, settings: tuple = ()) -> KillRun:
    """Crawl a site of ``pages`` pages, stopping with ``sig`` when each of ``kill_at`` pages were
    fetched, then run the crawl once more to its end.

    ``stall``: for a scheduler that is measured, not trusted: a run that stops making
    progress is stopped after that many seconds, and noted, instead of failing the test.
    ``site``: a site to crawl instead of a ``SyntheticSite`` (not started yet);
    ``settings``: more ``NAME=VALUE`` Scrapy settings.
    """
    jobdir = str(tmp_path / f"job-{scheduler}")
    stats_path = str(tmp_path / f"stats-{scheduler}.json")
    run = KillRun(scheduler, pages)
    with site or SyntheticSite(pages, delay=delay) as site:
        for number, threshold in enumerate(kill_at, 1):
            proc = start_crawl(jobdir, site, scheduler, stats_path, *settings)
            log = stop_after(proc, site, threshold, sig, stall=stall)
            run.kills += 1
            if len(site.fetched()) < threshold:
                reached = len(site.fetched())
                if proc.returncode == 0:
                    run.notes.append(f"run {number} ended on its own at {reached} pages: its queue came back empty")
                else:
                    run.notes.append(_note(log, f"run {number}") or f"run {number} stalled at {reached} pages")
            if scheduler == "diskfrontier":
                # fetched at least once, and not done: these are fetched again after the resume
                fetched = set(settled_fetches(site))
                run.in_flight_at_kills.append(len(fetched & pending_paths(jobdir)))
        if os.path.exists(stats_path):
            os.unlink(stats_path)
        proc = start_crawl(jobdir, site, scheduler, stats_path, *settings)
        if stall is None:
            run.final_log = finish(proc)
        else:
            run.final_log = stop_after(proc, site, pages + 1, signal.SIGKILL, stall=stall)  # until it stops
            note = _note(run.final_log, "the last run")
            if note:
                run.notes.append(note)
        run.final_returncode = proc.returncode
        run.fetches = site.fetched()
    if os.path.exists(stats_path):
        run.final_stats = read_stats(stats_path)
    return run


class ShopSpider(scrapy.Spider):
    """A spider with a default callback, a callback with an argument and an errback (scheduler tests)."""

    name = "shop"

    def parse(self, response):
        pass

    def parse_item(self, response, sku=None):
        pass

    def failed(self, failure):
        pass


class _Schedules(Protocol):
    def next_request(self) -> scrapy.Request | None: ...


def next_of(scheduler: _Schedules) -> scrapy.Request:
    """``scheduler.next_request()`` where the test has made a request ready: a Request, never None."""
    request = scheduler.next_request()
    assert request is not None, "the scheduler had no request ready"
    return request
