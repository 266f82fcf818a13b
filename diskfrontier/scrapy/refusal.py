"""A crawl that cannot open its job directory (or cannot start: a setting it cannot honour) ends
with one clear message and a non-zero exit.

An exception raised by the scheduler's ``open`` makes Scrapy print five tracebacks (the
components that never opened failing to close, then the unhandled failure) around the
message that says what to do. Scrapy's own way for a component to stop a crawl at start-up
is ``CloseSpider`` from a ``spider_opened`` handler: every component is then opened and
closed in order, without tracebacks. (Raised from the scheduler's ``open`` itself, it skips
opening the scraper, whose close then fails with a traceback.) The exit status would be 0,
though, as for a crawl that finished: ``scrapy crawl`` exits with 1 when the crawler ends
without a spider (Scrapy's "bootstrap failed"), so the crawler's spider is cleared once
everything else has closed.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy import signals
from scrapy.exceptions import CloseSpider

from ..core.errors import FrontierError, ScrapyQueueFound

logger = logging.getLogger("diskfrontier.scrapy")

REASON = "diskfrontier_cannot_open"


def refuse_to_start(crawler: Any, spider: Any, error: FrontierError | str, cause: str = "") -> None:
    """Log ``error`` once, close the spider as soon as it is open, and make the crawl's exit status 1.

    ``error`` is why the job directory cannot be opened, or (a str) why the crawl cannot start
    at all, with ``cause`` for the ``diskfrontier/cannot_open`` stat (a FrontierError's is its
    class name). The scheduler's ``open`` returns normally after this call, holding nothing.
    """
    if isinstance(error, str):
        logger.error("cannot start the crawl: %s", error, extra={"spider": spider})
    else:
        message = str(error)
        if isinstance(error, ScrapyQueueFound):
            message += "; or give the crawl a new JOBDIR to start it afresh"
        logger.error("cannot open the job directory: %s", message, extra={"spider": spider})
        cause = type(error).__name__
    crawler.stats.set_value("diskfrontier/cannot_open", cause)

    def close_at_once(spider: Any) -> None:
        crawler.signals.disconnect(close_at_once, signal=signals.spider_opened)
        raise CloseSpider(REASON)

    def clear_spider(spider: Any, reason: str) -> None:
        crawler.signals.disconnect(clear_spider, signal=signals.spider_closed)
        crawler.spider = None  # connected last: every other spider_closed handler has run

    crawler.signals.connect(close_at_once, signal=signals.spider_opened, weak=False)
    crawler.signals.connect(clear_spider, signal=signals.spider_closed, weak=False)
