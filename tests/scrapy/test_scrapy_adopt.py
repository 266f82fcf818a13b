"""Taking over a JOBDIR of Scrapy's own scheduler: ``diskfrontier adopt-scrapy``."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from queuelib import FifoDiskQueue, LifoDiskQueue
from scrapykit import CHILD, finish, read_stats, start_crawl, stop_after

from diskfrontier import Frontier, Request, ScrapyQueueFound
from diskfrontier.cli import main
from diskfrontier.run.demo import SyntheticSite
from diskfrontier.scrapyfiles.adopted import NOTE
from diskfrontier.transfer.adopt import MARKER, adopt_scrapy

SCRIPT = [os.path.join(os.path.dirname(sys.executable), "diskfrontier")]


def _entry(url, **fields):
    data = {"url": url, "callback": "parse", "errback": None, "headers": {}, "method": "GET", "body": b"",
            "cookies": {}, "meta": {}, "encoding": "utf-8", "priority": 0, "dont_filter": False, "flags": [],
            "cb_kwargs": {}}
    data.update(fields)
    return pickle.dumps(data, protocol=4)


def scrapy_jobdir(path, *, closed=True):
    """A JOBDIR as Scrapy's scheduler leaves it: seen file, LIFO queues per priority, a FIFO start queue."""
    queue_dir = path / "requests.queue"
    queue_dir.mkdir(parents=True)
    seen = [Request(f"https://shop.example/{n}").fingerprint for n in range(6)]
    (path / "requests.seen").write_bytes(b"".join(len(fp).to_bytes(2, "big") + fp for fp in seen))
    high = LifoDiskQueue(str(queue_dir / "-5"))  # priority 5
    for n in (1, 2):
        high.push(_entry(f"https://shop.example/{n}", priority=5, meta={"jar": ("a", 1)}))
    low = LifoDiskQueue(str(queue_dir / "0"))
    for n in (3, 4):
        low.push(_entry(f"https://shop.example/{n}", cb_kwargs={"n": n}))
    start = FifoDiskQueue(str(queue_dir / "0s"))
    start.push(_entry("https://shop.example/0", dont_filter=True, meta={"is_start_request": True}))
    if closed:
        for queue in (high, low, start):
            queue.close()
        (queue_dir / "active.json").write_text(json.dumps([-5, 0]))
    else:  # as after kill -9: no headers, no info.json, no active.json
        for queue in (high, low):
            queue.f.flush()
        start.headf.flush()
    # Scrapy's pop order: priority 5 LIFO (2, 1), then priority 0: its queue LIFO (4, 3), then the start queue
    return ["https://shop.example/2", "https://shop.example/1", "https://shop.example/4",
            "https://shop.example/3", "https://shop.example/0"]


def popped(path):
    with Frontier(path) as frontier:
        out = []
        while (request := frontier.pop()) is not None:
            out.append(request)
            frontier.done(request)
    return out


@pytest.mark.parametrize("closed", [True, False], ids=["paused-cleanly", "killed"])
def test_trusted_queue_is_imported_in_scrapys_pop_order(tmp_path, closed):
    job = tmp_path / "job"
    order = scrapy_jobdir(job, closed=closed)
    report = adopt_scrapy(str(job), trust_pickle=True)
    assert report.imported == 5 and not report.skipped and report.seen == 6
    assert report.counted == (5 if closed else 0)  # headers are only written on a clean close
    got = popped(job)
    assert [r.url for r in got] == order
    assert got[0].meta["callback"] == "parse" and got[0].meta["meta"] == {"jar": ("a", 1)}
    assert got[2].meta["cb_kwargs"] == {"n": 4}


def test_without_trust_the_queue_is_set_aside_unread_and_seen_kept(tmp_path):
    job = tmp_path / "job"
    scrapy_jobdir(job)
    with pytest.raises(ScrapyQueueFound, match="adopt-scrapy"):
        Frontier(job)
    result = CliRunner().invoke(main, ["adopt-scrapy", str(job)])
    assert result.exit_code == 0, result.output
    assert "6 seen fingerprints kept" in result.output and "5 requests by their headers" in result.output
    assert "--trust-pickle" in result.output and "will not be crawled" in result.output
    with Frontier(job) as frontier:
        assert len(frontier) == 0 and not frontier.push(Request("https://shop.example/3"))
    # importing later, from the set-aside queue
    result = CliRunner().invoke(main, ["adopt-scrapy", str(job), "--trust-pickle", "--json"])
    assert result.exit_code == 0 and "unpickling runs" in result.stderr
    assert json.loads(result.stdout)["imported"] == 5
    assert CliRunner().invoke(main, ["adopt-scrapy", str(job)]).exit_code == 1  # nothing left to adopt


def test_an_interrupted_import_carries_on_where_it_stopped(tmp_path):
    job = tmp_path / "job"
    scrapy_jobdir(job)
    adopt_scrapy(str(job))  # set aside
    aside = next(p for p in job.iterdir() if p.name.startswith("requests.queue.scrapy-"))
    with Frontier(job) as frontier:  # as if a first import got its first batch (priority 5) in before a kill
        frontier.push_many([Request(f"https://shop.example/{n}", priority=5, dont_filter=True) for n in (1, 2)])
    (aside / MARKER).write_text(json.dumps({"imported": 2, "finished": False}))
    report = adopt_scrapy(str(job), trust_pickle=True)
    assert report.earlier == 2 and report.imported == 3
    assert sorted(r.url for r in popped(job)) == sorted(f"https://shop.example/{n}" for n in range(5))


def test_a_damaged_entry_is_skipped_and_named(tmp_path):
    job = tmp_path / "job"
    scrapy_jobdir(job)
    queue = LifoDiskQueue(str(job / "requests.queue" / "-7"))
    queue.push(b"\x80\x04not a pickle")
    queue.close()
    result = CliRunner().invoke(main, ["adopt-scrapy", str(job), "--trust-pickle"])
    assert result.exit_code == 1
    assert "skipped: " in result.stderr and "-7 entry 0: cannot be unpickled" in result.stderr
    assert len(popped(job)) == 5


def test_a_finished_scrapy_crawl_needs_no_adoption(tmp_path):
    job = tmp_path / "job"
    (job / "requests.queue").mkdir(parents=True)
    (job / "requests.queue" / "active.json").write_text("[]")
    with Frontier(job) as frontier:
        assert frontier.push(Request("https://shop.example/"))


def test_not_a_scrapy_jobdir(tmp_path):
    result = CliRunner().invoke(main, ["adopt-scrapy", str(tmp_path)])
    assert result.exit_code == 1 and "not a Scrapy JOBDIR" in result.output


def scrapy_runspider(job, base, *settings):
    """``scrapy runspider`` of the test site's spider with the diskfrontier scheduler (Scrapy's own command,
    with its exit status)."""
    args = [sys.executable, "-m", "scrapy", "runspider", CHILD, "-a", f"base={base}", "-s", f"JOBDIR={job}",
            "-s", "SCHEDULER=diskfrontier.scrapy.Scheduler", "-s", "TELNETCONSOLE_ENABLED=0"]
    for setting in settings:
        args += ["-s", setting]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def test_a_crawl_on_scrapys_own_jobdir_stops_with_one_message_and_exit_status_1(tmp_path):
    job = tmp_path / "job"
    scrapy_jobdir(job)
    with SyntheticSite(10) as site:
        run = scrapy_runspider(job, site.base)
        fetched = site.fetched()
    errors = [line for line in run.stderr.splitlines() if " ERROR: " in line or " CRITICAL: " in line]
    assert run.returncode == 1, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert len(errors) == 1 and f"diskfrontier adopt-scrapy {job}" in errors[0] and "new JOBDIR" in errors[0]
    assert "Spider closed (diskfrontier_cannot_open)" in run.stderr
    assert not fetched and not (job / "frontier.json").exists()
    print(f"\n{errors[0]}\nexit status {run.returncode}")


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["paused", "killed"])
def test_a_real_scrapy_crawl_is_taken_over_and_finished(tmp_path, sig):
    pages = 300
    job = str(tmp_path / "job")
    stats_path = str(tmp_path / "stats.json")
    start = "start=/page/00"  # page 0 at a URL no page links to: only the start request fetches it
    with SyntheticSite(pages, delay=0.02) as site:
        stop_after(start_crawl(job, site, "scrapy", stats_path, start), site, 100, sig)
        before = len(site.fetched())
        assert site.fetched()["/page/00"] == 1
        refused = finish(start_crawl(job, site, "diskfrontier", stats_path, start))
        assert "adopt-scrapy" in refused and "Traceback" not in refused
        assert len(site.fetched()) == before
        adopted = subprocess.run([*SCRIPT, "adopt-scrapy", job, "--trust-pickle", "--json"],
                                 capture_output=True, text=True, timeout=60)
        report = json.loads(adopted.stdout)
        assert report["imported"] > 0, adopted.stderr
        assert os.path.exists(os.path.join(job, NOTE))
        proc = start_crawl(job, site, "diskfrontier", stats_path, start)
        log = finish(proc)
        fetches = site.fetched()
        assert not os.path.exists(os.path.join(job, NOTE))  # the first run after adoption has closed
        finish(start_crawl(job, site, "diskfrontier", stats_path, start))  # and a later run: start URL seen
        after_rerun = site.fetched()
    assert proc.returncode == 0, log[-3000:]
    assert read_stats(stats_path)["finish_reason"] == "finished"
    reached = sum(1 for n in range(pages) if fetches[f"/page/{n}"])
    print(f"\nScrapy {'paused' if sig == signal.SIGINT else 'killed'} at {before} pages; adopt-scrapy imported "
          f"{report['imported']} requests; after the resume {reached} of {pages} pages fetched; the start URL "
          f"fetched {after_rerun['/page/00']} time(s) in all")
    assert after_rerun["/page/00"] == 1 and after_rerun == fetches
    if sig == signal.SIGINT:  # a clean pause loses nothing, and nothing is fetched twice...
        assert reached == pages
        # ...but the pages Scrapy's queue held twice: a page that links to /page/0 before
        # Scrapy fetched it from its queue
        assert {path for path, n in fetches.items() if n > 1} <= {"/page/0"}
    else:  # what Scrapy had not written (its seen file's buffer, requests in flight) is beyond recovery
        assert reached > before


@pytest.fixture(scope="module")
def big_scrapy_jobdir(tmp_path_factory):
    """A Scrapy JOBDIR with 60,000 pending requests in three priorities (six import batches)."""
    path = tmp_path_factory.mktemp("big") / "job"
    (path / "requests.queue").mkdir(parents=True)
    (path / "requests.seen").write_bytes(b"")
    urls = []
    for key in ("0", "-1", "-2"):
        queue = LifoDiskQueue(str(path / "requests.queue" / key))
        for n in range(20_000):
            url = f"https://shop.example/p{key}/{n}"
            queue.push(_entry(url, priority=-int(key)))
            urls.append(url)
        queue.close()
    (path / "requests.queue" / "active.json").write_text("[0, -1, -2]")
    return path, urls


def _aside_state(job):
    asides = [p for p in job.iterdir() if p.name.startswith("requests.queue.scrapy-")]
    if not asides:
        return None
    marker = asides[0] / MARKER
    try:
        return json.loads(marker.read_text()) if marker.exists() else {}
    except ValueError:  # caught mid-rename
        return None


MOMENTS = {
    "queue-just-set-aside": lambda state: state is not None,
    "some-batches-in": lambda state: bool(state) and 0 < state["imported"] < 60_000 and not state["finished"],
}


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.parametrize("moment", list(MOMENTS))
def test_adopt_killed_mid_import_loses_nothing_when_run_again(tmp_path, big_scrapy_jobdir, moment):
    source, urls = big_scrapy_jobdir
    job = tmp_path / "job"
    shutil.copytree(source, job)
    proc = subprocess.Popen([*SCRIPT, "adopt-scrapy", str(job), "--trust-pickle"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not MOMENTS[moment](_aside_state(job)):
        assert proc.poll() is None, f"adopt-scrapy finished before {moment!r}"
        assert time.monotonic() < deadline
        time.sleep(0.0002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    again = subprocess.run([*SCRIPT, "adopt-scrapy", str(job), "--trust-pickle", "--json"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    got = [r.url for r in popped(job)]
    assert set(got) == set(urls), f"{len(set(urls) - set(got))} requests lost"
    # at most the batch the kill cut between its journal write and its progress mark comes twice
    assert len(got) - len(urls) <= 10_000
    print(f"\n{moment}: {json.loads(again.stdout)['earlier']} imported before the kill, "
          f"{len(got) - len(urls)} queued twice")
