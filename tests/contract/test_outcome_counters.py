"""``record_outcome``: the outcome counters of every backend, added up, kept across a reopen, never lowered
by ``requeue_failed``; wrong arguments refused before anything is counted."""

from __future__ import annotations

import pytest

from diskfrontier.contract.outcomes import BUCKET_KEYS, OUTCOME_KEYS, Outcome, bucket_key


def test_outcomes_are_counted_and_kept_across_a_reopen(frontier_factory):
    frontier = frontier_factory()
    assert all(frontier.stats()[key] == 0 for key in OUTCOME_KEYS)
    frontier.record_outcome(Outcome(status=200, received_bytes=1000, fetch_seconds=0.2),
                            Outcome(status=404, received_bytes=10, fetch_seconds=3.0, failure="fail"))
    frontier.record_outcome(Outcome(status=503, fetch_seconds=0.01, retried=True, failure="backoff"),
                            Outcome(failure="robots"), Outcome(failure="a kind of its own"), Outcome(status=99))
    frontier.close()
    frontier = frontier_factory()
    stats = frontier.stats()
    assert (stats["responses_2xx"], stats["responses_3xx"], stats["responses_4xx"], stats["responses_5xx"],
            stats["responses_other"]) == (1, 0, 1, 1, 1)
    assert stats["received_bytes"] == 1010
    assert stats["fetch_seconds_count"] == 3
    assert stats["fetch_seconds_sum"] == pytest.approx(3.21)
    assert stats[bucket_key(0.05)] == 1 and stats[bucket_key(0.25)] == 2 and stats[bucket_key(5)] == 3
    assert [stats[key] for key in BUCKET_KEYS] == sorted(stats[key] for key in BUCKET_KEYS)  # cumulative
    assert stats["retries"] == 1
    assert (stats["failures_fail"], stats["failures_backoff"], stats["failures_robots"], stats["failures_other"],
            stats["failures_retry"]) == (1, 1, 1, 1, 0)


def test_requeue_failed_takes_nothing_from_the_failure_counters(frontier_factory):
    from backends import urls

    frontier = frontier_factory()
    frontier.push(urls("a.example", 1)[0])
    request = frontier.pop()
    frontier.fail(request, "boom")
    frontier.record_outcome(Outcome(status=500, failure="fail"))
    assert frontier.stats()["failed"] == 1
    assert frontier.requeue_failed() == 1
    stats = frontier.stats()
    assert stats["failed"] == 0 and stats["failures_fail"] == 1 and stats["responses_5xx"] == 1


@pytest.mark.parametrize(("outcome", "error"), [
    (lambda: Outcome(status="200"), TypeError),  # type: ignore[arg-type]  # the wrong type is the test (lambda: Outcome(received_bytes=-1), ValueError),
    (lambda: Outcome(fetch_seconds=float("nan")), ValueError), (lambda: Outcome(failure=3), TypeError),  # type: ignore[arg-type]
])
def test_a_wrong_outcome_is_refused(outcome, error):
    with pytest.raises(error, match="Outcome"):
        outcome()


def test_record_outcome_takes_outcome_objects_only(frontier_factory):
    frontier = frontier_factory()
    with pytest.raises(TypeError, match="takes Outcome objects"):
        frontier.record_outcome(Outcome(status=200), {"status": 200})
    assert frontier.stats()["responses_2xx"] == 0
