"""fail, failed, requeue_failed and record_failed, on both backends."""

from __future__ import annotations

import time

import pytest

from diskfrontier import FailedRequest, NotInFlight, Request


def test_a_failed_request_is_listed_with_its_error_attempts_and_time(frontier_factory):
    f = frontier_factory()
    f.push(Request("https://a.example/1"))
    r = f.pop()
    f.retry(r)
    r = f.pop()
    before = time.time()
    f.fail(r, "HTTP 500")
    with pytest.raises(NotInFlight):
        f.done(r)
    assert f.finished and len(f) == 0
    [entry] = f.failed()
    assert isinstance(entry, FailedRequest)
    assert entry.request.url == r.url and entry.error == "HTTP 500" and entry.request.attempts == 1
    assert before - 1 <= entry.failed_at <= time.time() + 1
    assert f.host("a.example").done == 1  # a failure counts as finished for its host
    f.close()
    assert [e.request.url for e in frontier_factory().failed()] == [r.url]  # kept across a reopen


def test_requeue_failed_makes_them_pending_again_oldest_first(frontier_factory):
    f = frontier_factory(order="fifo")
    f.push_many(Request(f"https://a.example/{i}") for i in range(3))
    for _ in range(3):
        f.fail(f.pop(), "gone")
    assert [e.request.url[-1] for e in f.failed()] == ["0", "1", "2"]
    assert f.requeue_failed(limit=2) == 2
    assert [e.request.url[-1] for e in f.failed()] == ["2"] and len(f) == 2
    again = f.pop()
    assert again.url.endswith("/0") and again.attempts == 0
    assert f.requeue_failed() == 1 and f.failed() == [] and len(f) == 2


def test_record_failed_stores_failures_copied_in(frontier_factory):
    f = frontier_factory()
    request = Request("https://a.example/x")
    request.attempts = 3
    assert f.record_failed([FailedRequest(request, "timeout", 1_700_000_000.0)]) == 1
    [entry] = f.failed()
    assert (entry.request.url, entry.error, entry.failed_at, entry.request.attempts) == (
        request.url, "timeout", 1_700_000_000.0, 3)
    assert f.has_seen(request.fingerprint) and len(f) == 0
