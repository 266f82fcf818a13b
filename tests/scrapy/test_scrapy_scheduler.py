"""diskfrontier.scrapy.Scheduler in one process, without a running crawl.

Behaviour tests run twice, like Scrapy's own scheduler suite: straight through, and with
the scheduler closed and a new one opened on the same JOBDIR between steps. Completion is
checked here against a stand-in for the engine's in-progress set; tests/test_scrapy_crawl.py
checks it against the real engine.
"""

from __future__ import annotations

import logging
import os
import types

import pytest
import scrapy
from hypothesis import given, settings
from hypothesis import strategies as st
from popkit import take
from scrapy.crawler import Crawler
from scrapy.http import FormRequest, JsonRequest
from scrapy.utils.request import RequestFingerprinter
from scrapy.utils.test import get_crawler
from scrapykit import ShopSpider, next_of
from urlstrategies import urls

from diskfrontier import Frontier, ScrapyQueueFound
from diskfrontier.scrapy import Scheduler
from diskfrontier.scrapy.scheduler import default_fingerprint, fingerprint_function
from diskfrontier.scrapyfiles import records as scrapy_records


class Session:
    """A scheduler on a JOBDIR; with reopen=True each step() closes it and opens a new one."""

    def __init__(self, jobdir, reopen: bool, **settings):
        self.jobdir, self.reopen, self.settings = jobdir, reopen, settings
        self.crawler: Crawler
        self.spider: ShopSpider
        self.scheduler: Scheduler
        self.open()

    def open(self):
        self.crawler = get_crawler(ShopSpider, {"JOBDIR": str(self.jobdir), **self.settings})
        self.spider = ShopSpider()
        self.scheduler = Scheduler.from_crawler(self.crawler)
        self.scheduler.open(self.spider)
        return self.scheduler

    @property
    def frontier(self) -> Frontier:
        """The scheduler's frontier: the job directory's."""
        frontier = self.scheduler.frontier
        assert isinstance(frontier, Frontier)
        return frontier

    def step(self):
        if self.reopen:
            self.scheduler.close("shutdown")
            self.open()
        return self.scheduler

    def stats(self):
        self.scheduler._flush_counts()  # counters reach the stats collector in batches
        return self.crawler.stats.get_stats()

    def close(self):
        self.scheduler.close("finished")


@pytest.fixture(params=[False, True], ids=["same-run", "reopen"])
def session(request, tmp_path):
    s = Session(tmp_path / "job", request.param)
    yield s
    s.close()


def drain(scheduler):
    out = []
    while (request := scheduler.next_request()) is not None:
        out.append(request)
    return out


def test_priority_then_lifo_order_across_reopen(session):
    s = session.scheduler
    for i, priority in enumerate([0, 5, 0, -3, 5]):
        assert s.enqueue_request(scrapy.Request(f"https://shop.example/{i}", priority=priority))
    s = session.step()
    assert len(s) == 5 and s.has_pending_requests()
    assert [r.url.rsplit("/", 1)[1] for r in drain(s)] == ["4", "1", "2", "0", "3"]
    assert not s.has_pending_requests()


@pytest.mark.parametrize("settings", [
    {"DISKFRONTIER_ORDER": "fifo"},
    {"SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue"},
], ids=["explicit", "from-SCHEDULER_DISK_QUEUE"])
def test_fifo_order(tmp_path, settings):
    s = Session(tmp_path / "job", True, **settings)
    for i in range(4):
        s.scheduler.enqueue_request(scrapy.Request(f"https://shop.example/{i}"))
    assert [r.url[-1] for r in drain(s.step())] == ["0", "1", "2", "3"]
    s.close()


def test_duplicates_filtered_across_reopen_and_dont_filter_honoured(session):
    s = session.scheduler
    assert s.enqueue_request(scrapy.Request("https://shop.example/a?x=1&y=2"))
    s = session.step()
    assert not s.enqueue_request(scrapy.Request("https://shop.example/a?y=2&x=1"))  # same canonical URL
    assert s.enqueue_request(scrapy.Request("https://shop.example/a?x=1&y=2", dont_filter=True))
    assert session.stats()["dupefilter/filtered"] == 1
    assert len(session.step()) == 2


def test_every_field_of_a_request_round_trips(session):
    spider = session.spider
    original = scrapy.Request(
        "https://shop.example/item/7", callback=spider.parse_item, errback=spider.failed, method="PUT",
        headers={"X-Token": "abc", "Accept": ["a", "b"]}, body=b"\x00payload", cookies={"session": "s1"},
        meta={"depth": 2, "cookiejar": ("shop", 1), "tags": {"new"}, "raw": b"\xff"}, encoding="latin-1",
        priority=2**40, flags=["seed"], cb_kwargs={"sku": "A-7"},
    )
    assert session.scheduler.enqueue_request(original)
    got = session.step().next_request()
    spider = session.spider  # after a reopen, callbacks bind to the new spider
    assert got.url == original.url and got.method == "PUT" and got.body == b"\x00payload"
    assert got.callback == spider.parse_item and got.errback == spider.failed
    assert got.headers.getlist("Accept") == [b"a", b"b"] and got.headers["X-Token"] == b"abc"
    assert got.cookies == {"session": "s1"} and got.encoding == "latin-1" and got.flags == ["seed"]
    assert got.meta == original.meta and type(got.meta["cookiejar"]) is tuple
    assert got.priority == 2**40 and got.cb_kwargs == {"sku": "A-7"}


def test_request_subclasses_come_back_as_themselves(session):
    s = session.scheduler
    s.enqueue_request(FormRequest("https://shop.example/search", formdata={"q": "red"}, callback=session.spider.parse))
    s.enqueue_request(JsonRequest("https://shop.example/api", data={"q": 1}, dumps_kwargs={"sort_keys": True}))
    got = {type(r): r for r in drain(session.step())}
    assert got[FormRequest].body == b"q=red" and got[FormRequest].method == "POST"
    assert got[JsonRequest].body == b'{"q": 1}' and got[JsonRequest].dumps_kwargs == {"sort_keys": True}


def test_unserializable_requests_stay_in_memory_counted_and_logged_once_per_kind(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="diskfrontier")
    s = Session(tmp_path / "job", False)
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/disk", priority=1))
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/lambda", priority=5,
                                               callback=lambda r, *args, **kwargs: None))
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/object", meta={"x": object()}))
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/later", callback=lambda r, *args, **kwargs: None))
    stats = s.stats()
    assert stats["scheduler/unserializable"] == 3 and stats["scheduler/enqueued/memory"] == 3
    assert stats["scheduler/enqueued/disk"] == 1 and stats["scheduler/enqueued"] == 4
    assert stats["diskfrontier/unstorable/callback"] == 2 and stats["diskfrontier/unstorable/object"] == 1
    warnings = [r.message for r in caplog.records if "Unable to serialize" in r.message]
    assert len(warnings) == 2, warnings  # one for each kind
    assert "is not a method of the spider" in warnings[0] and "unstorable/callback" in warnings[0]
    assert "'object'" in warnings[1] and "unstorable/object" in warnings[1]
    first = next_of(s.scheduler)
    assert first.url.endswith("/lambda") and callable(first.callback)
    assert first.callback(None) is None  # type: ignore[arg-type]  # the live request, callback and all
    assert s.stats()["scheduler/dequeued/memory"] == 1
    s.scheduler.close("shutdown")
    assert s.stats()["diskfrontier/memory_lost"] == 3  # two waiting, one handed out and never finished
    s.open()
    assert [r.url.rsplit("/", 1)[1] for r in drain(s.scheduler)] == ["disk"]
    s.close()


def test_requests_beyond_the_limits_stay_in_memory(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="diskfrontier")
    monkeypatch.setattr(scrapy_records, "MAX_BODY_BYTES", 10)  # as if a body of 64 MiB + 1 byte
    s = Session(tmp_path / "job", False)
    size = s.frontier.stats()["journal_bytes"]
    deep: object = ()
    for _ in range(100):
        deep = (deep,)
    assert s.scheduler.enqueue_request(scrapy.Request("https://shop.example/big", method="POST", body=b"x" * 11))
    assert s.scheduler.enqueue_request(scrapy.Request("https://shop.example/deep", meta={"x": deep}))
    stats = s.stats()
    assert stats["scheduler/unserializable"] == 2 and stats["scheduler/enqueued/memory"] == 2
    assert s.frontier.stats()["journal_bytes"] == size
    assert any("MAX_BODY_BYTES" in r.getMessage() for r in caplog.records)
    assert sorted(r.url for r in drain(s.scheduler)) == ["https://shop.example/big", "https://shop.example/deep"]
    s.close()


class QueryBlindFingerprinter:
    """A REQUEST_FINGERPRINTER_CLASS that ignores the query string."""

    def fingerprint(self, request):
        import hashlib

        return hashlib.sha1(request.url.split("?")[0].encode(), usedforsecurity=False).digest()


def test_request_fingerprinter_class_is_honoured(tmp_path):
    path = f"{__name__}.QueryBlindFingerprinter"
    s = Session(tmp_path / "job", True, REQUEST_FINGERPRINTER_CLASS=path)
    assert s.scheduler.enqueue_request(scrapy.Request("https://shop.example/list?page=1"))
    assert not s.step().enqueue_request(scrapy.Request("https://shop.example/list?page=2"))
    s.close()


def _start(url, **kwargs):
    return scrapy.Request(url, dont_filter=True, meta={"is_start_request": True}, **kwargs)


@pytest.mark.parametrize("policy,resumed_queues", [("dedupe", ["new"]), ("skip", []), ("keep", ["seed", "new"])])
def test_start_requests_on_resume(tmp_path, policy, resumed_queues):
    s = Session(tmp_path / "job", True, DISKFRONTIER_START_REQUESTS=policy)
    assert s.scheduler.enqueue_request(_start("https://shop.example/seed"))
    assert s.scheduler.enqueue_request(_start("https://shop.example/seed"))  # first run: dont_filter as usual
    assert len(drain(s.scheduler)) == 2
    scheduler = s.step()  # a resumed crawl: Scrapy issues its start requests again
    queued = [url for url in ("seed", "new") if scheduler.enqueue_request(_start(f"https://shop.example/{url}"))]
    assert queued == resumed_queues
    retry = _start("https://shop.example/seed")
    retry.meta["retry_times"] = 1  # a retry of a start request is not a start request
    assert scheduler.enqueue_request(retry)
    s.close()


@pytest.mark.parametrize("name,value", [("DISKFRONTIER_START_REQUESTS", "again"), ("DISKFRONTIER_ORDER", "random")])
def test_bad_settings_are_named(tmp_path, name, value):
    crawler = get_crawler(ShopSpider, {"JOBDIR": str(tmp_path / "job"), name: value})
    with pytest.raises(ValueError, match=name):
        Scheduler.from_crawler(crawler)


def _stand_in_engine(crawler, in_progress):
    crawler.engine = types.SimpleNamespace(_slot=types.SimpleNamespace(inprogress=in_progress))


def test_done_once_the_engine_has_finished_with_a_request(tmp_path):
    s = Session(tmp_path / "job", False)
    in_progress: set = set()
    _stand_in_engine(s.crawler, in_progress)
    for i in range(3):
        s.scheduler.enqueue_request(scrapy.Request(f"https://shop.example/{i}"))
    a = next_of(s.scheduler)
    in_progress.add(a)  # what the engine does as it starts downloading
    b = next_of(s.scheduler)
    in_progress.add(b)
    assert s.stats().get("diskfrontier/done") is None
    in_progress.discard(a)  # the engine is finished with a: callback output scheduled, items processed
    assert s.scheduler.has_pending_requests()
    assert s.stats()["diskfrontier/done"] == 1
    s.scheduler.close("shutdown")  # b is still in the engine's hands: it goes back to the queue
    assert s.stats()["diskfrontier/requeued"] == 1
    s.open()
    assert sorted(r.url for r in drain(s.scheduler)) == sorted({b.url, "https://shop.example/0", "https://shop.example/1",
                                                               "https://shop.example/2"} - {a.url})
    s.close()


def test_without_the_engine_nothing_is_done_before_close_and_nothing_is_lost(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="diskfrontier")
    s = Session(tmp_path / "job", False)
    assert any("requests in progress" in r.message for r in caplog.records)
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/x"))
    s.scheduler.next_request()
    s.scheduler.close("shutdown")
    s.open()
    assert [r.url for r in drain(s.scheduler)] == ["https://shop.example/x"]
    s.close()


def test_a_jobdir_of_scrapys_own_scheduler_is_not_silently_taken_over(tmp_path, caplog):
    job = tmp_path / "job"
    (job / "requests.queue").mkdir(parents=True)
    (job / "requests.queue" / "0").write_bytes(b"\x00\x00\x00\x01" + b"pickled" + b"\x00\x00\x00\x07")
    with pytest.raises(ScrapyQueueFound, match="adopt-scrapy"):
        Frontier(job)
    s = Session(job, False)  # the scheduler logs the error and holds nothing; the spider is closed once open
    assert s.scheduler.frontier is None and not s.scheduler.has_pending_requests()
    assert s.stats()["diskfrontier/cannot_open"] == "ScrapyQueueFound"
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "adopt-scrapy" in errors[0] and "new JOBDIR" in errors[0]
    s.close()
    assert not (job / "frontier.json").exists()


def test_no_jobdir_uses_a_temporary_directory_removed_at_close(tmp_path):
    crawler = get_crawler(ShopSpider, {})
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.open(ShopSpider())
    assert isinstance(scheduler.frontier, Frontier)
    path = scheduler.frontier.path
    assert scheduler.enqueue_request(scrapy.Request("https://shop.example/"))
    assert os.path.isdir(path)
    scheduler.close("finished")
    assert not os.path.exists(path)


def test_a_request_whose_callback_is_gone_is_kept_for_a_later_run(tmp_path, caplog):
    s = Session(tmp_path / "job", False)
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/a", callback=s.spider.parse_item, priority=1))
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/b"))
    s.scheduler.close("shutdown")
    with Frontier(tmp_path / "job") as frontier:  # rename the callback, as a changed spider would
        stored = frontier.pop()
        assert stored is not None
        assert stored.meta["callback"] == "parse_item"
    s.open()
    s.scheduler._dicts.spider = types.SimpleNamespace(name="shop")  # type: ignore[assignment]  # a spider without parse_item
    assert [r.url for r in drain(s.scheduler)] == ["https://shop.example/b"]
    assert s.stats()["diskfrontier/undecodable"] == 1
    assert any("cannot rebuild https://shop.example/a" in r.message for r in caplog.records)
    s.scheduler.close("shutdown")
    with Frontier(tmp_path / "job") as frontier:
        assert [take(frontier).url] == ["https://shop.example/a"]


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(url=urls(), method=st.sampled_from(["GET", "POST", "PUT"]), body=st.binary(max_size=20))
def test_fast_default_fingerprint_is_scrapys(url, method, body):
    try:
        request = scrapy.Request(url, method=method, body=body)
    except ValueError:
        return
    try:
        expected = RequestFingerprinter().fingerprint(request)
    except ValueError:
        return
    assert default_fingerprint(request) == expected


def test_verbatim_url_requests_are_fingerprinted_by_scrapy():
    request = scrapy.Request("https://shop.example/b?z=1&a=2", meta={"verbatim_url": True})
    assert default_fingerprint(request) == RequestFingerprinter().fingerprint(request)
    assert default_fingerprint(request) != default_fingerprint(scrapy.Request(request.url))


def test_a_custom_fingerprinter_is_used_as_it_is(tmp_path):
    crawler = get_crawler(ShopSpider, {"REQUEST_FINGERPRINTER_CLASS": f"{__name__}.QueryBlindFingerprinter"})
    assert fingerprint_function(crawler) == crawler.request_fingerprinter.fingerprint
    assert fingerprint_function(get_crawler(ShopSpider, {})) is default_fingerprint


def test_fsync_setting_reaches_the_frontier(tmp_path):
    s = Session(tmp_path / "job", False, DISKFRONTIER_FSYNC=True)
    assert s.frontier.fsync is True
    s.close()


def test_an_explicit_order_that_clashes_with_the_directory_is_refused(tmp_path):
    Session(tmp_path / "job", False).close()  # created LIFO
    with pytest.raises(ValueError, match="created with order='lifo'"):
        Session(tmp_path / "job", False, DISKFRONTIER_ORDER="fifo")
    s = Session(tmp_path / "job", False, SCHEDULER_DISK_QUEUE="scrapy.squeues.PickleFifoDiskQueue")
    assert s.frontier.order == "lifo"  # a guess from the queue class never clashes
    s.close()


_DRIVEN_BY_HAND = """
import sys, time
import scrapy
from scrapy.utils.test import get_crawler
from diskfrontier import Frontier, RedisFrontier, Request
from diskfrontier.scrapy import Scheduler

class Plain(scrapy.Spider):
    name = "plain"

target, settings = sys.argv[1], {}
later = time.time() + 600
if target.startswith("redis://"):
    with RedisFrontier(target, crawl="plain") as frontier:
        frontier.push(Request("https://held.example/"), not_before=later)
    settings = {"DISKFRONTIER_URL": target, "DISKFRONTIER_CRAWL": "plain"}
else:
    with Frontier(target) as frontier:
        frontier.push(Request("https://held.example/"), not_before=later)
    settings = {"JOBDIR": target}
scheduler = Scheduler.from_crawler(get_crawler(Plain, settings))
scheduler.open(Plain())
assert scheduler.next_request() is None
assert scheduler.next_request() is None
scheduler.close("finished")
assert "twisted.internet.reactor" not in sys.modules
print("nothing ready, no error")
"""


@pytest.mark.parametrize("backend", ["jobdir", "redis"])
def test_a_scheduler_driven_by_hand_with_nothing_ready_returns_none(tmp_path, backend, request):
    """No engine and no event loop (a script or a benchmark driving the scheduler): when nothing is
    ready, next_request() returns None instead of failing to arrange a wake-up of an engine that
    does not exist."""
    import subprocess
    import sys

    target = request.getfixturevalue("redis_url") if backend == "redis" else str(tmp_path / "job")
    done = subprocess.run([sys.executable, "-c", _DRIVEN_BY_HAND, target], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "nothing ready, no error"
