"""The frontier contract, run against both backends: a job directory and a real Redis server.

Each test gets ``open_frontier(**settings)``, which opens the same frontier again on every call
(the same job directory, or the same Redis crawl), so reopening is part of what is tested.
"""

from __future__ import annotations

import math
import threading
import time

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from diskfrontier import Frontier, NotInFlight, RedisFrontier, Request


class Backend:
    """Opens one frontier of a kind, again and again."""

    def __init__(self, kind: str, tmp_path, redis_url: str | None, crawl: str) -> None:
        self.kind, self.path, self.url, self.crawl = kind, str(tmp_path / "job"), redis_url, crawl
        self.opened: list = []

    def open(self, **kwargs):
        if self.kind == "jobdir":
            frontier = Frontier(self.path, **kwargs)
        else:
            frontier = RedisFrontier(self.url, crawl=self.crawl, **kwargs)
        self.opened.append(frontier)
        return frontier

    def close_all(self) -> None:
        for frontier in self.opened:
            frontier.close()


@pytest.fixture(params=["jobdir", "redis"])
def backend(request, tmp_path, crawl_name):
    url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    b = Backend(request.param, tmp_path, url, crawl_name)
    yield b
    b.close_all()


def drain(frontier) -> list[Request]:
    out = []
    while (r := frontier.pop()) is not None:
        out.append(r)
        frontier.done(r)
    return out


def test_push_dedupes_and_dont_filter_bypasses(backend):
    f = backend.open()
    assert f.push(Request("https://a.example/")) is True
    assert f.push(Request("https://a.example/")) is False
    assert f.push(Request("https://a.example/#frag")) is False  # the same canonical URL
    assert f.push(Request("https://a.example/", dont_filter=True)) is True
    f.close()
    f = backend.open()
    assert f.push(Request("https://a.example/")) is False  # remembered across a reopen
    assert len(f) == 2
    assert f.has_seen(Request("https://a.example/").fingerprint)
    assert not f.has_seen(Request("https://b.example/").fingerprint)


def test_priority_then_lifo_order_across_hosts(backend):
    f = backend.open()
    for i in range(9):
        f.push(Request(f"https://h{i % 2}.example/{i}", priority=i % 3))
    assert [r.url.rsplit("/", 1)[1] for r in drain(f)] == ["8", "5", "2", "7", "4", "1", "6", "3", "0"]


def test_fifo_order_is_fixed_when_made(backend):
    f = backend.open(order="fifo")
    f.push_many(Request(f"https://h{i % 3}.example/{i}") for i in range(6))
    f.close()
    f = backend.open()
    assert f.order == "fifo"
    assert [r.url[-1] for r in drain(f)] == ["0", "1", "2", "3", "4", "5"]


def test_done_is_final_and_what_is_held_at_close_comes_back(backend):
    f = backend.open()
    f.push_many(Request(f"https://a.example/{i}") for i in range(3))
    first = f.pop()
    f.done(first)
    with pytest.raises(NotInFlight):
        f.done(first)
    held = f.pop()
    assert len(f) == 1
    f.close()
    f = backend.open()
    assert len(f) == 2
    urls = {r.url for r in drain(f)}
    assert held.url in urls and first.url not in urls and f.finished


def test_a_request_round_trips_with_every_field(backend):
    f = backend.open()
    sent = Request("https://a.example/api?q=1", method="POST", headers={"X-A": "1", "Accept": ["a", "b"]},
                   body=b"\x00\xffdata", priority=-7, meta={"depth": 2, "tags": ["x"], "blob": b"\x01"},
                   slot="pool-1")
    f.push(sent)
    f.close()
    got = backend.open().pop()
    assert got.to_dict() == sent.to_dict()
    assert got.fingerprint == sent.fingerprint and got.slot == "pool-1" and got.attempts == 0


def test_retry_counts_attempts_and_waits_its_delay(backend):
    f = backend.open()
    f.push(Request("https://a.example/x"))
    r = f.pop()
    before = time.time()
    f.retry(r, delay=0.4)
    assert f.pop() is None and len(f) == 1 and not f.finished
    again = f.pop(timeout=10)
    assert again is not None and time.time() - before >= 0.35  # the server's clock may differ by a little
    assert again.url == r.url and again.attempts == 1
    f.retry(again)
    third = f.pop()
    assert third.attempts == 2
    f.done(third, refetch_after=3600)
    assert len(f) == 1 and f.pop() is None
    f.close()
    f = backend.open()
    assert f.pop() is None and f.next_ready() is not None and f.next_ready() > time.time() + 3000


def test_not_before_holds_a_request_back(backend):
    f = backend.open()
    f.push(Request("https://a.example/later"), not_before=time.time() + 0.3)
    f.push(Request("https://a.example/now"))
    assert f.pop().url.endswith("/now")
    assert f.pop() is None
    assert 0 < f.next_ready() - time.time() <= 0.35
    assert f.pop(timeout=5).url.endswith("/later")


def test_per_host_and_delay_hold_for_every_host(backend):
    f = backend.open(per_host=1, delay=0.2)
    f.push_many(Request(f"https://h{i % 2}.example/{i}") for i in range(4))
    a, b = f.pop(), f.pop()
    assert {a.slot, b.slot} == {"h0.example", "h1.example"}
    assert f.pop() is None  # one in flight per host
    f.done(a)
    assert f.pop() is None  # its delay has not passed
    c = f.pop(timeout=5)
    assert c.slot == a.slot


def test_block_unblock_and_budget(backend):
    f = backend.open()
    f.push_many(Request(f"https://a.example/{i}") for i in range(3))
    f.push(Request("https://b.example/0"))
    f.block("a.example", math.inf)
    f.set_budget("b.example", 0)
    assert f.pop() is None and f.next_ready() is None
    assert f.pop(timeout=None) is None  # nothing could become ready by waiting
    f.close()
    f = backend.open()  # the settings are kept
    assert f.pop() is None
    f.unblock("a.example")
    f.set_budget("a.example", 2)
    got = [f.pop(), f.pop(), f.pop()]
    assert [r is not None for r in got] == [True, True, False]
    info = {h.host: h for h in f.hosts()}
    assert info["a.example"].budget == 2 and info["a.example"].in_flight == 2 and info["a.example"].pending == 1
    assert info["b.example"].budget == 0 and info["b.example"].pending == 1
    f.set_delay("a.example", 5.0)
    assert {h.host: h for h in f.hosts()}["a.example"].delay == 5.0


def test_a_waiting_pop_wakes_on_a_push_from_another_thread(backend):
    f = backend.open()
    got = []
    waiter = threading.Thread(target=lambda: got.append(f.pop(timeout=10)))
    waiter.start()
    time.sleep(0.1)
    f.push(Request("https://a.example/late"))
    waiter.join(10)
    assert got and got[0] is not None and got[0].url.endswith("/late")


def test_pop_none_returns_once_the_crawl_is_finished(backend):
    f = backend.open()
    f.push(Request("https://a.example/"))
    held = f.pop()
    got = []
    waiter = threading.Thread(target=lambda: got.append(f.pop(timeout=None)))
    waiter.start()
    time.sleep(0.1)
    assert waiter.is_alive()
    f.done(held)
    waiter.join(10)
    assert not waiter.is_alive() and got == [None] and f.finished


def test_threads_share_one_frontier_and_nothing_is_handed_out_twice(backend):
    f = backend.open()
    f.push_many(Request(f"https://h{i % 7}.example/{i}") for i in range(600))
    seen: list[str] = []
    lock = threading.Lock()

    def work():
        while (r := f.pop()) is not None:
            with lock:
                seen.append(r.url)
            f.done(r)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 600 and len(set(seen)) == 600 and f.finished


def test_a_delay_set_after_a_hand_out_counts_from_it(backend):
    f = backend.open()
    f.push_many(Request(f"https://a.example/{i}") for i in range(2))
    handed = time.time()
    first = f.pop()
    f.set_delay("a.example", 30.0)  # a Crawl-delay read from the first response
    f.done(first)
    assert f.pop() is None and handed + 29 < f.next_ready() < time.time() + 31
    f.set_delay("a.example", 0.0)
    assert f.pop() is not None


def test_a_request_waiting_for_a_time_on_a_host_held_for_ever_is_not_waited_for(backend):
    f = backend.open()
    f.push(Request("https://blocked.example/0"), not_before=time.time() + 3)
    f.push(Request("https://spent.example/0"), not_before=time.time() + 3)
    f.block("blocked.example", math.inf)
    f.set_budget("spent.example", 0)
    assert f.next_ready() is None
    started = time.monotonic()
    assert f.pop(timeout=None) is None and time.monotonic() - started < 1.5  # at once, not in 3 s
    f.push(Request("https://free.example/0"), not_before=time.time() + 60)
    assert f.next_ready() > time.time() + 50


def test_hosts_count_pending_in_flight_and_done(backend):
    f = backend.open()
    f.push_many(Request(f"https://h{i % 2}.example/{i}") for i in range(5))
    f.done(f.pop())
    held = f.pop()
    info = {h.host: (h.pending, h.in_flight, h.done) for h in f.hosts()}
    assert sum(p for p, _, _ in info.values()) == 3
    assert sum(i for _, i, _ in info.values()) == 1 and sum(d for _, _, d in info.values()) == 1
    assert info[held.slot][1] == 1
    for host in f.hosts():  # one host found alone is the host in the list
        assert f.host(host.host) == host
    assert f.host("never.example") is None
    f.set_budget("never.example", 3)  # a setting alone makes a host worth showing
    assert f.host("never.example").budget == 3 and f.host("never.example").pending == 0
    with pytest.raises(ValueError):
        f.host("")


class ContractModel(RuleBasedStateMachine):
    """Any sequence of pushes, pops, dones, retries and reopens matches a model of the queue.

    The model keeps each pending request's (priority, place); a pop must hand out the one
    of highest priority and first place. A retried request takes a new place; a request
    held at close comes back at its old place (Redis: its lease is given back) or on top
    (a job directory re-queues them at close, in the order they were popped).
    """

    backend: Backend

    def __init__(self):
        super().__init__()
        self.frontier = self.backend.open()
        self.places = 0
        self.pending: dict[str, tuple[int, int]] = {}  # url -> (priority, place)
        self.seen: set[str] = set()
        self.held: dict[str, tuple[Request, int]] = {}

    def place(self) -> int:
        self.places += 1
        return self.places

    @rule(n=st.integers(0, 25), priority=st.integers(-1, 1))
    def push(self, n, priority):
        url = f"https://h{n % 3}.example/{n}"
        assert self.frontier.push(Request(url, priority=priority)) == (url not in self.seen)
        if url not in self.seen:
            self.seen.add(url)
            self.pending[url] = (priority, self.place())

    @rule()
    def pop(self):
        request = self.frontier.pop()
        if not self.pending:
            assert request is None
            return
        want = max(self.pending, key=lambda u: (self.pending[u][0], self.pending[u][1]))  # LIFO: last place
        assert request is not None and request.url == want
        self.held[want] = (request, self.pending.pop(want)[1])

    @precondition(lambda self: self.held)
    @rule(data=st.data(), retry=st.booleans())
    def finish(self, data, retry):
        url = data.draw(st.sampled_from(sorted(self.held)))
        request, _ = self.held.pop(url)
        if retry:
            self.frontier.retry(request)
            self.pending[url] = (request.priority, self.place())
        else:
            self.frontier.done(request)

    @rule()
    def reopen(self):
        self.frontier.close()
        for url, (request, place) in self.held.items():  # in the order they were popped
            self.pending[url] = (request.priority, place if self.backend.kind == "redis" else self.place())
        self.held.clear()
        self.frontier = self.backend.open()

    @invariant()
    def lengths_agree(self):
        assert len(self.frontier) == len(self.pending)

    def teardown(self):
        self.frontier.close()


@pytest.mark.parametrize("kind", ["jobdir", "redis"])
def test_any_sequence_matches_the_model(kind, tmp_path_factory, request):
    url = request.getfixturevalue("redis_url") if kind == "redis" else None
    runs = iter(range(10**6))

    class Run(ContractModel):
        def __init__(self):
            type(self).backend = Backend(kind, tmp_path_factory.mktemp("model"), url, f"model{next(runs)}")
            super().__init__()

    Run.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None, derandomize=True)
    Run.TestCase().runTest()
