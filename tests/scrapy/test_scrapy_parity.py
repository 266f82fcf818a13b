"""What Scrapy's scheduler does, the drop-in does: each test runs on Scrapy's own scheduler and on
``diskfrontier.scrapy.Scheduler``, on the same case, so the expected behaviour is Scrapy's.

The behaviours are those Scrapy's ``tests/test_scheduler.py`` checks (order, ``len``,
``has_pending_requests``, what ``enqueue_request`` returns, resuming, download slots), written
here anew, and what Scrapy's scheduler keeps that the drop-in used to drop: the values of meta
and cb_kwargs that msgpack has no type for, FIFO order from ``SCHEDULER_MEMORY_QUEUE``, its
``/memory`` stats without JOBDIR, its constructor, its refusal of ``CONCURRENT_REQUESTS_PER_IP``.

Each scheduler runs in three modes: without JOBDIR ("memory"), with JOBDIR ("jobdir"), and with
JOBDIR closed and opened again by a new crawler between enqueueing and dequeueing ("reopen", as
Scrapy's own suite does for its disk queues). Both are built as Scrapy's engine builds a scheduler
(``build_from_crawler``), on a crawler of ``get_crawler``, and use ``ScrapyPriorityQueue``
(the drop-in's ``"priority"`` rule) unless a test says otherwise.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import uuid
import zoneinfo

import pytest
import scrapy
from scrapy import signals
from scrapy.core.engine import ExecutionEngine
from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.test import get_crawler
from scrapykit import finish, start_crawl

from diskfrontier.run.demo import SyntheticSite

SCHEDULERS = {"Scrapy": "scrapy.core.scheduler.Scheduler", "drop-in": "diskfrontier.scrapy.Scheduler"}
MODES = ("memory", "jobdir", "reopen")
SPQ = "scrapy.pqueues.ScrapyPriorityQueue"
FIFO_DISK, FIFO_MEMORY = "scrapy.squeues.PickleFifoDiskQueue", "scrapy.squeues.FifoMemoryQueue"
URLS = ["http://foo.com/a", "http://foo.com/b", "http://foo.com/c"]
PRIORITIES = [("http://foo.com/a", -2), ("http://foo.com/d", 1), ("http://foo.com/b", -1), ("http://foo.com/c", 0),
              ("http://foo.com/e", 2)]


class ShopSpider(scrapy.Spider):
    name = "shop"

    def parse(self, response):
        pass

    def parse_item(self, response, **kwargs):
        pass


class Part(scrapy.Item):
    n = scrapy.Field()


class Product(scrapy.Item):
    sku = scrapy.Field()
    price = scrapy.Field()
    added = scrapy.Field()
    parts = scrapy.Field()


class Run:
    """One scheduler on one crawler, open; ``again()`` closes it and opens a new one on a new crawler
    and the same JOBDIR in mode "reopen", and gives back the same one otherwise."""

    def __init__(self, kind: str, mode: str, tmp_path, **settings):
        self.kind, self.mode = kind, mode
        self.settings = {"SCHEDULER_PRIORITY_QUEUE": SPQ, **settings}
        if mode != "memory":
            self.settings["JOBDIR"] = str(tmp_path / f"job-{kind}")
        self.scheduler = self.open()

    def open(self):
        self.crawler = get_crawler(ShopSpider, self.settings)
        self.spider = self.crawler.spider = ShopSpider.from_crawler(self.crawler)  # as Crawler.crawl sets it
        scheduler = build_from_crawler(load_object(SCHEDULERS[self.kind]), self.crawler)
        scheduler.open(self.spider)
        return scheduler

    def again(self):
        if self.mode == "reopen":
            self.scheduler.close("shutdown")
            self.scheduler = self.open()
        return self.scheduler

    def stats(self) -> dict:
        """The crawler's ``scheduler/`` and ``dupefilter/`` stats (the drop-in's own ``diskfrontier/`` left out)."""
        flush = getattr(self.scheduler, "_flush_counts", None)  # the drop-in hands counts over in batches
        if flush is not None:
            flush()
        return {k: v for k, v in self.crawler.stats.get_stats().items() if k.startswith(("scheduler/", "dupefilter/"))}

    @property
    def where(self) -> str:
        """Where Scrapy's scheduler keeps a request it can store: on disk with JOBDIR."""
        return "memory" if self.mode == "memory" else "disk"

    def drain(self) -> list[scrapy.Request]:
        out = []
        while self.scheduler.has_pending_requests():
            request = self.scheduler.next_request()
            assert request is not None
            out.append(request)
        return out


@pytest.fixture(params=[(kind, mode) for kind in SCHEDULERS for mode in MODES],
                ids=[f"{kind}-{mode}" for kind in SCHEDULERS for mode in MODES])
def case(request):
    return request.param


@pytest.fixture
def run(case: tuple[str, str], tmp_path):
    made = Run(*case, tmp_path)
    yield made
    made.scheduler.close("finished")


def test_length_and_pending(run):
    s = run.scheduler
    assert not s.has_pending_requests() and len(s) == 0 and s.next_request() is None
    assert [s.enqueue_request(scrapy.Request(url)) for url in URLS] == [True, True, True]
    s = run.again()
    assert s.has_pending_requests() and len(s) == len(URLS)


def test_every_request_comes_back_once(run):
    for url in URLS:
        run.scheduler.enqueue_request(scrapy.Request(url))
    run.again()
    assert sorted(r.url for r in run.drain()) == URLS
    s = run.scheduler
    assert s.next_request() is None and not s.has_pending_requests() and len(s) == 0


def test_highest_priority_first(run):
    for url, priority in PRIORITIES:
        run.scheduler.enqueue_request(scrapy.Request(url, priority=priority))
    run.again()
    assert [r.priority for r in run.drain()] == sorted((p for _, p in PRIORITIES), reverse=True)


QUEUES = {
    "default": {},
    "both FIFO": {"SCHEDULER_DISK_QUEUE": FIFO_DISK, "SCHEDULER_MEMORY_QUEUE": FIFO_MEMORY},
    "memory FIFO": {"SCHEDULER_MEMORY_QUEUE": FIFO_MEMORY},
    "disk FIFO": {"SCHEDULER_DISK_QUEUE": FIFO_DISK},
}


@pytest.mark.parametrize("queues", list(QUEUES))
def test_order_within_a_priority_is_that_of_the_queue_in_use(case: tuple[str, str], tmp_path, queues):
    """The queue class in use is SCHEDULER_DISK_QUEUE with JOBDIR, SCHEDULER_MEMORY_QUEUE without."""
    settings = QUEUES[queues]
    run = Run(*case, tmp_path, **settings)
    urls = [f"http://foo.com/{i}" for i in range(1, 5)]
    for url in urls:
        run.scheduler.enqueue_request(scrapy.Request(url))
    run.again()
    in_use = settings.get("SCHEDULER_MEMORY_QUEUE" if run.mode == "memory" else "SCHEDULER_DISK_QUEUE", "Lifo")
    assert [r.url for r in run.drain()] == (urls if "Fifo" in in_use else urls[::-1])
    run.scheduler.close("finished")


def test_duplicates_are_refused_and_dont_filter_is_honoured(run):
    s = run.scheduler
    assert s.enqueue_request(scrapy.Request("http://foo.com/a?x=1&y=2"))
    assert not s.enqueue_request(scrapy.Request("http://foo.com/a?y=2&x=1"))  # the same canonical URL
    assert s.enqueue_request(scrapy.Request("http://foo.com/a?x=1&y=2", dont_filter=True))
    assert run.stats()["dupefilter/filtered"] == 1
    s = run.again()
    assert not s.enqueue_request(scrapy.Request("http://foo.com/a?x=1&y=2"))  # seen in the run before too
    assert len(s) == 2


def test_stats_names(run):
    for url in URLS:
        run.scheduler.enqueue_request(scrapy.Request(url))
    run.scheduler.enqueue_request(scrapy.Request(URLS[0]))
    where = run.where
    assert run.stats() == {f"scheduler/enqueued/{where}": 3, "scheduler/enqueued": 3, "dupefilter/filtered": 1}
    s = run.again()
    s.next_request()
    s.next_request()
    stats = run.stats()
    assert {k: v for k, v in stats.items() if k.startswith("scheduler/dequeued")} == {
        f"scheduler/dequeued/{where}": 2, "scheduler/dequeued": 2}


def test_a_request_that_cannot_be_stored_is_served_from_memory_in_this_run_only(run):
    s = run.scheduler
    assert s.enqueue_request(scrapy.Request("http://foo.com/stored", callback=run.spider.parse_item))
    assert s.enqueue_request(scrapy.Request("http://foo.com/lambda", callback=lambda response, *args, **kwargs: None))
    stats = run.stats()
    if run.mode == "memory":
        assert stats == {"scheduler/enqueued/memory": 2, "scheduler/enqueued": 2}
    else:
        assert stats == {"scheduler/enqueued/disk": 1, "scheduler/enqueued/memory": 1, "scheduler/enqueued": 2,
                         "scheduler/unserializable": 1}
    s = run.again()
    expected = ["http://foo.com/stored"] if run.mode == "reopen" else ["http://foo.com/lambda", "http://foo.com/stored"]
    assert sorted(r.url for r in run.drain()) == expected


def _values() -> dict:
    """Values Scrapy users put in meta and cb_kwargs, which Scrapy's JOBDIR keeps (it pickles them)."""
    return {
        "naive": datetime.datetime(2020, 1, 2, 3, 4, 5, 6),
        "utc": datetime.datetime(2020, 1, 2, tzinfo=datetime.timezone.utc),
        "zone": datetime.datetime(2021, 10, 31, 2, 30, fold=1, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
        "date": datetime.date(2020, 2, 29),
        "time": datetime.time(12, 30),
        "wait": datetime.timedelta(minutes=5),
        "price": decimal.Decimal("19.90"),
        "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "big": 2**64,
        "negative": -(2**70),
        "tags": {"new", "sale"},
        "frozen": frozenset({1, 2}),
        "pair": ("shop", 1),
        "raw": {b"key": b"value"},
        "product": Product(sku="A-7", price=decimal.Decimal("9.90"), added=datetime.date(2020, 1, 1),
                           parts=[Part(n=1), Part(n=2**65)]),
    }


def _same(got, want) -> None:
    """Equal, of the same type, with the same time zone and fold, all the way down (Items included)."""
    assert type(got) is type(want), (got, want)
    if isinstance(want, (dict, scrapy.Item)):
        assert set(got) == set(want)
        for key in want:
            _same(got[key], want[key])
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            _same(a, b)
    else:
        assert got == want
        if isinstance(want, (datetime.datetime, datetime.time)):
            assert got.tzinfo == want.tzinfo and got.fold == want.fold and got.utcoffset() == want.utcoffset()


def test_the_values_scrapy_keeps_come_back(run):
    meta, cb_kwargs = _values(), {"when": datetime.datetime(2020, 5, 1, 9), "product": Product(sku="B-2")}
    request = scrapy.Request("http://foo.com/item", callback=run.spider.parse_item, meta=meta, cb_kwargs=cb_kwargs)
    assert run.scheduler.enqueue_request(request)
    assert run.stats() == {f"scheduler/enqueued/{run.where}": 1, "scheduler/enqueued": 1}  # stored, not memory-only
    s = run.again()
    assert len(s) == 1
    got = s.next_request()
    _same(got.meta, _values())
    _same(got.cb_kwargs, {"when": datetime.datetime(2020, 5, 1, 9), "product": Product(sku="B-2")})


def test_download_slots_are_served_in_turn(case: tuple[str, str], tmp_path):
    """DownloaderAwarePriorityQueue (Scrapy's default) and the drop-in's rule for it: with as many
    requests in flight in each slot, the slots in turn. Scrapy's queue asks a real engine's downloader,
    which is built inside a running event loop."""
    slots = ["a", "a", "b", "b", "c", "c"]
    dequeued = asyncio.run(_slots_in_turn(*case, tmp_path, slots))
    assert sorted(dequeued) == sorted(slots)
    for start in range(0, len(dequeued), 3):
        assert len(set(dequeued[start:start + 3])) == 3, dequeued  # each round holds every slot once


def _with_engine(kind: str, settings: dict):
    """A scheduler of ``kind``, open, on a crawler with a real engine (its downloader is what DAPQ asks)."""
    crawler = get_crawler(ShopSpider, settings)
    crawler.engine = ExecutionEngine(crawler, lambda _: None)
    scheduler = build_from_crawler(load_object(SCHEDULERS[kind]), crawler)
    crawler.spider = ShopSpider.from_crawler(crawler)
    scheduler.open(crawler.spider)
    return scheduler


async def _slots_in_turn(kind: str, mode: str, tmp_path, slots: list[str]) -> list[str]:
    # (the memory usage extension would answer engine_stopped for an engine that never started)
    settings = {"SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue", "MEMUSAGE_ENABLED": False}
    if mode != "memory":
        settings["JOBDIR"] = str(tmp_path / f"job-{kind}")
    scheduler = _with_engine(kind, settings)
    for i, slot in enumerate(slots):
        scheduler.enqueue_request(scrapy.Request(f"http://foo.com/{i}", meta={"download_slot": slot}))
    if mode == "reopen":
        await _close(scheduler, "shutdown")
        scheduler = _with_engine(kind, settings)
    dequeued = []
    while scheduler.has_pending_requests():
        dequeued.append(scheduler.next_request().meta["download_slot"])
    await _close(scheduler, "finished")
    return dequeued


async def _close(scheduler, reason: str) -> None:
    """Close ``scheduler`` and stop its engine's downloader as a stopping engine does (its handlers'
    HTTP sessions closed)."""
    scheduler.close(reason)
    crawler = scheduler.crawler
    crawler.engine.downloader.close()
    await crawler.signals.send_catch_log_async(signal=signals.engine_stopped)


def _scrapy_arguments(crawler, jobdir) -> dict:
    """The arguments Scrapy's ``Scheduler.from_crawler`` gives its ``__init__``, with a dupefilter that
    writes nothing (as Scrapy's own scheduler tests use)."""
    settings = crawler.settings
    return {
        "dupefilter": BaseDupeFilter(),
        "jobdir": jobdir,
        "dqclass": load_object(settings["SCHEDULER_DISK_QUEUE"]),
        "mqclass": load_object(settings["SCHEDULER_MEMORY_QUEUE"]),
        "logunser": False,
        "stats": crawler.stats,
        "pqclass": load_object(SPQ),
        "crawler": crawler,
    }


@pytest.mark.parametrize("how", ["keywords", "positional"])
def test_built_with_the_arguments_of_scrapys_scheduler(case, tmp_path, how):
    kind, mode = case
    jobdir = None if mode == "memory" else str(tmp_path / "job")
    urls = [f"http://foo.com/{i}" for i in range(1, 4)]
    settings = {"SCHEDULER_MEMORY_QUEUE": FIFO_MEMORY, "SCHEDULER_DISK_QUEUE": FIFO_DISK}
    got = []
    for step in ("enqueue", "dequeue"):
        crawler = get_crawler(ShopSpider, settings)
        arguments = _scrapy_arguments(crawler, jobdir)
        cls = load_object(SCHEDULERS[kind])
        scheduler = cls(**arguments) if how == "keywords" else cls(*arguments.values())
        crawler.spider = ShopSpider.from_crawler(crawler)
        scheduler.open(crawler.spider)
        if step == "enqueue":
            assert all(scheduler.enqueue_request(scrapy.Request(url)) for url in urls)
        if step == "dequeue" or mode != "reopen":
            got = [scheduler.next_request().url for _ in urls]
            assert scheduler.next_request() is None
        scheduler.close("finished")
        if mode != "reopen":
            break
    assert got == urls  # FIFO, from the queue classes given


class Recording:
    """A subclass of a scheduler that overrides ``__init__`` with Scrapy's arguments, as projects do."""

    def __init__(self, dupefilter, jobdir=None, dqclass=None, mqclass=None, logunser=False, stats=None,
                 pqclass=None, crawler=None):
        self.built_with = jobdir
        super().__init__(dupefilter, jobdir, dqclass, mqclass, logunser, stats, pqclass, crawler)  # type: ignore[call-arg]


@pytest.mark.parametrize("kind", list(SCHEDULERS))
def test_a_subclass_with_scrapys_constructor_is_built_by_from_crawler(tmp_path, kind):
    subclass = type("Sub", (Recording, load_object(SCHEDULERS[kind])), {})
    crawler = get_crawler(ShopSpider, {"JOBDIR": str(tmp_path / "job"), "SCHEDULER_PRIORITY_QUEUE": SPQ})
    scheduler = build_from_crawler(subclass, crawler)
    assert scheduler.built_with == str(tmp_path / "job")
    crawler.spider = ShopSpider.from_crawler(crawler)
    scheduler.open(crawler.spider)
    assert scheduler.enqueue_request(scrapy.Request("http://foo.com/a"))
    assert scheduler.next_request().url == "http://foo.com/a"
    scheduler.close("finished")


@pytest.mark.parametrize("kind", list(SCHEDULERS))
def test_concurrent_requests_per_ip_stops_a_crawl_with_the_downloader_aware_queue(tmp_path, kind):
    """A real crawl (``CrawlerProcess``) with each scheduler: neither fetches a page, both say why
    (Scrapy's with five tracebacks, the drop-in in one line, closing the spider). With
    ScrapyPriorityQueue, both crawl as usual."""
    scheduler = "scrapy" if kind == "Scrapy" else "diskfrontier"
    with SyntheticSite(12) as site:
        proc = start_crawl(str(tmp_path / "refused"), site, scheduler, str(tmp_path / "refused.json"),
                           "CONCURRENT_REQUESTS_PER_IP=1")
        log = finish(proc)
        assert site.fetched() == {}, log[-3000:]
        assert "does not support CONCURRENT_REQUESTS_PER_IP" in log
        if kind == "drop-in":
            assert "Traceback" not in log and "Spider closed (diskfrontier_cannot_open)" in log, log[-3000:]
        proc = start_crawl(str(tmp_path / "taken"), site, scheduler, str(tmp_path / "taken.json"),
                           "CONCURRENT_REQUESTS_PER_IP=1", f"SCHEDULER_PRIORITY_QUEUE={SPQ}")
        log = finish(proc)
        assert proc.returncode == 0, log[-3000:]
        assert {f"/page/{n}" for n in range(12)} <= set(site.fetched()), log[-3000:]
