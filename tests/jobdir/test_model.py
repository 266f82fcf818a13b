"""A seeded model-based test: any sequence of operations, with clean reopens, matches the reference
model (``kits/reference.py``, the one the contract suite checks both backends against)."""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from reference import Reference

from diskfrontier import Frontier, Request


class FrontierModel(RuleBasedStateMachine):
    """A job directory and the reference model, driven side by side (priorities -2 to 2, LIFO)."""

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp()
        self.frontier = Frontier(self.dir)
        self.model = Reference("lifo")
        self.in_flight: dict[str, Request] = {}

    @rule(n=st.integers(0, 30), priority=st.integers(-2, 2))
    def push(self, n, priority):
        url = f"https://m.example/{n}"
        assert self.frontier.push(Request(url, priority=priority)) == self.model.push(url, priority)

    @rule(ns=st.lists(st.integers(0, 30), max_size=5), priority=st.integers(-2, 2))
    def push_many(self, ns, priority):
        urls = [f"https://m.example/{n}" for n in ns]
        assert self.frontier.push_many(Request(url, priority=priority) for url in urls) == self.model.push_many(
            urls, priority)

    @rule()
    def pop(self):
        request = self.frontier.pop()
        want = self.model.pop()
        assert (None if request is None else request.url) == want
        if request is not None:
            self.in_flight[request.url] = request

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data())
    def done(self, data):
        url = data.draw(st.sampled_from(sorted(self.in_flight)))
        self.frontier.done(self.in_flight.pop(url))
        self.model.done(url)

    @rule()
    def reopen(self):
        self.frontier.close()
        self.model.reopen(keep_places=False)  # in-flight requests are re-queued on top, in pop order
        self.in_flight.clear()
        self.frontier = Frontier(self.dir)

    @invariant()
    def lengths_agree(self):
        assert len(self.frontier) == len(self.model)

    def teardown(self):
        self.frontier.close()
        shutil.rmtree(self.dir, ignore_errors=True)


FrontierModel.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None, derandomize=True)
TestFrontierMatchesModel = FrontierModel.TestCase
