"""Moving a crawl with ``diskfrontier export`` and ``import``: the same pop order in the new
directory (LIFO and FIFO), and with ``export --seen`` what was done stays done."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner

from diskfrontier import Frontier, Request
from diskfrontier.cli import main

PRIORITIES = (7, 0, -2)


def run(*args: str, input: str | None = None):  # noqa: A002 - the name CliRunner.invoke uses
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def pop_all(job) -> list[str]:
    with Frontier(job) as frontier:
        return [request.url for request in iter(frontier.pop, None)]


def crawled_in_part(job, order: str, *, clean: bool, in_flight: int = 0) -> list[str]:
    """A job directory of ``order`` with 50 URLs at each of three priorities pushed interleaved,
    10 done and ``in_flight`` popped and left in flight at close; the URLs done."""
    done = []
    with Frontier(job, order=order) as frontier:
        for i in range(50):
            frontier.push_many(Request(f"https://a.example/{p}/{i}", priority=p) for p in PRIORITIES)
        for _ in range(10):
            request = frontier.pop()
            assert request is not None
            frontier.done(request)
            done.append(request.url)
        for _ in range(in_flight):
            frontier.pop()  # in flight at close: pending again
    if not clean:
        with open(os.path.join(job, "requests.cursor"), "w") as f:
            f.write("{}")  # as after a crash: the order is the one rebuilt from the journal
    return done


def assert_moved_with_the_same_pop_order(tmp_path, order: str, pending: int) -> None:
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    exported = tmp_path / "pending.jsonl"
    assert run("export", source, "-o", str(exported)).exit_code == 0
    Frontier(target, order=order).close()
    result = run("import", target, str(exported), "--json")
    assert json.loads(result.output) == {"queued": pending, "duplicates": 0, "bad": 0, "seen": 0, "seen_new": 0}
    peeked = run("peek", source, "-n", "1000", "--json").output
    assert len(peeked.splitlines()) == pending
    assert run("peek", target, "-n", "1000", "--json").output == peeked
    popped = pop_all(source)
    assert pop_all(target) == popped
    assert popped == [json.loads(line)["url"] for line in peeked.splitlines()]  # peek shows pop order


@pytest.mark.parametrize("clean", [True, False], ids=["closed", "crashed"])
@pytest.mark.parametrize("order", ["lifo", "fifo"])
def test_export_then_import_keeps_the_pop_order(tmp_path, order, clean):
    crawled_in_part(str(tmp_path / "source"), order, clean=clean)
    assert_moved_with_the_same_pop_order(tmp_path, order, 140)


@pytest.mark.parametrize(("order", "clean"), [("lifo", True), ("lifo", False), ("fifo", False), ("fifo", True)])
def test_export_then_import_keeps_the_pop_order_of_requests_in_flight_at_close(tmp_path, order, clean):
    crawled_in_part(str(tmp_path / "source"), order, clean=clean, in_flight=2)
    assert_moved_with_the_same_pop_order(tmp_path, order, 140)


def test_export_writes_push_order_and_peek_pop_order(tmp_path):
    job = str(tmp_path / "job")
    with Frontier(job, order="lifo") as frontier:
        frontier.push_many([Request("https://a.example/1"), Request("https://a.example/2"),
                            Request("https://a.example/3", priority=5), Request("https://a.example/4")])
    exported = [json.loads(line)["url"] for line in run("export", job).output.splitlines()]
    assert exported == ["https://a.example/3", "https://a.example/1", "https://a.example/2", "https://a.example/4"]
    peeked = [json.loads(line)["url"] for line in run("peek", job, "--json").output.splitlines()]
    assert peeked == ["https://a.example/3", "https://a.example/4", "https://a.example/2", "https://a.example/1"]


def test_export_seen_then_import_keeps_done_work_done(tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    done = crawled_in_part(source, "lifo", clean=True)
    exported = tmp_path / "all.jsonl"
    result = run("export", source, "--seen", "-o", str(exported))
    assert result.exit_code == 0 and "exported 140 pending requests and 150 seen fingerprints" in result.stderr
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert all("url" in row for row in lines[:140])
    assert all(set(row) == {"$seen"} and len(row["$seen"]) == 40 for row in lines[140:]) and len(lines) == 290
    assert {row["$seen"] for row in lines[140:]} == {
        Request(f"https://a.example/{p}/{i}").fingerprint.hex() for p in PRIORITIES for i in range(50)}

    result = run("import", target, str(exported), "--json")
    assert result.exit_code == 0
    assert json.loads(result.output) == {"queued": 140, "duplicates": 0, "bad": 0, "seen": 150, "seen_new": 10}
    again = run("push", target, *done[:3], "--json")  # done in the source: not crawled again
    assert json.loads(again.output) == {
        "queued": 0, "duplicates": 3, "bad": 0, "offered": 3, "via": "direct", "commands": []}
    assert json.loads(run("inspect", target, "--json").output)["pending"] == 140
    said = run("import", target, str(exported)).output.strip()
    assert said == "queued 0, duplicates 140, bad 0, seen 150 (0 not seen before)"

    plain = str(tmp_path / "without-seen")  # without --seen the done URLs would be fetched again
    result = run("import", plain, "-", input=run("export", source).output)
    assert json.loads(run("push", plain, done[0], "--json").output)["queued"] == 1


def test_import_of_seen_lines_alone_queues_nothing_and_bad_seen_lines_are_reported(tmp_path):
    job = str(tmp_path / "job")
    fingerprint = Request("https://a.example/").fingerprint.hex()
    lines = (f'{{"$seen": "{fingerprint}"}}\n{{"$seen": "{fingerprint}"}}\n{{"$seen": "abc"}}\n'
             f'{{"$seen": "{fingerprint}", "url": "https://b.example/"}}\n{{"url": "https://c.example/"}}\n')
    result = CliRunner().invoke(main, ["import", job, "-"], input=lines)
    assert result.exit_code == 1
    assert "line 3: skipped: a seen line must be" in result.stderr and "line 4: skipped" in result.stderr
    assert result.stdout.strip() == "queued 1, duplicates 0, bad 2, seen 2 (1 not seen before)"
    assert pop_all(job) == ["https://c.example/"]
    assert json.loads(run("push", job, "https://a.example/", "--json").output)["duplicates"] == 1


def test_a_seen_line_before_its_request_makes_the_request_a_duplicate(tmp_path):
    job = str(tmp_path / "job")
    fingerprint = Request("https://a.example/").fingerprint.hex()
    lines = f'{{"url": "https://b.example/"}}\n{{"$seen": "{fingerprint}"}}\n{{"url": "https://a.example/"}}\n'
    result = run("import", job, "-", "--json", input=lines)
    assert json.loads(result.output) == {"queued": 1, "duplicates": 1, "bad": 0, "seen": 1, "seen_new": 1}


def test_export_seen_of_a_killed_crawl_includes_what_only_the_journal_holds(tmp_path):
    job = str(tmp_path / "job")
    code = ("import os, signal, sys\nfrom diskfrontier import Frontier, Request\nf = Frontier(sys.argv[1])\n"
            "f.push_many(Request(f'https://k.example/{i}') for i in range(50))\n"
            "for _ in range(20): f.done(f.pop())\nos.kill(os.getpid(), signal.SIGKILL)\n")
    killed = subprocess.run([sys.executable, "-c", code, job], capture_output=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    out = CliRunner().invoke(main, ["export", job, "--seen"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    seen = {json.loads(line)["$seen"] for line in out.output.splitlines() if line.startswith('{"$seen"')}
    want = {Request(f"https://k.example/{i}").fingerprint.hex() for i in range(50)}
    assert seen == want
