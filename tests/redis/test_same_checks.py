"""Both backends refuse the same arguments with the same error and message: the checks live in one place
(``contract/checks.py``), and ``RedisFrontier`` makes each one a job directory makes."""

from __future__ import annotations

import math

import pytest

from diskfrontier import FailedRequest, Frontier, RedisFrontier, Request
from diskfrontier.contract.values import RobotsEntry

REQUEST = Request("https://a.example/x")

CALLS = {
    "push": lambda f: f.push("https://a.example/"),
    "push not_before": lambda f: f.push(REQUEST, not_before=-1),
    "push_many": lambda f: f.push_many([REQUEST, "https://a.example/"]),
    "mark_seen str": lambda f: f.mark_seen(["0123456789abcdef0123"]),
    "mark_seen empty": lambda f: f.mark_seen([b""]),
    "mark_seen too long": lambda f: f.mark_seen([bytes(256)]),
    "pop timeout": lambda f: f.pop(timeout=-1),
    "done refetch_after": lambda f: f.done(REQUEST, refetch_after=math.nan),
    "retry delay": lambda f: f.retry(REQUEST, delay=-1),
    "fail error": lambda f: f.fail(REQUEST, 500),
    "requeue_failed limit": lambda f: f.requeue_failed(0),
    "record_failed entry": lambda f: f.record_failed([REQUEST]),
    "record_failed error": lambda f: f.record_failed([FailedRequest(REQUEST, b"timeout", 1.0)]),  # type: ignore[arg-type]
    "record_failed failed_at": lambda f: f.record_failed([FailedRequest(REQUEST, "timeout", -5)]),
    "drop neither": lambda f: f.drop(),
    "drop match": lambda f: f.drop(match="("),
    "set_delay": lambda f: f.set_delay("a.example", -1),
    "block": lambda f: f.block("a.example", -1),
    "block host": lambda f: f.block(None, 1.0),
    "host_failed": lambda f: f.host_failed("a.example", block_after=0),
    "set_robots": lambda f: f.set_robots("a.example", b"User-agent: *"),
    "set_robots status": lambda f: f.set_robots("a.example", RobotsEntry(1000, b"", 1.0)),
}


@pytest.fixture(scope="module")
def refusals(redis_server, tmp_path_factory):
    """What each backend raised for each call of ``CALLS``: (type name, message)."""
    redis_server.client().flushall()
    out: dict[str, dict[str, tuple[str, str]]] = {}
    with Frontier(tmp_path_factory.mktemp("job") / "job", watch=False, maintenance=None) as local, \
            RedisFrontier(redis_server.url, crawl="same-checks") as shared:
        for backend, frontier in (("job directory", local), ("redis", shared)):
            for name, call in CALLS.items():
                try:
                    call(frontier)
                except Exception as exc:  # the test compares whatever each backend raises
                    out.setdefault(name, {})[backend] = (type(exc).__name__, str(exc))
                else:
                    out.setdefault(name, {})[backend] = ("nothing", "")
    return out


@pytest.mark.parametrize("name", list(CALLS))
def test_both_backends_refuse_a_bad_argument_alike(refusals, name):
    local, shared = refusals[name]["job directory"], refusals[name]["redis"]
    assert local[0] in ("TypeError", "ValueError"), local
    assert shared == local
