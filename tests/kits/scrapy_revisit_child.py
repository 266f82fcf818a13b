"""A real Scrapy crawl that revisits a changing site (diskfrontier.run.changingsite) for a while.

Usage: scrapy_revisit_child.py JOBDIR START_URL STATS_FILE SECONDS REVISIT_JSON

It follows every link, revisits with ``DISKFRONTIER_REVISIT = REVISIT_JSON`` and
``RevisitMiddleware``, and stops after SECONDS (``CLOSESPIDER_TIMEOUT``). At close the crawl's
stats are written to STATS_FILE as JSON.
"""

from __future__ import annotations

import json
import re
import sys

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess

LINK = re.compile(r'<a href="([^"]+)">')


class ChangingSpider(scrapy.Spider):
    name = "changing"

    def __init__(self, start: str, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start]

    def parse(self, response):
        for href in LINK.findall(response.text):
            yield response.follow(href, callback=self.parse)


def main() -> None:
    jobdir, start, stats_file, seconds, revisit = sys.argv[1:]
    process = CrawlerProcess({
        "JOBDIR": jobdir,
        "SCHEDULER": "diskfrontier.scrapy.Scheduler",
        "DOWNLOADER_MIDDLEWARES": {"diskfrontier.scrapy.RevisitMiddleware": 580},
        "DISKFRONTIER_REVISIT": json.loads(revisit),
        "DISKFRONTIER_POLL": 0.1,
        "CLOSESPIDER_TIMEOUT": float(seconds),
        "CONCURRENT_REQUESTS": 8,
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "RETRY_ENABLED": False,
    })
    crawler = process.create_crawler(ChangingSpider)

    def write_stats(spider, reason):
        stats = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in crawler.stats.get_stats().items()}
        stats["finish_reason"] = reason
        with open(stats_file, "w") as f:
            json.dump(stats, f)

    crawler.signals.connect(write_stats, signal=signals.spider_closed)
    process.crawl(crawler, start=start)
    process.start()


if __name__ == "__main__":
    main()
