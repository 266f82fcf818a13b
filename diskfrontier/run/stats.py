"""What a run of ``crawl()`` or ``acrawl()`` reports: ``RunStats`` of one run, ``CrawlStats`` of them all, and
the log line that ends a run."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger("diskfrontier")

__all__ = ["CrawlStats", "RunStats", "log_ended"]


@dataclass
class RunStats:
    """What one run did."""

    started: float  # time.time()
    ended: float = 0.0
    handled: int = 0  # requests taken from the frontier
    done: int = 0  # handler returned (acknowledged, by crawl() or by the handler itself)
    retried: int = 0  # handler raised, given back through the frontier's retry with backoff
    failed: int = 0  # recorded as failed: no retries left, a PermanentError or a "fail"
    failed_at_once: int = 0  # of failed: with no retry (a PermanentError, a "fail")
    host_blocks: int = 0  # times a host was blocked for its failures (host_errors in a row, a "backoff")
    robots_disallowed: int = 0  # requests robots.txt disallowed (finished without a fetch, not as failed)
    robots_held: int = 0  # requests given back because their site's robots.txt could not be fetched
    abandoned: int = 0  # requests in hand when the run returned, left in flight (they come back): see RunState
    revisits_scheduled: int = 0  # with revisit=: requests finished with their next visit scheduled
    revisits: int = 0  # of those, fetches of a page fetched before
    changes: int = 0  # of the revisits, those that found the page changed
    not_modified: int = 0  # of the revisits, those answered 304
    revisit_failures: int = 0  # revisits that failed after their retries, tried again later
    stopped_by: str = ""  # "finished", "stalled", "duration", "max_requests", "SIGINT", "SIGTERM", "interrupted"

    @property
    def seconds(self) -> float:
        return max(0.0, self.ended - self.started)

    @property
    def rate(self) -> float:
        """Requests handled a second."""
        return self.handled / self.seconds if self.seconds > 0 else 0.0


@dataclass
class CrawlStats:
    """What ``crawl()`` or ``acrawl()`` did: one ``RunStats`` a run, and their sums."""

    runs: list[RunStats] = field(default_factory=list)

    def _sum(self, name: str) -> int:
        return sum(getattr(run, name) for run in self.runs)

    @property
    def handled(self) -> int:
        return self._sum("handled")

    @property
    def done(self) -> int:
        return self._sum("done")

    @property
    def retried(self) -> int:
        return self._sum("retried")

    @property
    def failed(self) -> int:
        return self._sum("failed")

    @property
    def failed_at_once(self) -> int:
        return self._sum("failed_at_once")

    @property
    def host_blocks(self) -> int:
        return self._sum("host_blocks")

    @property
    def robots_disallowed(self) -> int:
        return self._sum("robots_disallowed")

    @property
    def robots_held(self) -> int:
        return self._sum("robots_held")

    @property
    def abandoned(self) -> int:
        return self._sum("abandoned")

    @property
    def revisits_scheduled(self) -> int:
        return self._sum("revisits_scheduled")

    @property
    def revisits(self) -> int:
        return self._sum("revisits")

    @property
    def changes(self) -> int:
        return self._sum("changes")

    @property
    def not_modified(self) -> int:
        return self._sum("not_modified")

    @property
    def revisit_failures(self) -> int:
        return self._sum("revisit_failures")

    @property
    def stopped_by(self) -> str:
        return self.runs[-1].stopped_by if self.runs else ""


def log_ended(run: str, stats: RunStats) -> None:
    """The line that ends a run (``run``: "run 2" under ``crawl()``, "acrawl"), under the ``diskfrontier`` logger."""
    log.info("%s ended (%s): %d handled, %d done, %d retried, %d failed (%d at once), %d host blocks, "
             "%.1f a second", run, stats.stopped_by, stats.handled, stats.done, stats.retried, stats.failed,
             stats.failed_at_once, stats.host_blocks, stats.rate)
