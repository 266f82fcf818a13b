"""A seeded model-based test: any sequence of operations, with clean reopens, matches an in-memory model."""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from diskfrontier import Frontier, Request


class FrontierModel(RuleBasedStateMachine):
    """The reference: a dict of priority -> list (stack) of urls, a seen set, an in-flight set."""

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp()
        self.frontier = Frontier(self.dir)
        self.stacks: dict[int, list[str]] = {}
        self.seen: set[str] = set()
        self.in_flight: dict[str, Request] = {}

    @rule(n=st.integers(0, 30), priority=st.integers(-2, 2))
    def push(self, n, priority):
        url = f"https://m.example/{n}"
        accepted = self.frontier.push(Request(url, priority=priority))
        assert accepted == (url not in self.seen)
        if accepted:
            self.seen.add(url)
            self.stacks.setdefault(priority, []).append(url)

    @rule(ns=st.lists(st.integers(0, 30), max_size=5), priority=st.integers(-2, 2))
    def push_many(self, ns, priority):
        expected = []
        for n in ns:
            url = f"https://m.example/{n}"
            if url not in self.seen:
                self.seen.add(url)
                expected.append(url)
                self.stacks.setdefault(priority, []).append(url)
        pushed = self.frontier.push_many(Request(f"https://m.example/{n}", priority=priority) for n in ns)
        assert pushed == len(expected)

    @rule()
    def pop(self):
        request = self.frontier.pop()
        live = [p for p, s in self.stacks.items() if s]
        if not live:
            assert request is None
            return
        top = max(live)
        assert request is not None and request.priority == top
        assert request.url == self.stacks[top].pop()
        self.in_flight[request.url] = request

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data())
    def done(self, data):
        url = data.draw(st.sampled_from(sorted(self.in_flight)))
        self.frontier.done(self.in_flight.pop(url))

    @rule()
    def reopen(self):
        self.frontier.close()
        # in-flight requests are re-queued on top of their priority's stack
        for url, request in self.in_flight.items():
            self.stacks.setdefault(request.priority, []).append(url)
        self.in_flight.clear()
        self.frontier = Frontier(self.dir)

    @invariant()
    def lengths_agree(self):
        assert len(self.frontier) == sum(len(s) for s in self.stacks.values())

    def teardown(self):
        self.frontier.close()
        shutil.rmtree(self.dir, ignore_errors=True)


FrontierModel.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None, derandomize=True)
TestFrontierMatchesModel = FrontierModel.TestCase
