"""Steering a running Redis crawl for every client at once: a pause (the ``meta`` field ``paused`` of every
shard, ``SET_PAUSE``) and drops of pending requests, in steps of ``DROP_BATCH`` requests each one script.

``drop(host=...)`` goes through the host's requests waiting for a time (``delayed``, read with ZSCAN) and
then its queue (``DROP_HOST``); ``drop(match=...)`` reads the stored requests with HSCAN (``MergedReader``),
matches them here, and drops those of each batch still pending when its step runs (``DROP_IDS``). Clients
may pop and push meanwhile: a request pushed during a drop may or may not be dropped, and one leased before
its step is left alone.
"""

from __future__ import annotations

import re

from ..contract.values import Dropped
from .merged import MergedReader
from .shards import Router
from .transport import Transport

DROP_BATCH = 1000  # requests a drop step looks at (and drops at most)


class Steering:
    """Pause, resume and drop on the crawl that ``transport`` runs scripts on and ``reader`` reads."""

    def __init__(self, transport: Transport, reader: MergedReader, router: Router) -> None:
        self.transport, self.reader, self.router = transport, reader, router

    def set_paused(self, paused: bool) -> None:
        """Pause (or resume) every shard; a pause keeps the time it began if the crawl was paused already."""
        self.transport.run_everywhere("pause" if paused else "resume", "SET_PAUSE", ["1" if paused else "0"])

    def drop(self, host: str | None, pattern: re.Pattern[str] | None, dry_run: bool, show: int) -> Dropped:
        """Drop the pending requests of ``host``, or (``host`` None) those whose URL ``pattern`` finds."""
        if pattern is None:
            assert host is not None
            return self._drop_host(host, dry_run, show)
        return self._drop_matching(pattern, dry_run, show)

    def _drop_host(self, host: str, dry_run: bool, show: int) -> Dropped:
        # what waits for a time first: a request released meanwhile into the queue is dropped from there
        count = 0
        shard = self.router.of_slot(host)
        urls: dict[str, list[str]] = {"d": [], "q": []}
        for phase in ("d", "q"):
            cursor = "0"
            while True:
                answer = self.transport.run("drop", "DROP_HOST", [
                    host, phase, cursor, DROP_BATCH, "1" if dry_run else "0", max(0, show - len(urls[phase]))], shard)
                count += int(answer[0])
                shown = answer[2:]
                for at in range(0, len(shown), 2):
                    urls[phase].append(self.reader.readers[shard].body("req", shown[at], shown[at + 1]).url)
                cursor = answer[1].decode()
                if cursor == "0":
                    break
        return Dropped(count, (urls["q"] + urls["d"])[:show])

    def _drop_matching(self, pattern: re.Pattern[str], dry_run: bool, show: int) -> Dropped:
        count = 0
        urls: list[str] = []
        counted: set[tuple[int, bytes]] = set()  # HSCAN may return an id twice
        batch: list[tuple[bytes, str]] = []
        at_shard = 0

        def flush(shard: int) -> None:
            nonlocal count
            answer = self.transport.run("drop", "DROP_IDS", ["1" if dry_run else "0", *(rid for rid, _ in batch)],
                                        shard)
            for (rid, url), hit in zip(batch, answer, strict=True):
                if hit and (shard, rid) not in counted:
                    counted.add((shard, rid))
                    count += 1
                    if len(urls) < show:
                        urls.append(url)
            batch.clear()

        for shard in range(len(self.reader.readers)):
            flush(shard)  # no ids: the shard's checks, before the scan (a crawl that is gone is named, not scanned)
        for shard, rid, request in self.reader.stored_requests(DROP_BATCH):
            if shard != at_shard and batch:
                flush(at_shard)
            at_shard = shard
            if (shard, rid) not in counted and pattern.search(request.url):
                batch.append((rid, request.url))
                if len(batch) >= DROP_BATCH:
                    flush(shard)
        if batch:
            flush(at_shard)
        return Dropped(count, urls)
