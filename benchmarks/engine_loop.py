"""A Scrapy scheduler driven the way Scrapy's engine drives it, for ``bench_frontier.py``.

The engine adds each request ``next_request`` hands out to its slot's in-progress set and removes it
once the response is handled; here a request is handled once 16 more have been handed out (the
oldest leaves the set when a 17th arrives: ``CONCURRENT_REQUESTS``' default). After the drain the
engine asks once more and checks ``has_pending_requests()``, as it does before closing the spider.
The requests carry a callback (a method of the crawler's spider, as a spider yields them); they are
enqueued into an open scheduler and taken out of the same one, as in a running crawl.
"""

from __future__ import annotations

import collections
import time
from types import SimpleNamespace
from typing import Any

IN_PROGRESS = 16  # Scrapy's CONCURRENT_REQUESTS default


class EngineStandIn:
    """What a scheduler asks of Scrapy's engine: its slot's in-progress set and its downloader."""

    def __init__(self, crawler: Any) -> None:
        from scrapy.core.downloader import Downloader

        self._slot = SimpleNamespace(inprogress=set())
        self.downloader = Downloader(crawler)


def engine_loop(scheduler_path: str, settings: dict, spider_cls: type, urls: list[str], priorities: list[int],
                duplicates: list[int], reopen: bool = False) -> dict:
    """Enqueue the workload into ``scheduler_path`` and take it out as the engine does; the rates per second
    of ``enqueue_request`` and of ``next_request`` (its done records included, for diskfrontier's).
    ``reopen``: the scheduler is closed after the enqueues and a new one takes them out (a resumed crawl)."""
    from scrapy import Request as ScrapyRequest
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(spider_cls, settings)
    crawler.spider = spider = spider_cls.from_crawler(crawler)
    crawler.engine = engine = EngineStandIn(crawler)
    requests = [ScrapyRequest(u, priority=p, callback=spider.parse_item) for u, p in zip(urls, priorities, strict=True)]
    requests += [ScrapyRequest(urls[i], priority=priorities[i], callback=spider.parse_item) for i in duplicates]
    scheduler = load_object(scheduler_path).from_crawler(crawler)
    scheduler.open(spider)
    try:
        t = time.perf_counter()
        for request in requests:
            scheduler.enqueue_request(request)
        enqueue_s = time.perf_counter() - t
        pending = len(scheduler)
        del requests
        if reopen:
            scheduler.close("shutdown")
            scheduler = load_object(scheduler_path).from_crawler(crawler)
            scheduler.open(spider)
        in_progress: set = engine._slot.inprogress
        out: collections.deque = collections.deque()
        taken = 0
        t = time.perf_counter()
        while (request := scheduler.next_request()) is not None:
            taken += 1
            in_progress.add(request)
            out.append(request)
            if len(out) > IN_PROGRESS:
                in_progress.discard(out.popleft())
        while out:
            in_progress.discard(out.popleft())
        last = scheduler.next_request()
        left = scheduler.has_pending_requests()
        next_s = time.perf_counter() - t
    finally:
        scheduler.close("finished")
        engine.downloader.close()
    if taken != pending or last is not None or left:
        raise RuntimeError(f"{scheduler_path}: {pending:,} enqueued, {taken:,} taken out, "
                           f"then {last!r} and has_pending_requests() {left}")
    return {"enqueue": (len(urls) + len(duplicates)) / enqueue_s, "next_request": taken / next_s, "taken": taken}
