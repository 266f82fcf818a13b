"""Requests the engine has finished, held until their items are safe on disk.

When the engine has finished with a request (``completion.py``), its items have been
through the pipelines and handed to the feed exports, which may still hold them in a
buffer. Marking the request done then would lose them for good on ``kill -9``: the
request is never fetched again, and its items never reach the file. So finished requests
wait here; every ``interval`` seconds (or once ``most`` are waiting) the feed files are
written out and fsynced in one step, and everything that was waiting before that sync is
released, to be marked done together. Killed at any moment, a crawl fetches again only
what was in the engine or waiting here: items may come twice, never go missing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ..request.model import Request
from .feeds import FeedFiles, feed_exporter

logger = logging.getLogger("diskfrontier.scrapy")

MOST_WAITING = 10_000  # a sync is made sooner than the interval once this many requests wait


class ItemsGate:
    """Finished requests, released once the feeds hold their items on disk."""

    def __init__(self, feeds: FeedFiles | None, interval: float, on_error: Callable[[OSError], None],
                 most: int = MOST_WAITING) -> None:
        self.feeds = feeds  # None: nothing to wait for (no feeds, or the feature turned off)
        self.interval = interval
        self.most = most
        self.on_error = on_error
        self._waiting: list[Request] = []
        self._synced_at = time.monotonic()
        self.syncs = 0

    def add(self, finished: list[Request]) -> None:
        """Requests the engine has finished with (their items, if any, are in the feeds' buffers)."""
        self._waiting += finished

    def release(self, force: bool = False) -> list[Request]:
        """The requests whose items are now safe: all that wait, when a sync is due (or ``force``) and
        succeeds; else none. A sync that fails keeps them waiting (reported to ``on_error``)."""
        if not self._waiting:
            return []
        if self.feeds is not None:
            now = time.monotonic()
            if not force and len(self._waiting) < self.most and now - self._synced_at < self.interval:
                return []
            try:
                self.feeds.sync()
            except OSError as exc:
                self.on_error(exc)
                return []
            self._synced_at = now
            self.syncs += 1
        released, self._waiting = self._waiting, []
        return released

    def due_in(self) -> float | None:
        """Seconds until the next sync is due, if requests wait for one."""
        if not self._waiting or self.feeds is None:
            return None
        return max(0.0, self.interval - (time.monotonic() - self._synced_at))

    def waiting(self) -> list[Request]:
        """The requests held until the next sync."""
        return list(self._waiting)

    def __len__(self) -> int:
        return len(self._waiting)


def open_gate(crawler: Any, enabled: bool, interval: float, resumed: bool, spider: Any,
              on_error: Callable[[OSError], None]) -> ItemsGate:
    """The gate of a crawl: waiting on its feeds when ``enabled`` and it has local files or stdout among
    them; saying at open what is not covered (feeds stored only at close, overwritten feeds)."""
    exporter = feed_exporter(crawler) if enabled else None
    feeds = FeedFiles(exporter) if exporter is not None else None
    if feeds is None:
        return ItemsGate(None, interval, on_error)
    extra = {"spider": spider}
    for uri in feeds.store_at_close:
        logger.warning("feed %s is written to its storage only when it closes (at the end of the crawl or of a "
                       "batch): a crawl killed before then loses its items whatever the scheduler does; only "
                       "local files and stdout are synced before requests are marked done", uri, extra=extra)
    if resumed:
        for uri in feeds.overwritten():
            logger.warning("feed %s is overwritten at each run (-O, overwrite=True): the items of the earlier "
                           "runs of this resumed crawl are lost from it; use -o to append", uri, extra=extra)
    for path, cut in feeds.end_torn_lines():
        logger.warning("feed %s ended with a cut line of %d bytes (left by a crawl that was killed); a line end "
                       "was added so that new items start on a line of their own (the cut item's request was "
                       "not done, and is fetched again)", path, cut, extra=extra)
    return ItemsGate(feeds if feeds.synced else None, interval, on_error)
