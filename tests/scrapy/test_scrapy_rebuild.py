"""Rebuilding Scrapy requests from the job directory: the quick way (no ``Request.__init__``) gives,
field for field, what ``request_from_dict`` gives, and is taken only for URLs ``safe_url_string``
leaves as they are."""

from __future__ import annotations

import logging

import pytest
import scrapy
from hypothesis import strategies as st
from scrapy.http import FormRequest
from scrapykit import ShopSpider
from urlstrategies import urls
from volume import property_test
from w3lib.url import safe_url_string

from diskfrontier.request.codec import encode_request
from diskfrontier.scrapy import serialize
from diskfrontier.scrapy.serialize import PLAIN_URL, RequestDicts
from diskfrontier.scrapyfiles.records import frontier_request, scrapy_dict


def _fields(request: scrapy.Request) -> dict:
    return {name: getattr(request, name) for name in request.attributes} | {"class": type(request)}


def _both(dicts: RequestDicts, request: scrapy.Request) -> tuple[scrapy.Request, scrapy.Request]:
    stored = frontier_request(dicts.to_dict(request), b"\0" * 20)
    return dicts.from_dict(scrapy_dict(stored)), dicts.from_stored(stored)


@property_test(3000, st.from_regex(PLAIN_URL, fullmatch=True))
def test_urls_taken_the_quick_way_are_left_unchanged_by_safe_url_string(url):
    assert safe_url_string(url) == url


@property_test(1500, urls())
def test_safe_url_string_is_idempotent_on_every_shape_of_url(url):
    """A stored URL is what safe_url_string made of the original: making it again changes nothing."""
    try:
        once = safe_url_string(url)
    except ValueError:
        return  # refused (a port out of range): never stored
    assert safe_url_string(once) == once


headers = st.dictionaries(st.sampled_from(["Referer", "Accept", "X-Token"]), st.text("abc/:.=", max_size=12),
                          max_size=2)
meta = st.dictionaries(st.sampled_from(["depth", "tag", "download_slot"]),
                       st.one_of(st.integers(-5, 5), st.text(max_size=5)), max_size=3)


@property_test(600, url=st.one_of(urls(), st.from_regex(PLAIN_URL, fullmatch=True)),
       method=st.sampled_from(["GET", "POST", "put"]), headers=headers, body=st.binary(max_size=20),
       cookies=st.dictionaries(st.sampled_from(["a", "b"]), st.text("xyz", max_size=3), max_size=2), meta=meta,
       encoding=st.sampled_from(["utf-8", "latin-1"]), priority=st.integers(-2**40, 2**40),
       dont_filter=st.booleans(), flags=st.lists(st.sampled_from(["cached", "x"]), max_size=2),
       cb_kwargs=st.dictionaries(st.just("sku"), st.integers(0, 9), max_size=1),
       callback=st.sampled_from([None, "parse", "parse_item"]), errback=st.sampled_from([None, "failed"]))
def test_the_quick_way_gives_what_request_from_dict_gives(url, method, headers, body, cookies, meta, encoding,
                                                         priority, dont_filter, flags, cb_kwargs, callback,
                                                         errback):
    spider = ShopSpider()
    dicts = RequestDicts(spider)
    assert dicts.quick
    try:
        request = scrapy.Request(url, method=method, headers=headers, body=body, cookies=cookies, meta=meta,
                                 encoding=encoding, priority=priority, dont_filter=dont_filter, flags=flags,
                                 cb_kwargs=cb_kwargs, callback=callback and getattr(spider, callback),
                                 errback=errback and getattr(spider, errback))
    except ValueError:
        return
    ordinary, quick = _both(dicts, request)
    assert _fields(quick) == _fields(ordinary) == _fields(request)
    for dont_filter in (False, True):  # stored the quick way: the very record the ordinary way writes
        plain = frontier_request(dicts.to_dict(request), b"\1" * 20, dont_filter=dont_filter, slot="s")
        fast = dicts.to_stored(request, b"\1" * 20, dont_filter=dont_filter, slot="s")
        assert encode_request(fast) == encode_request(plain)
        assert (fast.url, fast.priority, fast.dont_filter, fast.slot, fast.fingerprint) == (
            plain.url, plain.priority, plain.dont_filter, plain.slot, plain.fingerprint)
    quick.meta["later"] = 1  # nothing is shared with the stored request's values
    assert "later" not in ordinary.meta and "later" not in dicts.from_stored(
        frontier_request(dicts.to_dict(request), b"\0" * 20)).meta


@pytest.mark.parametrize("priority", [0, -3, 7])
@pytest.mark.parametrize("dont_filter", [False, True])
def test_a_request_with_only_a_callback_comes_back_as_request_from_dict_gives_it(priority, dont_filter):
    spider = ShopSpider()
    dicts = RequestDicts(spider)
    request = scrapy.Request("https://shop.example/item/1?x=2", callback=spider.parse_item, priority=priority,
                             dont_filter=dont_filter)
    stored = frontier_request(dicts.to_dict(request), b"\0" * 20)
    assert set(stored.meta) == {"callback"}  # the shape the shortest way takes
    ordinary, quick = _both(dicts, request)
    assert _fields(quick) == _fields(ordinary) == _fields(request)
    assert quick.callback == spider.parse_item and quick.errback is None


def test_subclasses_and_odd_urls_take_the_ordinary_way(monkeypatch):
    dicts = RequestDicts(ShopSpider())
    taken = []
    def from_dict(data):
        taken.append(data["url"])
        return scrapy.Request(data["url"])

    monkeypatch.setattr(dicts, "from_dict", from_dict)
    for request in [FormRequest("https://shop.example/login", formdata={"u": "1"}),
                    scrapy.Request("https://shop.example/it's[1]"),
                    scrapy.Request("HTTPS://Shop.Example/a", meta={"verbatim_url": True})]:
        dicts.from_stored(frontier_request(dicts.to_dict(request), b"\0" * 20))
    assert taken == ["https://shop.example/login", "https://shop.example/it's%5B1%5D", "HTTPS://Shop.Example/a"]
    dicts.from_stored(frontier_request(dicts.to_dict(scrapy.Request("https://shop.example/plain")), b"\0" * 20))
    assert len(taken) == 3


def test_a_scrapy_on_which_the_quick_way_differs_uses_the_ordinary_way(monkeypatch, caplog):
    real = RequestDicts.from_stored

    def off_by_one(self, stored):
        request = real(self, stored)
        if self.quick:
            request.priority += 1
        return request

    monkeypatch.setattr(RequestDicts, "from_stored", off_by_one)
    with caplog.at_level(logging.DEBUG, logger=serialize.__name__):
        dicts = RequestDicts(ShopSpider())
    assert not dicts.quick
    assert "the quick way differs" in caplog.text


@pytest.mark.parametrize("name", ["__init__", "from_crawler", "nothing_here"])
def test_a_stored_callback_is_refused_the_quick_way_too(name):
    from diskfrontier import CallbackRefused

    dicts = RequestDicts(ShopSpider())
    stored = frontier_request({"url": "https://shop.example/a", "callback": name}, b"\0" * 20)
    with pytest.raises(CallbackRefused):
        dicts.from_stored(stored)
