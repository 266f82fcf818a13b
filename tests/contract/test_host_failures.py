"""Host failure streaks (``host_failed``) and kept robots.txt (``robots``/``set_robots``), on both backends,
across a close and reopen."""

from __future__ import annotations

import math
import time

import pytest
from backends import urls

from diskfrontier.access.checking import verify_target
from diskfrontier.contract.backoff import host_backoff
from diskfrontier.contract.checks import MAX_ROBOTS
from diskfrontier.contract.values import RobotsEntry


def test_backoff_doubles_from_the_threshold_up_to_the_cap():
    assert [host_backoff(n, 3, 10.0, 75.0) for n in range(1, 8)] == [0.0, 0.0, 10.0, 20.0, 40.0, 75.0, 75.0]


def test_a_host_is_blocked_after_its_threshold_and_the_block_doubles(frontier_factory):
    f = frontier_factory()
    f.push_many(urls("bad.example", 3))
    for _ in range(2):
        assert f.host_failed("bad.example", block_after=3, backoff=100.0, backoff_max=1000.0) is None
    assert f.host("bad.example").failures == 2
    assert f.host("bad.example").blocked_until is None
    before = time.time()
    first = f.host_failed("bad.example", block_after=3, backoff=100.0, backoff_max=1000.0)
    assert first is not None and before + 99 <= first <= time.time() + 101
    assert f.pop() is None  # blocked: nothing of it is handed out
    second = f.host_failed("bad.example", block_after=3, backoff=100.0, backoff_max=1000.0)
    assert second is not None and second >= first + 99  # 200 s from now, not 100
    info = f.host("bad.example")
    assert info.failures == 4 and info.blocked_until == pytest.approx(second)
    assert info.to_dict()["failures"] == 4
    f.close()
    g = frontier_factory()  # the streak and the block are kept
    info = g.host("bad.example")
    assert info.failures == 4 and info.blocked_until == pytest.approx(second)
    assert g.pop() is None
    g.unblock("bad.example")
    request = g.pop()
    assert request is not None
    g.done(request)  # a done ends the streak
    assert g.host("bad.example").failures == 0
    assert g.host_failed("bad.example", block_after=3, backoff=100.0, backoff_max=1000.0) is None
    g.close()
    assert frontier_factory().host("bad.example").failures == 1


def test_a_failure_never_shortens_a_longer_block(frontier_factory):
    f = frontier_factory()
    f.push_many(urls("held.example", 1))
    f.block("held.example", math.inf)
    assert f.host_failed("held.example", block_after=1, backoff=5.0, backoff_max=5.0) == math.inf
    assert f.host("held.example").blocked_until == math.inf


def test_a_refetch_ends_the_streak_and_other_hosts_keep_theirs(frontier_factory):
    f = frontier_factory()
    f.push_many(urls("a.example", 1) + urls("b.example", 1))
    f.host_failed("a.example")
    f.host_failed("b.example")
    request = f.pop()
    f.done(request, refetch_after=3600)
    other = "b.example" if request.slot == "a.example" else "a.example"
    assert f.host(request.slot).failures == 0
    assert f.host(other).failures == 1


@pytest.mark.parametrize("bad", [{"block_after": 0}, {"backoff": -1.0}, {"backoff_max": math.nan}])
def test_host_failed_refuses_bad_settings(frontier_factory, bad):
    f = frontier_factory()
    with pytest.raises(ValueError, match="host_failed"):
        f.host_failed("a.example", **bad)


def test_robots_entries_are_kept_capped_and_replaced(frontier_factory):
    f = frontier_factory()
    assert f.robots("a.example") is None
    big = b"User-agent: *\nDisallow: /private\n" + b"#" * (MAX_ROBOTS + 10)
    f.set_robots("a.example", RobotsEntry(200, big, 1_700_000_000.5))
    f.set_robots("b.example", RobotsEntry(0, b"", 1_700_000_001.0))
    f.close()
    g = frontier_factory()
    kept = g.robots("a.example")
    assert kept == RobotsEntry(200, big[:MAX_ROBOTS], 1_700_000_000.5)
    assert g.robots("b.example") == RobotsEntry(0, b"", 1_700_000_001.0)
    g.set_robots("a.example", RobotsEntry(404, b"gone", 1_700_000_100.0))
    assert g.robots("a.example") == RobotsEntry(404, b"gone", 1_700_000_100.0)
    with pytest.raises(ValueError, match="status"):
        g.set_robots("a.example", RobotsEntry(1000, b"", 1.0))
    with pytest.raises(TypeError, match="RobotsEntry"):
        g.set_robots("a.example", (200, b"", 1.0))


def test_verify_finds_a_crawl_with_failures_and_robots_sound(frontier_factory):
    f = frontier_factory()
    f.push_many(urls("bad.example", 2))
    for _ in range(3):
        f.host_failed("bad.example", block_after=2)
    f.set_robots("bad.example", RobotsEntry(200, b"User-agent: *\nDisallow: /\n", 1_700_000_000.0))
    f.close()
    target = frontier_factory.path if frontier_factory.kind == "jobdir" else frontier_factory.url
    crawl = None if frontier_factory.kind == "jobdir" else frontier_factory.crawl
    report = verify_target(target, crawl)
    assert report.sound, report.findings
    assert report.backend == frontier_factory.kind.removesuffix("-sharded")
    assert report.checked > 0
