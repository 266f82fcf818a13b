"""A stored callback name binds only to a callback method of the spider (issue 19, defect 8).

A job directory is data: a record whose callback is ``"__init__"`` with ``cb_kwargs``
would, once the engine calls it with the response, re-run the live spider's constructor
with those arguments (setting ``allowed_domains`` to what the record says). Such a request
is refused by name, logged and counted, and never reaches the engine; the crawl goes on.
"""

from __future__ import annotations

from typing import ClassVar

import pytest
import scrapy
import scrapykit
from scrapy.spiders import CrawlSpider, Rule, SitemapSpider
from scrapy.utils.test import get_crawler

from diskfrontier import Frontier
from diskfrontier.core.errors import CallbackRefused
from diskfrontier.scrapy import Scheduler
from diskfrontier.scrapy.serialize import RequestDicts, spider_method
from diskfrontier.scrapyfiles.records import frontier_request


class ShopSpider(scrapykit.ShopSpider):
    """The kit's spider, with members that are no callbacks."""

    allowed_domains: ClassVar[list[str]] = ["shop.example"]
    helper = staticmethod(lambda response: None)

    def _parse_private(self, response):
        pass

    @classmethod
    def make(cls, response):
        pass

    @property
    def prop(self):
        return self.parse


class LinkSpider(CrawlSpider):
    name = "links"
    rules = (Rule(),)


def _open(job):
    crawler = get_crawler(ShopSpider, {"JOBDIR": str(job)})
    spider = ShopSpider()
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.open(spider)
    return crawler, spider, scheduler


def _store(job, url: str, **fields) -> None:
    """Push Scrapy's dict of a request, as a job directory from elsewhere could hold it."""
    with Frontier(job) as frontier:
        frontier.push(frontier_request({"url": url, "method": "GET", "headers": {}, **fields}, None))


def _drain(scheduler):
    out = []
    while (request := scheduler.next_request()) is not None:
        out.append(request)
    return out


@pytest.mark.parametrize("name", ["__init__", "__setattr__", "__class__", "_set_crawler", "from_crawler",
                                  "start", "close", "update_settings", "allowed_domains", "helper", "make",
                                  "prop", "no_such_method", "_ShopSpider__x"])
def test_a_stored_callback_that_is_not_a_callback_method_is_refused(tmp_path, caplog, name):
    job = tmp_path / "job"
    _store(job, "https://shop.example/evil", callback=name,
           cb_kwargs={"allowed_domains": ["evil.example"], "name": "evil"})
    _store(job, "https://shop.example/good", callback="parse_item", cb_kwargs={"sku": "7"})
    crawler, spider, scheduler = _open(job)
    try:
        got = _drain(scheduler)
        assert [r.url for r in got] == ["https://shop.example/good"]
        assert got[0].callback == spider.parse_item and got[0].cb_kwargs == {"sku": "7"}
        assert spider.allowed_domains == ["shop.example"] and spider.name == "shop"
        scheduler._flush_counts()
        assert crawler.stats.get_value("diskfrontier/undecodable") == 1
        assert any("CallbackRefused" in r.getMessage() and repr(name) in r.getMessage() for r in caplog.records)
    finally:
        scheduler.close("shutdown")


def test_a_stored_dunder_errback_is_refused_too(tmp_path):
    job = tmp_path / "job"
    _store(job, "https://shop.example/evil", callback="parse", errback="__init__")
    _, _, scheduler = _open(job)
    try:
        assert _drain(scheduler) == []
    finally:
        scheduler.close("shutdown")


def test_spider_methods_and_scrapys_own_callbacks_are_accepted():
    spider = ShopSpider()
    assert spider_method(spider, "parse") == spider.parse
    assert spider_method(spider, "parse_item") == spider.parse_item
    assert spider_method(spider, "_parse_private") == spider._parse_private
    assert spider_method(spider, "_parse") == spider._parse  # Scrapy's default callback
    links = LinkSpider()
    assert spider_method(links, "_callback") == links._callback  # CrawlSpider's requests use these
    assert spider_method(links, "_errback", "errback") == links._errback
    sitemap = type("Maps", (SitemapSpider,), {"name": "maps"})()
    assert spider_method(sitemap, "_parse_sitemap") == sitemap._parse_sitemap


def test_an_instance_attribute_does_not_stand_in_for_a_method():
    spider = ShopSpider()
    spider.parse_item = lambda response, **kwargs: None  # type: ignore[method-assign]  # the stand-in is the test
    with pytest.raises(CallbackRefused, match="replaced it"):
        spider_method(spider, "parse_item")


def test_what_is_stored_can_be_rebuilt(tmp_path):
    """The store side names only callbacks that the load side accepts."""
    spider = LinkSpider()
    dicts = RequestDicts(spider)
    data = dicts.to_dict(scrapy.Request("https://a.example/", callback=spider._callback, errback=spider._errback))
    assert (data["callback"], data["errback"]) == ("_callback", "_errback")
    again = dicts.from_dict(data)
    assert again.callback == spider._callback and again.errback == spider._errback
    with pytest.raises(ValueError, match="not a method of the spider"):
        dicts.to_dict(scrapy.Request("https://a.example/", callback=spider._set_crawler))  # type: ignore[arg-type]
