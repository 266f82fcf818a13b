"""Load on a crawl while its server (Redis or PostgreSQL) goes down and comes back: a pusher and workers in
threads that go on through the outage, what each call that returned acknowledged, and the check that nothing
acknowledged was lost once the server is back."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from diskfrontier import FrontierError, Request


class Load:
    """One pusher and ``workers`` workers on one crawl, each a thread with a client of its own opened by
    ``open_crawl(**settings)`` (a worker's with ``lease=1.0`` and ``worker_settings``). A call that raises
    ``unavailable`` is an outage, tried again after a pause (a done so cut may or may not have landed: it is
    ``uncertain``); any other error is kept in ``errors``, a failure of the test."""

    def __init__(self, open_crawl: Callable[..., Any], unavailable: type[Exception], *, workers: int = 2,
                 **worker_settings: Any) -> None:
        self.open_crawl, self.unavailable, self.worker_settings = open_crawl, unavailable, worker_settings
        self.acked_push: set[str] = set()
        self.acked_done: set[str] = set()
        self.uncertain: set[str] = set()
        self.errors: list[str] = []
        self.outages = {"push": 0, "done": 0}
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._pusher)] + [
            threading.Thread(target=self._worker) for _ in range(workers)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def end(self, wait: float) -> None:
        """Stop every thread and wait for each (``wait`` seconds at most)."""
        self.stop.set()
        for thread in self.threads:
            thread.join(wait)

    def _pusher(self) -> None:
        f = self.open_crawl()
        n = 0
        while not self.stop.is_set():
            request = Request(f"https://h{n % 5}.example/{n}")
            try:
                f.push(request)
                self.acked_push.add(request.url)
                n += 1
            except self.unavailable:
                self.outages["push"] += 1
                time.sleep(0.01)
            except Exception as exc:  # anything else is a failure of the test
                self.errors.append(repr(exc))
        f.close()

    def _worker(self) -> None:
        f = self.open_crawl(lease=1.0, **self.worker_settings)
        while not self.stop.is_set():
            try:
                request = f.pop()
            except self.unavailable:
                time.sleep(0.01)
                continue
            except Exception as exc:
                self.errors.append(repr(exc))
                continue
            if request is None:
                time.sleep(0.001)
                continue
            try:
                f.done(request)
                self.acked_done.add(request.url)
            except self.unavailable:
                self.outages["done"] += 1
                self.uncertain.add(request.url)
                time.sleep(0.01)
            except Exception as exc:
                self.errors.append(repr(exc))
        with contextlib.suppress(FrontierError):  # a lease it holds is taken back all the same
            f.close()

    def check_nothing_lost(self, frontier: Any) -> dict[str, int]:
        """What ``frontier`` (a new client of the crawl, once the load ended) holds against what was
        acknowledged: no error, each pending request there once, no acknowledged done back, no acknowledged push
        gone, the done count between the acknowledged dones and those plus the uncertain ones. Its stats."""
        assert not self.errors, self.errors[:3]
        stats = frontier.stats()
        pending = [r.url for r in frontier.pending_requests()]  # leased ones included
        assert len(pending) == len(set(pending)) == stats["pending"] + stats["in_flight"]
        assert not (set(pending) & self.acked_done)  # an acknowledged done never comes back
        lost = self.acked_push - set(pending) - self.acked_done - self.uncertain
        assert not lost, f"{len(lost)} acknowledged pushes are gone: {sorted(lost)[:3]}"
        assert len(self.acked_done) <= stats["done"] <= len(self.acked_done) + len(self.uncertain)
        return stats
