"""The drop-in where it decides what Scrapy's scheduler leaves to pickle or does not have: Items rebuilt
only from Item classes already imported, requests that cannot be stored named by type, the
constructor's options and errors, ``CONCURRENT_REQUESTS_PER_IP`` refused by hand, and a crawler
whose late attributes (extensions, fingerprinter) are not set yet. test_scrapy_parity.py checks,
against Scrapy's own scheduler, what both do.
"""

from __future__ import annotations

import datetime
import logging
import sys
import types

import pytest
import scrapy
from scrapy.crawler import Crawler
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler
from scrapykit import ShopSpider, next_of
from test_scrapy_scheduler import Session, drain

from diskfrontier import Frontier
from diskfrontier.request.values import ObjectFields
from diskfrontier.scrapy import Scheduler
from diskfrontier.scrapy.feeds import feed_exporter


class Box(scrapy.Item):
    label = scrapy.Field()
    when = scrapy.Field()


def _module_with_item(name: str, fields: tuple[str, ...]) -> type[scrapy.Item]:
    """A module ``name`` in sys.modules holding an Item class ``Thing`` with ``fields``."""
    module = types.ModuleType(name)
    thing = type("Thing", (scrapy.Item,), {"__module__": name, **{f: scrapy.Field() for f in fields}})
    module.Thing = thing  # type: ignore[attr-defined]  # a module made at run time
    sys.modules[name] = module
    return thing


def _warnings(caplog, words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if words in r.getMessage()]


def test_an_item_whose_module_is_not_imported_comes_back_as_its_fields_said_once(tmp_path, caplog):
    thing = _module_with_item("shop_items_for_later", ("sku",))
    s = Session(tmp_path / "job", False)
    assert s.scheduler.enqueue_request(scrapy.Request("https://shop.example/a", meta={"t": thing(sku="A")},
                                                      cb_kwargs={"more": [thing(sku="B")]}))
    s.scheduler.close("shutdown")
    del sys.modules["shop_items_for_later"]  # a later run whose project does not import it
    s.open()
    caplog.set_level(logging.WARNING, logger="diskfrontier")
    got = next_of(s.scheduler)
    assert type(got.meta["t"]) is ObjectFields and got.meta["t"] == {"sku": "A"}
    assert got.meta["t"].class_path == "shop_items_for_later.Thing" and got.cb_kwargs["more"] == [{"sku": "B"}]
    assert "shop_items_for_later" not in sys.modules  # looked for, never imported
    assert s.stats()["diskfrontier/items_as_dicts"] == 2
    said = _warnings(caplog, "shop_items_for_later.Thing")
    assert len(said) == 1 and "not imported" in said[0] and "import it in your project" in said[0]
    s.scheduler.close("shutdown")  # never finished: stored again with its class path
    sys.modules["shop_items_for_later"] = types.ModuleType("shop_items_for_later")
    sys.modules["shop_items_for_later"].Thing = thing  # type: ignore[attr-defined]
    s.open()
    assert type(next_of(s.scheduler).meta["t"]) is thing
    s.close()
    del sys.modules["shop_items_for_later"]


def test_an_item_class_that_no_longer_has_a_field_gives_the_fields_back(tmp_path, caplog):
    thing = _module_with_item("shop_items_changed", ("sku", "colour"))
    s = Session(tmp_path / "job", True)
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/a", meta={"t": thing(sku="A", colour="red")}))
    del thing.fields["colour"]  # the project's Item lost a field between the runs
    caplog.set_level(logging.WARNING, logger="diskfrontier")
    got = s.step().next_request()
    assert type(got.meta["t"]) is ObjectFields and got.meta["t"] == {"sku": "A", "colour": "red"}
    assert any("refuses its stored fields" in m for m in _warnings(caplog, "shop_items_changed.Thing"))
    s.close()
    del sys.modules["shop_items_changed"]


def test_a_class_path_of_something_else_is_never_called_nor_imported(tmp_path, caplog):
    s = Session(tmp_path / "job", True)
    meta = {"box": Box(label="x"), "fake": ObjectFields({"command": "true"}, "os.system"),
            "elsewhere": ObjectFields({"a": 1}, "module_never_imported_here.Thing")}
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/a", meta=meta))
    caplog.set_level(logging.WARNING, logger="diskfrontier")
    got = s.step().next_request()
    assert type(got.meta["box"]) is Box and got.meta["box"]["label"] == "x"
    assert type(got.meta["fake"]) is ObjectFields and got.meta["fake"] == {"command": "true"}
    assert "module_never_imported_here" not in sys.modules
    assert any("not a scrapy.Item subclass" in m for m in _warnings(caplog, "'os.system'"))
    s.close()


class Probe:
    """An object whose attributes, read, record it."""

    def __init__(self):
        object.__setattr__(self, "read", [])

    def __getattribute__(self, name):
        object.__getattribute__(self, "read").append(name)
        return object.__getattribute__(self, name)


def test_a_class_path_through_an_object_reads_none_of_its_attributes(tmp_path):
    probe = Probe()
    sys.modules["shop_probe"] = types.ModuleType("shop_probe")
    sys.modules["shop_probe"].probe = probe  # type: ignore[attr-defined]
    s = Session(tmp_path / "job", True)
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/a", meta={
        "box": Box(label="x"), "through": ObjectFields({"a": 1}, "shop_probe.probe.Thing")}))
    got = s.step().next_request()
    assert type(got.meta["through"]) is ObjectFields and object.__getattribute__(probe, "read") == []
    s.close()
    del sys.modules["shop_probe"]


def test_an_item_of_a_class_that_cannot_be_found_by_its_path_stays_unstorable_and_is_named(tmp_path):
    class Local(scrapy.Item):  # defined in a function: no path finds it again
        a = scrapy.Field()

    s = Session(tmp_path / "job", False)
    assert s.scheduler.enqueue_request(scrapy.Request("https://shop.example/a", meta={"x": Local(a=1)}))
    assert s.scheduler.enqueue_request(scrapy.Request("https://shop.example/b", meta={"x": {Box(label="in a set")}}))
    stats = s.stats()
    kind = f"{__name__}.test_an_item_of_a_class_that_cannot_be_found_by_its_path_stays_unstorable_and_is_named" \
           f".<locals>.Local"
    assert stats[f"diskfrontier/unstorable/{kind}"] == 1
    assert stats[f"diskfrontier/unstorable/{__name__}.Box"] == 1  # an Item in a set is not turned into a dict
    assert stats["scheduler/unserializable"] == 2 and stats["scheduler/enqueued/memory"] == 2
    s.close()


def test_a_retry_of_a_request_holding_items_replaces_it_with_its_items(tmp_path):
    s = Session(tmp_path / "job", False)
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/a", meta={"box": Box(label="x")}))
    original = next_of(s.scheduler)
    retry = original.replace(dont_filter=True)
    retry.meta["retry_times"] = 1  # what RetryMiddleware makes
    assert s.scheduler.enqueue_request(retry)
    stats = s.stats()
    assert stats["diskfrontier/retried"] == 1 and "scheduler/unserializable" not in stats
    s.scheduler.close("shutdown")
    s.open()
    [got] = drain(s.scheduler)
    assert got.meta["retry_times"] == 1 and type(got.meta["box"]) is Box and got.meta["box"]["label"] == "x"
    s.close()


def test_scheduler_debug_logs_the_traceback_of_each_kind(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="diskfrontier")
    s = Session(tmp_path / "job", False, SCHEDULER_DEBUG=True)
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/a", meta={"x": object()}))
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/b", meta={"x": 1j}))
    logged = [r for r in caplog.records if "Unable to serialize" in r.getMessage()]
    assert [r.exc_info is not None for r in logged] == [True, True]
    s.close()


def test_without_jobdir_nothing_is_said_about_requests_kept_in_memory(caplog):
    caplog.set_level(logging.WARNING, logger="diskfrontier")
    crawler = get_crawler(ShopSpider, {})
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.open(ShopSpider())
    assert scheduler.enqueue_request(scrapy.Request("https://shop.example/a", meta={"x": object()}))
    assert next_of(scheduler).url == "https://shop.example/a"
    scheduler.close("finished")
    assert not _warnings(caplog, "Unable to serialize")  # as with Scrapy: every request is in memory
    assert not [k for k in crawler.stats.get_stats() if "unserializable" in k or "unstorable" in k]


def test_the_constructor_needs_the_crawler_and_says_so():
    crawler = get_crawler(ShopSpider, {})
    with pytest.raises(TypeError, match=r"needs the crawler: build it with Scheduler.from_crawler\(crawler\)"):
        Scheduler()
    with pytest.raises(TypeError, match="its first argument is a dupefilter"):
        Scheduler(crawler)  # the constructor of earlier versions


def test_options_given_to_the_constructor_win_over_the_settings(tmp_path):
    crawler = get_crawler(ShopSpider, {"DISKFRONTIER_ORDER": "lifo", "DISKFRONTIER_FSYNC": False})
    scheduler = Scheduler(None, str(tmp_path / "job"), crawler=crawler, order="fifo", fsync=True)
    scheduler.open(ShopSpider())
    for i in range(3):
        scheduler.enqueue_request(scrapy.Request(f"https://shop.example/{i}"))
    assert isinstance(scheduler.frontier, Frontier) and scheduler.frontier.fsync is True
    assert [next_of(scheduler).url[-1] for _ in range(3)] == ["0", "1", "2"]
    scheduler.close("finished")
    with pytest.raises(TypeError, match=r"unknown scheduler options.*'colour'"):
        Scheduler(crawler=crawler, colour="red")
    with pytest.raises(ValueError, match="DISKFRONTIER_PREFETCH must be a whole number of at least 1"):
        Scheduler(crawler=crawler, prefetch=0)


@pytest.mark.filterwarnings("ignore:The CONCURRENT_REQUESTS_PER_IP setting is deprecated")
@pytest.mark.parametrize("settings,refused", [
    ({}, True),
    ({"SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue"}, False),
    ({"DISKFRONTIER_PREFER": "priority"}, False),
], ids=["downloader-aware", "priority-queue", "prefer-priority"])
def test_concurrent_requests_per_ip_is_refused_at_open_by_the_idle_rule(tmp_path, caplog, settings, refused):
    caplog.set_level(logging.ERROR, logger="diskfrontier")
    s = Session(tmp_path / "job", False, CONCURRENT_REQUESTS_PER_IP=2, **settings)
    assert (s.scheduler.frontier is None) is refused
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    if refused:
        assert s.stats()["diskfrontier/cannot_open"] == "CONCURRENT_REQUESTS_PER_IP"
        assert len(errors) == 1 and "does not support CONCURRENT_REQUESTS_PER_IP" in errors[0]
        assert "CONCURRENT_REQUESTS_PER_IP = 0" in errors[0] and "DISKFRONTIER_PREFER = 'priority'" in errors[0]
        assert not s.scheduler.has_pending_requests() and not (tmp_path / "job" / "frontier.json").exists()
    else:
        assert not errors and s.scheduler.enqueue_request(scrapy.Request("https://shop.example/"))
    s.close()


def test_a_crawler_not_configured_yet_is_enough(tmp_path):
    """A ``Crawler`` before its crawl starts (as Scrapy's own scheduler tests build one): its extensions
    and fingerprinter raise RuntimeError (Scrapy 2.14+) until they are set."""
    crawler = Crawler(ShopSpider, {"FEEDS": {str(tmp_path / "items.jsonl"): {"format": "jsonlines"}},
                                   "JOBDIR": str(tmp_path / "job")})
    with pytest.raises(RuntimeError):
        crawler.extensions  # noqa: B018 - what feed_exporter reads
    assert feed_exporter(crawler) is None
    scheduler = Scheduler(None, str(tmp_path / "job"), stats=MemoryStatsCollector(crawler), crawler=crawler)
    scheduler.open(ShopSpider())
    assert scheduler.enqueue_request(scrapy.Request("https://shop.example/a?b=1&a=2"))
    assert not scheduler.enqueue_request(scrapy.Request("https://shop.example/a?a=2&b=1"))  # Scrapy's fingerprint
    assert next_of(scheduler).meta == {}
    scheduler.close("finished")


def test_a_datetime_in_meta_survives_a_restart_with_jobdir(tmp_path):
    """The case as it was reported: before, len was 0 after the reopen."""
    s = Session(tmp_path / "job", False)
    s.scheduler.enqueue_request(scrapy.Request("https://shop.example/u", meta={"d": datetime.datetime(2020, 1, 2)}))
    s.scheduler.close("shutdown")
    s.open()
    assert len(s.scheduler) == 1
    assert next_of(s.scheduler).meta == {"d": datetime.datetime(2020, 1, 2)}
    s.close()
