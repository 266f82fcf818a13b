"""A real Scrapy crawl of the synthetic site (diskfrontier.run.demo), for the tests to run, interrupt and kill.

Usage: scrapy_child.py JOBDIR BASE_URL SCHEDULER STATS_FILE [NAME=VALUE ...]

SCHEDULER is "diskfrontier" (diskfrontier.scrapy.Scheduler) or "scrapy" (Scrapy's own).
NAME=VALUE pairs are Scrapy settings (values parsed as JSON when they can be), except
``unserializable=1``, which makes the spider yield one request whose callback is a lambda,
``start=PATH``, the path of the start URL (default ``/page/0``; ``/page/00`` serves page 0 at a
URL no page links to),
and ``heartbeat=S``, which sets the seconds between the engine's own looks at the scheduler.
At close the crawl's stats are written to STATS_FILE as JSON, with ``test/request_dropped``: how many
``request_dropped`` signals the crawl sent.
"""

from __future__ import annotations

import json
import re
import sys

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess

LINK = re.compile(r'<a href="([^"]+)" data-priority="(-?\d+)">')


class SiteSpider(scrapy.Spider):
    name = "site"

    def __init__(self, base: str, unserializable: str = "0", start: str = "/page/0", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [f"{base}{start}"]
        self.base = base
        self.unserializable = unserializable == "1"

    def parse(self, response):
        for href, priority in LINK.findall(response.text):
            yield response.follow(href, callback=self.parse_page, priority=int(priority),
                                  cb_kwargs={"via": response.url})
        if self.unserializable and response.url.endswith("/page/0"):
            yield scrapy.Request(f"{self.base}/extra", callback=lambda response, *args, **kwargs: None)
        yield {"url": response.url}

    def parse_page(self, response, via):
        yield from self.parse(response)


def main() -> None:
    jobdir, base, scheduler, stats_file, *pairs = sys.argv[1:]
    settings = {
        "JOBDIR": jobdir,
        "CONCURRENT_REQUESTS": 8,
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "RETRY_ENABLED": False,
    }
    if scheduler == "diskfrontier":
        settings["SCHEDULER"] = "diskfrontier.scrapy.Scheduler"
    spider_args = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if name in ("unserializable", "start"):
            spider_args[name] = value
            continue
        if name == "heartbeat":  # seconds between the engine's own looks at the scheduler (Scrapy: 5)
            from scrapy.core.engine import ExecutionEngine
            ExecutionEngine._SLOT_HEARTBEAT_INTERVAL = float(value)
            continue
        try:
            settings[name] = json.loads(value)
        except ValueError:
            settings[name] = value
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(SiteSpider)

    def write_stats(spider, reason):
        stats = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in crawler.stats.get_stats().items()}
        stats["finish_reason"] = reason
        with open(stats_file, "w") as f:
            json.dump(stats, f)

    def dropped(request, spider):  # Scrapy's arguments of request_dropped, checked by the tests
        crawler.stats.inc_value("test/request_dropped")
        crawler.stats.inc_value(f"test/request_dropped_by/{spider.name}")

    crawler.signals.connect(write_stats, signal=signals.spider_closed)
    crawler.signals.connect(dropped, signal=signals.request_dropped)
    process.crawl(crawler, base=base, **spider_args)
    process.start()


if __name__ == "__main__":
    main()
