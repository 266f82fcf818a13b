"""The feed files of a crawl synced before requests are done (``feeds.py``, ``itemsafe.py``), on Scrapy's
own FeedExporter writing real files."""

from __future__ import annotations

import json
import logging

import pytest
from scrapy.extensions.feedexport import FeedExporter
from scrapy.utils.test import get_crawler
from scrapykit import ShopSpider

from diskfrontier import Request
from diskfrontier.scrapy.feeds import FeedFiles, feed_exporter
from diskfrontier.scrapy.itemsafe import ItemsGate, open_gate


def exporter_for(feeds: dict) -> tuple[FeedExporter, ShopSpider]:
    crawler = get_crawler(ShopSpider, {"FEEDS": feeds})
    spider = ShopSpider()
    spider.crawler = crawler
    exporter = FeedExporter.from_crawler(crawler)
    exporter.open_spider(spider)
    return exporter, spider


def fail_on(error: OSError) -> None:
    pytest.fail(f"the gate reported {error!r}")


def requests(n: int) -> list[Request]:
    return [Request(f"https://shop.example/{i}") for i in range(n)]


def test_items_reach_the_file_only_when_the_gate_syncs_and_then_their_requests_are_released(tmp_path):
    path = tmp_path / "items.jsonl"
    exporter, spider = exporter_for({str(path): {"format": "jsonlines"}})
    gate = ItemsGate(FeedFiles(exporter), interval=3600, on_error=fail_on)
    for n in range(3):
        exporter.item_scraped({"n": n}, spider)
    finished = requests(3)
    gate.add(finished)
    assert path.read_bytes() == b""  # in the exporter's buffer: a kill now would lose them
    assert gate.release() == [] and len(gate) == 3  # not due yet
    due = gate.due_in()
    assert due is not None and due > 0
    assert gate.release(force=True) == finished and len(gate) == 0
    assert [json.loads(line)["n"] for line in path.read_bytes().splitlines()] == [0, 1, 2]
    assert gate.syncs == 1


def test_many_waiting_requests_are_synced_before_the_interval(tmp_path):
    path = tmp_path / "items.jsonl"
    exporter, spider = exporter_for({str(path): {"format": "jsonlines"}})
    gate = ItemsGate(FeedFiles(exporter), interval=3600, on_error=fail_on, most=4)
    exporter.item_scraped({"n": 0}, spider)
    gate.add(requests(3))
    assert gate.release() == []
    gate.add(requests(1))
    assert len(gate.release()) == 4 and path.read_bytes().count(b"\n") == 1


def test_a_csv_feed_is_synced_through_its_text_layer(tmp_path):
    path = tmp_path / "items.csv"
    exporter, spider = exporter_for({str(path): {"format": "csv"}})
    gate = ItemsGate(FeedFiles(exporter), interval=0, on_error=fail_on)
    exporter.item_scraped({"n": 7}, spider)
    gate.add(requests(1))
    assert len(gate.release()) == 1
    assert path.read_text().splitlines() == ["n", "7"]


def test_a_sync_that_fails_keeps_the_requests_waiting(tmp_path):
    exporter, spider = exporter_for({"/dev/full": {"format": "jsonlines"}})  # every write-out: ENOSPC
    errors: list[OSError] = []
    gate = ItemsGate(FeedFiles(exporter), interval=0, on_error=errors.append)
    exporter.item_scraped({"n": 1}, spider)
    gate.add(requests(2))
    assert gate.release(force=True) == []
    assert len(errors) == 1 and len(gate) == 2


def test_without_feeds_requests_are_released_at_once():
    crawler = get_crawler(ShopSpider, {})
    assert feed_exporter(crawler) is None
    gate = open_gate(crawler, True, 3600, False, ShopSpider(), fail_on)
    gate.add(requests(2))
    assert len(gate.release()) == 2


def test_a_cut_last_line_gets_a_line_end_and_whole_files_are_left_alone(tmp_path):
    cut, whole, overwritten, array = (tmp_path / name for name in ("cut.jsonl", "whole.jsonl", "o.jsonl", "a.json"))
    cut.write_bytes(b'{"n": 1}\n{"n": 2')
    whole.write_bytes(b'{"n": 1}\n')
    overwritten.write_bytes(b'{"n": 1')
    array.write_bytes(b'[{"n": 1}')
    exporter, _ = exporter_for({str(cut): {"format": "jsonlines"}, str(whole): {"format": "jsonlines"},
                                str(overwritten): {"format": "jsonlines", "overwrite": True},
                                str(array): {"format": "json"}, str(tmp_path / "new.jsonl"): {"format": "jsonlines"}})
    assert FeedFiles(exporter).end_torn_lines() == [(str(cut), 7)]
    assert cut.read_bytes() == b'{"n": 1}\n{"n": 2\n'
    assert whole.read_bytes() == b'{"n": 1}\n' and overwritten.read_bytes() == b'{"n": 1'
    assert array.read_bytes() == b'[{"n": 1}'


def test_feeds_stored_only_at_close_are_named_and_not_waited_for(tmp_path, caplog):
    crawler = get_crawler(ShopSpider, {"FEEDS": {"ftp://user:pass@127.0.0.1/items.jsonl": {"format": "jsonlines"}}})
    exporter = feed_exporter(crawler)
    assert exporter is not None
    files = FeedFiles(exporter)
    assert files.store_at_close == ["ftp://user:pass@127.0.0.1/items.jsonl"] and not files.synced
    with caplog.at_level(logging.WARNING, logger="diskfrontier.scrapy"):
        gate = open_gate(crawler, True, 3600, False, ShopSpider(), fail_on)
    assert gate.feeds is None
    assert any("only when it closes" in r.getMessage() for r in caplog.records)


def test_an_overwritten_feed_of_a_resumed_crawl_is_warned_about(tmp_path, caplog):
    crawler = get_crawler(ShopSpider, {"FEEDS": {str(tmp_path / "x.jsonl"): {"format": "jsonlines",
                                                                            "overwrite": True}}})
    with caplog.at_level(logging.WARNING, logger="diskfrontier.scrapy"):
        open_gate(crawler, True, 1, True, ShopSpider(), fail_on)
    assert any("overwritten at each run" in r.getMessage() for r in caplog.records)


def test_turned_off_nothing_waits(tmp_path):
    crawler = get_crawler(ShopSpider, {"FEEDS": {str(tmp_path / "x.jsonl"): {"format": "jsonlines"}}})
    gate = open_gate(crawler, False, 3600, False, ShopSpider(), fail_on)
    gate.add(requests(1))
    assert gate.feeds is None and len(gate.release()) == 1
