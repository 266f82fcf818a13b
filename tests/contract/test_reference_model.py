"""Any sequence of pushes, pops, dones, retries, failures and reopens matches the reference model."""

from __future__ import annotations

import itertools

import pytest
from backends import BACKENDS, FrontierFactory, make_factory
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from reference import Reference
from volume import forms, scaled

from diskfrontier import Request


class ContractMachine(RuleBasedStateMachine):
    """A frontier and the reference model, driven side by side (LIFO, no host rules)."""

    factory: FrontierFactory

    def __init__(self):
        super().__init__()
        self.frontier = self.factory()
        self.model = Reference("lifo")
        self.held: dict[str, Request] = {}

    @rule(n=st.integers(0, 30), priority=st.integers(-2, 2))
    def push(self, n, priority):
        url = f"https://h{n % 3}.example/{n}"
        assert self.frontier.push(Request(url, priority=priority)) == self.model.push(url, priority)

    @rule(ns=st.lists(st.integers(0, 30), max_size=5), priority=st.integers(-2, 2))
    def push_many(self, ns, priority):
        urls = [f"https://h{n % 3}.example/{n}" for n in ns]
        assert self.frontier.push_many(Request(u, priority=priority) for u in urls) == self.model.push_many(
            urls, priority)

    @rule()
    def pop(self):
        request = self.frontier.pop()
        if self.factory.kind == "redis-sharded":
            want = self.sharded_pop(request)
        else:
            want = self.model.pop()
        assert (None if request is None else request.url) == want
        if request is not None:
            assert request.attempts == self.model.attempts[want]
            self.held[want] = request

    def sharded_pop(self, request):
        """What a crawl of several shards may hand out: a request of the best priority pending, and the one
        its shard's queue order puts first (between shards, one priority's order is the rotation's)."""
        best = self.model.next()
        if request is None or best is None:
            return best
        url = request.url
        assert url in self.model.pending and self.model.pending[url][0] == self.model.pending[best][0]
        shard = self.frontier.shard_of(request)
        same_shard = [u for u in self.model.pending if self.frontier.shard_of(Request(u)) == shard]
        assert url == max(same_shard, key=self.model._rank)
        self.model.take(url)
        return url

    @precondition(lambda self: self.held)
    @rule(data=st.data(), how=st.sampled_from(["done", "retry", "fail"]))
    def finish(self, data, how):
        url = data.draw(st.sampled_from(sorted(self.held)))
        request = self.held.pop(url)
        if how == "done":
            self.frontier.done(request)
            self.model.done(url)
        elif how == "retry":
            self.frontier.retry(request)
            self.model.retry(url)
        else:
            self.frontier.fail(request, "boom")
            self.model.fail(url)

    @rule()
    def requeue_failed(self):
        assert self.frontier.requeue_failed() == self.model.requeue_failed()

    @precondition(lambda self: self.factory.kind == "jobdir")
    @rule()
    def compact(self):
        """A compaction at any moment, requests in flight included, changes nothing a caller can see."""
        self.frontier.compact()

    @precondition(lambda self: self.factory.kind == "jobdir")
    @rule()
    def checkpoint(self):
        self.frontier.checkpoint()

    @rule()
    def reopen(self):
        self.frontier.close()
        self.model.reopen(keep_places=self.factory.kind.startswith("redis"))
        self.held.clear()
        self.frontier = self.factory()

    @invariant()
    def counts_agree(self):
        assert len(self.frontier) == len(self.model)
        assert [e.request.url for e in self.frontier.failed()] == list(self.model.failed)
        assert self.frontier.finished == self.model.finished

    def teardown(self):
        self.frontier.close()


@pytest.mark.parametrize("volume", forms(0.25))
@pytest.mark.parametrize("kind", BACKENDS)
def test_any_sequence_matches_the_reference_model(kind, volume, tmp_path_factory, request):
    runs = itertools.count()

    class Run(ContractMachine):
        def __init__(self):
            type(self).factory = make_factory(kind, tmp_path_factory.mktemp("model"), request, f"model{next(runs)}")
            super().__init__()

    longer = kind == "jobdir"  # the quicker backend gets the longer runs
    examples = 60 if longer else 25  # the full volume; the everyday run does a quarter of them
    Run.TestCase.settings = settings(max_examples=scaled(examples, volume),
                                     stateful_step_count=40 if longer else 30, deadline=None, derandomize=True)
    Run.TestCase().runTest()
