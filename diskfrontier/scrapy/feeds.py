"""A crawl's feed exports (``FEEDS``, ``-o``), and getting what they hold onto the disk.

Scrapy's ``FeedExporter`` writes each item to its feed's file as the item leaves the
pipelines, through Python's buffer: an item is in the file only when the buffer is next
written out, and on the disk only after an fsync. A request whose items are still in that
buffer is not finished as far as its user is concerned: ``sync`` writes out and fsyncs
every local feed file, so that the requests finished before the call can be marked done.

Feeds that are not local files differ: stdout is flushed (a pipe or a terminal has nothing
to fsync), and S3, GCS, FTP and post-processed (compressed) feeds are written to their
storage only when they close, at the end of the crawl or of a batch: a kill loses them
whatever the scheduler does, so nothing waits for them (``store_at_close`` names them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from scrapy.extensions.feedexport import FeedExporter, FileFeedStorage, StdoutFeedStorage
from w3lib.url import file_uri_to_path

LINE_FORMATS = ("jsonlines", "jl", "csv")  # formats in which one item is one line


def feed_exporter(crawler: Any) -> FeedExporter | None:
    """The crawler's feed exporter, if it has feeds (Scrapy leaves it out when ``FEEDS`` is empty) and
    its extensions are set (Scrapy 2.14+ raises ``RuntimeError`` before they are: then None)."""
    try:
        manager = getattr(crawler, "extensions", None)
    except RuntimeError:
        return None
    extensions = getattr(manager, "middlewares", ())
    return next((ext for ext in extensions if isinstance(ext, FeedExporter)), None)


@dataclass
class Feed:
    """One entry of ``FEEDS``: its URI and what kind of storage Scrapy gives it."""

    uri: str
    options: dict[str, Any]
    storage: type

    @property
    def local(self) -> bool:
        """A file on this machine, written through as items come (not compressed at close)."""
        return issubclass(self.storage, FileFeedStorage) and "postprocessing" not in self.options

    @property
    def stdout(self) -> bool:
        return issubclass(self.storage, StdoutFeedStorage)

    @property
    def path(self) -> str | None:
        """The file of a local feed whose name has no ``%(...)s`` parameters, else None."""
        if not self.local or "%(" in self.uri:
            return None
        return file_uri_to_path(self.uri) if self.uri.startswith("file:") else self.uri


class FeedFiles:
    """The feeds of a crawl, flushed and fsynced on demand."""

    def __init__(self, exporter: FeedExporter) -> None:
        self.exporter = exporter
        storages: dict[str, type] = getattr(exporter, "storages", {})
        self.feeds = []
        for uri, options in exporter.feeds.items():
            scheme = urlsplit(uri).scheme
            if len(scheme) == 1:  # a Windows drive letter, as Scrapy reads it
                scheme = ""
            self.feeds.append(Feed(uri, options, storages.get(scheme) or storages.get("file") or FileFeedStorage))
        self._open: dict[int, Any] = {}  # id -> feed slot seen open at the last sync (batches close on their own)

    @property
    def store_at_close(self) -> list[str]:
        """The URIs of feeds written to their storage only when they close (nothing to wait for)."""
        return [feed.uri for feed in self.feeds if not feed.local and not feed.stdout]

    @property
    def synced(self) -> bool:
        """True if some feed is a file or stdout: ``sync`` has something to do."""
        return any(feed.local or feed.stdout for feed in self.feeds)

    def sync(self) -> None:
        """Write out every local feed's buffer and fsync its file; flush stdout. Raises ``OSError``."""
        slots = list(getattr(self.exporter, "slots", ()))
        gone = [slot for key, slot in self._open.items() if all(key != id(s) for s in slots)]
        for slot in slots + gone:
            self._sync_slot(slot)
        self._open = {id(slot): slot for slot in slots}

    def _sync_slot(self, slot: Any) -> None:
        storage, file = getattr(slot, "storage", None), getattr(slot, "file", None)
        if file is None or "postprocessing" in getattr(slot, "feed_options", {}):
            return
        if isinstance(storage, StdoutFeedStorage):
            file.flush()
            return
        if not isinstance(storage, FileFeedStorage):
            return
        if not file.closed:
            stream = getattr(getattr(slot, "exporter", None), "stream", None)  # the CSV exporter's text layer
            if stream is not None and not stream.closed:
                stream.flush()
            file.flush()
            os.fsync(file.fileno())
            return
        # a batch file (FEED_EXPORT_BATCH_ITEM_COUNT) closed since the last sync: its bytes reached the OS
        fd = os.open(storage.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def end_torn_lines(self) -> list[tuple[str, int]]:
        """Give a line end to every appended line-format feed file whose last line was cut (by a kill).

        Scrapy appends to the file on the next run (``-o``), which would glue the next item to
        the cut one and spoil both; with a line end, the cut bytes stay on a line of their own
        (their request was not done, and is fetched again). Returns (path, bytes of the cut line).
        """
        ended = []
        for feed in self.feeds:
            path = feed.path
            if path is None or feed.options.get("overwrite") or feed.options.get("format") not in LINE_FORMATS:
                continue
            try:
                with open(path, "rb+") as f:
                    size = f.seek(0, os.SEEK_END)
                    if size == 0:
                        continue
                    f.seek(size - 1)
                    if f.read(1) == b"\n":
                        continue
                    cut = _last_line_length(f, size)
                    f.write(b"\n")
                    f.flush()
                    os.fsync(f.fileno())
            except FileNotFoundError:
                continue
            ended.append((path, cut))
        return ended

    def overwritten(self) -> list[str]:
        """The local feeds that are overwritten at each run (``-O``, ``overwrite: True``)."""
        return [feed.uri for feed in self.feeds if feed.local and feed.options.get("overwrite")]


def _last_line_length(f: Any, size: int) -> int:
    """Bytes after the last line end of an open file of ``size`` bytes (the position is left at the end)."""
    start = max(0, size - 65536)
    f.seek(start)
    tail = f.read()
    f.seek(size)
    return len(tail) - tail.rfind(b"\n") - 1 if b"\n" in tail else size
