"""DISKFRONTIER_METRICS_PORT: the scheduler's frontier as Prometheus /metrics, served by the crawl."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
import scrapy
from prometheus_client.parser import text_string_to_metric_families
from scrapy.utils.test import get_crawler
from scrapykit import ShopSpider

from diskfrontier import Frontier, FrontierError
from diskfrontier.scrapy import Scheduler


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_metrics_follow_the_scheduler_and_stop_with_it(tmp_path):
    crawler = get_crawler(ShopSpider, {"JOBDIR": str(tmp_path / "job"), "DISKFRONTIER_METRICS_PORT": "0"})
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.open(ShopSpider())
    assert scheduler.metrics is not None
    port = scheduler.metrics.port
    try:
        for i in range(5):
            assert scheduler.enqueue_request(scrapy.Request(f"https://shop.example/{i}", priority=i % 2))
        first = scrape(port)
        assert first["diskfrontier_pending", ()] == 5
        assert first["diskfrontier_pending_by_priority", (("priority", "1"),)] == 2
        assert first["diskfrontier_pushed_total", ()] == 5 and first["diskfrontier_paused", ()] == 0
        assert scheduler.next_request() is not None
        second = scrape(port)
        assert second["diskfrontier_pending", ()] == 4 and second["diskfrontier_in_flight", ()] == 1
    finally:
        scheduler.close("finished")
    with pytest.raises(urllib.error.URLError):
        scrape(port)


def test_a_bad_or_busy_metrics_port_is_a_clear_error(tmp_path):
    crawler = get_crawler(ShopSpider, {"JOBDIR": str(tmp_path / "a"), "DISKFRONTIER_METRICS_PORT": "eighty"})
    with pytest.raises(ValueError, match="DISKFRONTIER_METRICS_PORT must be a port number"):
        Scheduler.from_crawler(crawler)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        crawler = get_crawler(ShopSpider, {"JOBDIR": str(tmp_path / "b"), "DISKFRONTIER_METRICS_PORT": port})
        scheduler = Scheduler.from_crawler(crawler)
        with pytest.raises(FrontierError, match="cannot serve /metrics"):
            scheduler.open(ShopSpider())
    Frontier(tmp_path / "b").close()  # the frontier was closed: the directory is free again


def test_the_busiest_hosts_have_series_of_their_own_and_the_rest_are_other(tmp_path):
    crawler = get_crawler(ShopSpider, {"JOBDIR": str(tmp_path / "job"), "DISKFRONTIER_METRICS_PORT": "0",
                                       "DISKFRONTIER_METRICS_HOSTS": "2"})
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.open(ShopSpider())
    assert scheduler.metrics is not None
    try:
        for host, pages in (("a.example", 5), ("b.example", 3), ("c.example", 2), ("d.example", 1)):
            for i in range(pages):
                assert scheduler.enqueue_request(scrapy.Request(f"https://{host}/{i}"))
        found = scrape(scheduler.metrics.port)
        pending = {dict(labels)["host"]: value for (name, labels), value in found.items()
                   if name == "diskfrontier_host_pending"}
        assert pending == {"a.example": 5, "b.example": 3, "other": 3}
    finally:
        scheduler.close("finished")


def test_a_wrong_metrics_hosts_setting_is_refused(tmp_path):
    crawler = get_crawler(ShopSpider, {"JOBDIR": str(tmp_path / "job"), "DISKFRONTIER_METRICS_HOSTS": "-1"})
    with pytest.raises(ValueError, match="DISKFRONTIER_METRICS_HOSTS must be a whole number from 0 to 1000"):
        Scheduler.from_crawler(crawler)
