"""The reference model of a frontier: a plain in-memory queue that says what ``pop`` must hand out.

One model for every model-based test (the contract suite's, on both backends, the job
directory's own, and the kill -9 campaigns): a seen set, pending requests each with a priority
and a place, the requests in flight, their attempts, and the failed ones. ``pop`` hands out the
highest priority, then the last place (LIFO) or the first (FIFO). A retried or requeued request
takes a new place; a request in flight at a clean close comes back at its old place (Redis gives
its lease back) or at a new place, in the order they were popped (a job directory re-queues them
on top).

A kill (SIGKILL) adds what a model of a clean run does not need: every request in flight is
pending again at its old place (``crash``: at-least-once delivery, the queues rebuilt from the
journal), and a push or done that the kill cut short may or may not have taken effect
(``push_cut``, ``done_cut``) until a later pop or a drain shows which (``came_back``,
``settle``). What was ever handed out (``handed_out``) and what was finished (``completed``:
its ``done`` returned, so it is never handed out again) are kept for the checks.
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
        self.handed_out: set[str] = set()  # every URL a pop handed out, in any run
        self.completed: set[str] = set()  # every URL whose done() returned: never handed out again
        self.maybe_pushed: dict[str, tuple[int, int]] = {}  # url -> (priority, place): a push a kill cut short
        self.maybe_done: dict[str, tuple[int, int]] = {}  # url -> (priority, place): a done a kill cut short

    def _place(self) -> int:
        self.places += 1
        return self.places

    def _rank(self, url: str) -> tuple[int, int]:
        """The larger, the sooner ``pop`` hands out the pending ``url``."""
        priority, place = self.pending[url]
        return priority, place if self.lifo else -place

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
        return max(self.pending, key=self._rank)

    def in_pop_order(self) -> list[str]:
        """Every pending URL, in the order pops must hand them out."""
        return sorted(self.pending, key=self._rank, reverse=True)

    def pop(self) -> str | None:
        url = self.next()
        if url is not None:
            self.in_flight[url] = self.pending.pop(url)
            self.handed_out.add(url)
        return url

    def take(self, url: str) -> bool:
        """A pop handed out ``url`` where the order is not checked (after kills, the model cannot tell the
        frontier's order of what was in flight): it goes in flight. False if it may not be handed out now
        (it is not pending: never pushed, finished, or in flight already)."""
        self.came_back(url)
        if url not in self.pending:
            return False
        self.in_flight[url] = self.pending.pop(url)
        self.handed_out.add(url)
        return True

    def done(self, url: str) -> None:
        del self.in_flight[url]
        self.completed.add(url)

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

    # ------------------------------------------------------------------ kill -9

    def push_cut(self, url: str, priority: int = 0) -> None:
        """A push of a new ``url`` that a kill cut short: it may or may not be in the frontier, at the place
        a push made now would have."""
        self.maybe_pushed[url] = (priority, self._place())

    def done_cut(self, url: str) -> None:
        """A ``done`` of ``url`` (in flight) that a kill cut short: it may be finished, or come back."""
        self.maybe_done[url] = self.in_flight.pop(url)

    def crash(self) -> None:
        """Killed, then opened again, the queues rebuilt from the journal: every request in flight is pending
        again at its old place (at-least-once)."""
        self.reopen(keep_places=True)

    def came_back(self, url: str) -> None:
        """``url`` was seen again (popped or drained): a push of it that a kill cut short had landed, a done
        of it that a kill cut short had not; it is pending (at the place it had)."""
        held = self.maybe_pushed.pop(url, None)
        if held is not None:
            self.seen.add(url)
            self.attempts[url] = 0
            self.pending[url] = held
        held = self.maybe_done.pop(url, None)
        if held is not None:
            self.pending[url] = held

    def settle(self, returned: set[str]) -> None:
        """A drain handed out ``returned`` and nothing else: every call a kill cut short took effect as it
        shows (those that did not come back: the push had not landed, the done had)."""
        for url in returned:
            self.came_back(url)
        self.completed.update(self.maybe_done)
        self.maybe_pushed.clear()
        self.maybe_done.clear()

    def __len__(self) -> int:
        return len(self.pending)

    @property
    def finished(self) -> bool:
        return not self.pending and not self.in_flight
