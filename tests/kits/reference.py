"""The reference model of a frontier: a plain in-memory queue that says what ``pop`` must hand out.

One model for every model-based test (the contract suite's, on both backends, and the job
directory's own): a seen set, pending requests each with a priority and a place, the requests
in flight, their attempts, and the failed ones. ``pop`` hands out the highest priority, then the
last place (LIFO) or the first (FIFO). A retried or requeued request takes a new place; a
request in flight at a clean close comes back at its old place (Redis gives its lease back) or
at a new place, in the order they were popped (a job directory re-queues them on top).
"""

from __future__ import annotations


class Reference:
    """What a frontier with no host rules must do, request by request (requests named by URL)."""

    def __init__(self, order: str = "lifo") -> None:
        if order not in ("lifo", "fifo"):
            raise ValueError(order)
        self.lifo = order == "lifo"
        self.places = 0
        self.seen: set[str] = set()
        self.pending: dict[str, tuple[int, int]] = {}  # url -> (priority, place)
        self.in_flight: dict[str, tuple[int, int]] = {}  # url -> (priority, place), in pop order
        self.attempts: dict[str, int] = {}
        self.failed: dict[str, int] = {}  # url -> priority, oldest failure first

    def _place(self) -> int:
        self.places += 1
        return self.places

    def push(self, url: str, priority: int = 0, *, dont_filter: bool = False) -> bool:
        """Whether the frontier must accept the push."""
        if url in self.seen and not dont_filter:
            return False
        self.seen.add(url)
        self.pending[url] = (priority, self._place())
        self.attempts[url] = 0
        return True

    def push_many(self, urls: list[str], priority: int = 0) -> int:
        """How many the frontier must queue."""
        return sum(self.push(url, priority) for url in urls)

    def next(self) -> str | None:
        """The URL ``pop`` must hand out now (None: nothing pending)."""
        if not self.pending:
            return None
        if self.lifo:
            return max(self.pending, key=lambda u: self.pending[u])
        return max(self.pending, key=lambda u: (self.pending[u][0], -self.pending[u][1]))

    def pop(self) -> str | None:
        url = self.next()
        if url is not None:
            self.in_flight[url] = self.pending.pop(url)
        return url

    def done(self, url: str) -> None:
        del self.in_flight[url]

    def retry(self, url: str) -> None:
        priority, _ = self.in_flight.pop(url)
        self.pending[url] = (priority, self._place())
        self.attempts[url] += 1

    def fail(self, url: str) -> None:
        self.failed[url] = self.in_flight.pop(url)[0]

    def requeue_failed(self) -> int:
        """Failed requests pending again, oldest failure first, with attempts 0."""
        count = len(self.failed)
        for url, priority in self.failed.items():
            self.pending[url] = (priority, self._place())
            self.attempts[url] = 0
        self.failed.clear()
        return count

    def reopen(self, *, keep_places: bool) -> None:
        """A clean close and open: what was in flight is pending again."""
        for url, (priority, place) in self.in_flight.items():
            self.pending[url] = (priority, place if keep_places else self._place())
        self.in_flight.clear()

    def __len__(self) -> int:
        return len(self.pending)

    @property
    def finished(self) -> bool:
        return not self.pending and not self.in_flight
