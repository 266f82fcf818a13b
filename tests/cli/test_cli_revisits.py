"""What the command line shows of revisits: inspect's due, overdue and interval spread, peek --due's next
visits soonest first, hosts --revisits host by host; each against the states the test stored, in a job directory
and in a Redis crawl."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from diskfrontier import Frontier, RedisFrontier, Request, RevisitState
from diskfrontier.cli import inspect as inspect_module
from diskfrontier.cli import main

# (url, interval, seconds since its last fetch): due when the second is more than the first; overdue when
# it is past by more than a tenth of the interval and at least a minute (margins of minutes: a loaded
# machine between the fixture and the command changes nothing)
PAGES = [
    ("https://a.example/1", 6000.0, 1000.0),  # due in 5000 s
    ("https://a.example/2", 6000.0, 6030.0),  # due 30 s ago: due, not overdue (that is 600 s late)
    ("https://a.example/3", 600.0, 2000.0),  # overdue
    ("https://b.example/1", 86400.0, 90000.0),  # due for an hour: a tenth of a day is 2.4 h, not overdue
    ("https://b.example/2", 3600.0, 10.0),
]


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _store(f) -> None:
    now = time.time()
    for url, _, _ in PAGES:
        f.push(Request(url))
    f.push(Request("https://c.example/never-fetched"))
    for url, interval, ago in PAGES:
        request = f.pop()
        assert request is not None and request.url == url
        request.revisit = RevisitState(interval, now - ago, etag='"x"', visits=3, changes=1, not_modified=1)
        f.done(request, refetch_after=max(0.0, interval - ago))


@pytest.fixture
def job(tmp_path):
    path = tmp_path / "job"
    with Frontier(path, maintenance=None, order="fifo") as f:
        _store(f)
    return str(path)


@pytest.fixture(params=["jobdir", "redis"])
def target(request, job):
    """The same pages in a job directory and in a Redis crawl: the command's arguments naming them."""
    if request.param == "jobdir":
        return [job]
    url, name = request.getfixturevalue("redis_url"), request.getfixturevalue("crawl_name")
    f = RedisFrontier(url, crawl=name, new_order="fifo")
    try:
        _store(f)
    finally:
        f.close()
    return [url, "--crawl", name]


def test_inspect_counts_the_due_the_overdue_and_the_spread(target):
    data = json.loads(run("inspect", *target, "--json"))
    assert data["revisits"] == {
        "pages": 5, "due": 3, "overdue": 1, "visits": 15, "changes": 5, "not_modified": 5,
        "intervals": {"min": 600.0, "p10": 600.0, "median": 6000.0, "p90": 6000.0, "max": 86400.0},
    }
    text = run("inspect", *target)
    assert "5 pages; due now 3 (1 overdue)" in text and "median 100m" in text and "max 24.0h" in text


def test_inspect_leaves_them_uncounted_when_asked_or_beyond_the_limit(target, monkeypatch):
    assert json.loads(run("inspect", *target, "--json", "--no-revisits"))["revisits"] is None
    assert "revisits" not in run("inspect", *target, "--no-revisits")
    monkeypatch.setattr(inspect_module, "AUTO_LIMIT", 3)
    assert json.loads(run("inspect", *target, "--json"))["revisits"] is None
    assert "not counted for 6 pending requests (more than 3); --revisits counts them" in run("inspect", *target)
    assert json.loads(run("inspect", *target, "--json", "--revisits"))["revisits"]["pages"] == 5


def test_peek_due_lists_the_next_visits_soonest_first(target):
    lines = [json.loads(line) for line in run("peek", *target, "--due", "--json", "-n", "0").splitlines()]
    expected = sorted(PAGES, key=lambda page: page[1] - page[2])
    assert [line["url"] for line in lines] == [url for url, _, _ in expected]
    assert all(line["revisit"]["etag"] == '"x"' for line in lines)
    text = run("peek", *target, "--due", "-n", "2").splitlines()
    assert len(text) == 2 and text[0].endswith("https://b.example/1")
    assert text[1].endswith("https://a.example/3  overdue")


def test_hosts_revisits_counts_each_host(target):
    rows = {row["host"]: row["revisits"] for row in json.loads(run("hosts", *target, "--revisits", "--json"))}
    assert rows["a.example"]["pages"] == 3 and rows["a.example"]["due"] == 2 and rows["a.example"]["overdue"] == 1
    assert rows["b.example"]["pages"] == 2 and rows["b.example"]["due"] == 1
    assert rows["c.example"] is None
    assert "revisits" in run("hosts", *target, "--revisits").splitlines()[0]


def _states(path: str) -> dict[str, tuple]:
    from diskfrontier.jobdir.reader import pending_requests

    return {r.url: (r.revisit, r.not_before is not None) for r in pending_requests(path)}


def test_copy_and_export_then_import_keep_each_pages_revisit_state(job, tmp_path):
    copied, exported, imported = str(tmp_path / "copied"), str(tmp_path / "pending.jsonl"), str(tmp_path / "imported")
    run("copy", job, copied)
    run("export", job, "-o", exported)
    run("import", imported, exported)
    want = _states(job)
    assert sum(state is not None for state, _ in want.values()) == len(PAGES)
    assert _states(copied) == want
    assert _states(imported) == want


def test_copy_to_redis_and_back_keeps_each_pages_revisit_state(job, tmp_path, redis_url, crawl_name):
    back = str(tmp_path / "back")
    run("copy", job, redis_url, "--to-crawl", crawl_name)
    run("copy", redis_url, "--crawl", crawl_name, back)
    want = _states(job)
    assert sum(state is not None for state, _ in want.values()) == len(PAGES)
    assert _states(back) == want
