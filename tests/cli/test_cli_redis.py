"""The diskfrontier command on a Redis crawl (a URL and --crawl), and ``copy`` between a job directory
and Redis, against a real redis-server."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import pytest
import redis
from click.testing import CliRunner
from popkit import take

from diskfrontier import Frontier, FrontierError, RedisFrontier, Request
from diskfrontier.cli import main
from diskfrontier.jobdir.reader import host_table, pending_requests, seen_fingerprints
from diskfrontier.redisfrontier.seen import key64, reduced_fingerprint

SCRIPT = [os.path.join(os.path.dirname(sys.executable), "diskfrontier")]  # the installed console script
DOWN = "redis://127.0.0.1:1/0"  # nothing listens there
NOW = time.time()
LATER = NOW + 3600.0  # a not_before still ahead when the test checks it
BLOCKED = NOW + 7200.0
MARKED = bytes(range(20))  # a fingerprint marked seen with no request


def run(*args: str, input: str | None = None):  # noqa: A002 - the name CliRunner.invoke uses
    return CliRunner().invoke(main, list(args), input=input)


def fp(url: str) -> bytes:
    return Request(url).fingerprint


def snapshot(root) -> dict[str, bytes]:
    found = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as f:
                found[os.path.relpath(os.path.join(folder, name), root)] = f.read()
    return found


def key(request: Request) -> tuple:
    """What a copy must keep of a pending request."""
    return (request.url, request.method, request.body, request.priority, request.slot, request.attempts,
            request.not_before, request.dont_filter, request.fingerprint, json.dumps(request.meta, sort_keys=True))


def host_settings(rows) -> dict[str, tuple]:
    """host -> (own delay, blocked until, budget, done) of HostRow (job directory) rows."""
    return {r.host: (r.delay, r.blocked_until, r.budget, r.done) for r in rows
            if r.done or r.delay is not None or r.blocked_until or r.budget is not None}


def redis_host_settings(frontier: RedisFrontier) -> dict[str, tuple]:
    return {h.host: (None if h.delay == frontier.delay else h.delay, h.blocked_until, h.budget, h.done)
            for h in frontier.hosts() if h.done or h.delay != frontier.delay or h.blocked_until or h.budget is not None}


EXPECTED_HOSTS = {
    "a.example": (2.5, None, None, 0),
    "b.example": (None, BLOCKED, None, 1),  # b.example/done was done
    "c.example": (None, None, 7, 0),
    "d.example": (None, math.inf, None, 0),
    "e.example": (None, None, None, 1),  # done by the crawl that was killed
}

CHILD = """
import sys, time
from diskfrontier import Frontier, Request
f = Frontier(sys.argv[1])
f.push(Request("https://e.example/held", priority=100))
held = f.pop()
f.push(Request("https://e.example/done", priority=100))
f.done(f.pop())
print("ok", held.url, flush=True)
time.sleep(60)
"""


def build_job(job: str) -> None:
    """A job directory with every kind of pending request, a done one, a marked fingerprint and host settings."""
    with Frontier(job) as f:
        f.push(Request("https://b.example/done"))
        f.done(take(f))
        f.push(Request("https://c.example/retried", meta={"depth": 2}))
        f.retry(take(f), delay=5000)  # attempts 1, not_before ahead
        f.push_many([
            Request("https://a.example/1", priority=5),
            Request("https://a.example/2", method="POST", body=b"q=1"),
            Request("https://b.example/x", priority=3, slot="shared-slot"),
            Request("https://a.example/1", priority=5, dont_filter=True),  # kept although seen
        ])
        f.push(Request("https://c.example/later", priority=-2), not_before=LATER)
        f.mark_seen([MARKED])
        f.set_delay("a.example", 2.5)
        f.block("b.example", BLOCKED)
        f.set_budget("c.example", 7)
        f.block("d.example", math.inf)



def reduced(fingerprint):
    """A fingerprint as a set64 seen set keeps it (its 64-bit key)."""
    return reduced_fingerprint(key64(fingerprint))


EXPECTED_URLS = sorted(["https://a.example/1", "https://a.example/1", "https://a.example/2", "https://b.example/x",
                        "https://c.example/later", "https://c.example/retried", "https://e.example/held"])
EXPECTED_SEEN = {fp(u) for u in ("https://a.example/1", "https://b.example/x", "https://b.example/done",
                                 "https://c.example/later", "https://c.example/retried", "https://e.example/held",
                                 "https://e.example/done")} | {
                    MARKED, Request("https://a.example/2", method="POST", body=b"q=1").fingerprint}


@pytest.fixture
def live_job(tmp_path):
    """The job directory of ``build_job``, then held by a crawl that has one request in flight and one
    done since it opened (whose fingerprint only its journal holds); yields (path, the child)."""
    job = str(tmp_path / "job")
    build_job(job)
    child = subprocess.Popen([sys.executable, "-c", CHILD, job], stdout=subprocess.PIPE)
    assert child.stdout is not None
    try:
        assert child.stdout.readline().split() == [b"ok", b"https://e.example/held"]
        yield job, child
    finally:
        child.kill()
        child.wait()


def test_copy_job_to_redis_and_back_keeps_requests_seen_set_and_hosts(live_job, tmp_path, redis_url, crawl_name):
    job, child = live_job
    assert fp("https://e.example/done") not in set(seen_fingerprints(job))  # only in the journal so far
    original = sorted(map(key, pending_requests(job)))
    assert sorted(k[0] for k in original) == EXPECTED_URLS
    retried = next(k for k in original if k[0] == "https://c.example/retried")
    assert retried[5] == 1 and retried[6] > NOW + 4000  # attempts and not_before of the retry
    before = snapshot(job)

    # job directory (held by a live crawl) -> Redis
    result = run("copy", job, redis_url, "--to-crawl", crawl_name, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["pending"], report["queued"], report["duplicates"]) == (7, 7, 0)
    assert report["seen"] == len(EXPECTED_SEEN) == 9
    assert (report["host_settings"], report["host_done"], report["done"]) == (4, 2, 2)
    assert snapshot(job) == before  # read only, and the lock was not in the way
    with RedisFrontier(redis_url, crawl=crawl_name, create=False) as r:
        assert r.order == "lifo"
        assert sorted(map(key, r.pending_requests())) == original
        assert set(r.seen_fingerprints()) == {reduced(x) for x in EXPECTED_SEEN}  # 64 bits of each
        assert redis_host_settings(r) == EXPECTED_HOSTS
        assert r.stats()["done"] == 2

    # Redis -> a new job directory
    back = str(tmp_path / "back")
    result = run("copy", redis_url, back, "--from-crawl", crawl_name)
    assert result.exit_code == 0, result.output
    assert f"copied crawl '{crawl_name}' at {redis_url} to {back} (lifo)" in result.output
    assert sorted(map(key, pending_requests(back))) == original
    # the pending requests' fingerprints whole (from their bodies), the others as their 64 bits: the same keys
    came_back = list(seen_fingerprints(back))
    pending_fps = {r.fingerprint for r in pending_requests(back)}
    assert set(came_back) == pending_fps | {reduced(x) for x in EXPECTED_SEEN - pending_fps}
    assert sorted(key64(x) for x in came_back) == sorted(key64(x) for x in EXPECTED_SEEN)
    assert "keeps 64 bits of each fingerprint" in result.output
    assert host_settings(host_table(back)) == EXPECTED_HOSTS

    # after the crash: the request in flight comes over as pending
    child.kill()
    child.wait()
    again = str(tmp_path / "again")
    assert run("copy", job, again).exit_code == 0
    assert sorted(map(key, pending_requests(again))) == original
    assert set(seen_fingerprints(again)) == EXPECTED_SEEN
    assert host_settings(host_table(again)) == EXPECTED_HOSTS

    # a cleanly closed job directory (read from its queue and host files) -> Redis
    result = run("copy", back, redis_url, "--to-crawl", crawl_name + "-2")
    assert result.exit_code == 0, result.output
    with RedisFrontier(redis_url, crawl=crawl_name + "-2", create=False) as r:
        assert sorted(map(key, r.pending_requests())) == original
        assert set(r.seen_fingerprints()) == {reduced(x) for x in EXPECTED_SEEN}
        assert redis_host_settings(r) == EXPECTED_HOSTS

    with Frontier(back) as f:  # the copy works as a crawl: done stays done, settings hold
        assert f.push(Request("https://b.example/done")) is False
        assert f.push(Request("https://e.example/done")) is False
        assert f.push(Request("https://z.example/new")) is True
        hosts = {h.host: h for h in f.hosts()}
        assert hosts["b.example"].done == 1 and hosts["c.example"].budget == 7
    with RedisFrontier(redis_url, crawl=crawl_name, create=False) as r:
        assert r.push(Request("https://e.example/done")) is False
        assert r.push(Request("https://a.example/1", dont_filter=True)) is True


def test_copy_between_redis_crawls_keeps_leased_requests_and_crawl_settings(tmp_path, redis_url, crawl_name):
    with RedisFrontier(redis_url, crawl=crawl_name, order="fifo", delay=1.5, per_host=2, prefer="idle") as r:
        r.push_many([Request(f"https://h{i}.example/", priority=i) for i in range(4)])
        leased = r.pop()
        assert leased is not None
        copy_name = crawl_name + "-copy"
        result = run("copy", redis_url, redis_url, "--from-crawl", crawl_name, "--to-crawl", copy_name, "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["queued"] == 4  # the leased one too
        r.done(leased)
    with RedisFrontier(redis_url, crawl=copy_name, create=False) as c:
        assert (c.order, c.delay, c.per_host, c.prefer) == ("fifo", 1.5, 2, "idle")
        assert sorted(x.url for x in c.pending_requests()) == [f"https://h{i}.example/" for i in range(4)]
        assert c.has_seen(fp(leased.url))
    job = str(tmp_path / "job")
    result = run("copy", redis_url, job, "--crawl", copy_name)
    assert result.exit_code == 0, result.output
    assert "note: the Redis crawl's settings (delay=1.5, per_host=2, prefer='idle') are not kept" in result.output
    with Frontier(job) as f:
        assert f.order == "fifo" and len(f) == 4


def test_copy_refuses_a_destination_that_is_not_empty(tmp_path, redis_url, crawl_name):
    job = str(tmp_path / "job")
    assert run("push", job, "https://a.example/", "https://b.example/").exit_code == 0
    with RedisFrontier(redis_url, crawl=crawl_name) as r:
        r.push(Request("https://other.example/"))
    result = run("copy", job, redis_url, "--to-crawl", crawl_name)
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1
    assert result.output.startswith(f"Error: crawl '{crawl_name}' at {redis_url} is not empty (1 pending, 0 in flight")
    with RedisFrontier(redis_url, crawl=crawl_name, create=False) as r:
        assert [x.url for x in r.pending_requests()] == ["https://other.example/"]  # untouched

    with Frontier(job) as f:
        f.set_budget("a.example", 2**60)  # more than Redis keeps: refused before anything is written
    result = run("copy", job, redis_url, "--to-crawl", crawl_name + "-new")
    assert result.exit_code == 1 and "Redis keeps budgets up to 2**53 - 1" in result.output
    with pytest.raises(FrontierError, match="there is no crawl"):
        RedisFrontier(redis_url, crawl=crawl_name + "-new", create=False)

    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    for target, message in ((str(folder), f"Error: {folder} is not empty (it holds notes.txt)"),
                            (job, f"Error: {job} is a diskfrontier job directory already")):
        before = snapshot(tmp_path)
        result = run("copy", redis_url, target, "--from-crawl", crawl_name)
        assert result.exit_code == 1 and result.output.startswith(message), result.output
        assert len(result.output.splitlines()) == 1
        assert snapshot(tmp_path) == before


def test_commands_on_files_refuse_a_redis_url(redis_url, crawl_name):
    for command, why in (("compact", "compact rewrites the journal of a job directory"),
                         ("adopt-scrapy", "adopt-scrapy converts the files of a Scrapy JOBDIR"),
                         ("demo", "the demo crawls into a job directory")):
        for extra in ([], ["--crawl", crawl_name]):
            result = run(command, redis_url, *extra)
            assert result.exit_code == 1, (command, result.output)
            assert result.output == f"Error: {redis_url} is a Redis URL; " + result.output.split("; ", 1)[1]
            assert why in result.output and len(result.output.splitlines()) == 1
    assert RedisFrontier(redis_url, crawl=crawl_name).stats()["pushed"] == 0  # nothing was made by them


def test_crawl_option_missing_or_misplaced_is_one_line(tmp_path, redis_url):
    job = str(tmp_path / "job")
    assert run("push", job, "https://a.example/").exit_code == 0
    cases = [
        (["inspect", redis_url], f"Error: {redis_url} is a Redis URL: name the crawl in it with --crawl NAME"),
        (["push", redis_url, "https://a.example/"], "name the crawl in it with --crawl NAME"),
        (["inspect", job, "--crawl", "x"], "Error: --crawl names a crawl in Redis, and"),
        (["verify", job, "--crawl", "x"], "Error: --crawl names a crawl in Redis, and"),
        (["copy", redis_url, job + "2"], "Error: SRC redis://"),
        (["copy", job, redis_url], "name its crawl with --to-crawl NAME"),
        (["copy", job, job + "2", "--crawl", "x"], "SRC and DST are both job directories"),
        (["copy", job, redis_url, "--from-crawl", "x", "--to-crawl", "y"], "--from-crawl names a crawl in Redis"),
    ]
    for args, message in cases:
        result = run(*args)
        assert result.exit_code == 2, (args, result.output)
        assert len(result.output.splitlines()) == 1 and message in result.output, (args, result.output)
    result = run("inspect", redis_url, "--crawl", "two words")
    assert result.exit_code == 2 and "is not a crawl name" in result.output
    result = run("inspect", redis_url, "--crawl", "missing")
    assert result.exit_code == 1
    assert result.output == f"Error: there is no crawl 'missing' in Redis at {redis_url}\n"


def test_an_unreachable_redis_is_one_line(tmp_path):
    job = str(tmp_path / "job")
    assert run("push", job, "https://a.example/").exit_code == 0
    out = tmp_path / "out.jsonl"
    for args in (["inspect", DOWN, "--crawl", "c"], ["push", DOWN, "--crawl", "c", "https://a.example/"],
                 ["export", DOWN, "--crawl", "c", "-o", str(out)], ["copy", job, DOWN, "--to-crawl", "c"],
                 ["copy", DOWN, str(tmp_path / "new"), "--from-crawl", "c"]):
        result = run(*args)
        assert result.exit_code == 1, (args, result.output)
        assert result.output.startswith(f"Error: open: Redis at {DOWN} could not be reached"), result.output
        assert len(result.output.splitlines()) == 1
    assert not out.exists() and not (tmp_path / "new").exists()


def test_redis_push_inspect_peek_hosts_host(redis_url, crawl_name):
    url = redis_url
    assert run("push", url, "--crawl", crawl_name, "https://a.example/1", "https://b.example/1").exit_code == 0
    result = run("push", url, "--crawl", crawl_name, "-", "--priority", "9", "--json",
                 input="https://a.example/top\nnot a url\nhttps://a.example/1\n")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "queued": 1, "duplicates": 1, "bad": 1, "offered": 2, "via": "direct", "commands": []}

    data = json.loads(run("inspect", url, "--crawl", crawl_name, "--json").output)
    assert (data["backend"], data["crawl"], data["pending"], data["seen"], data["hosts"]) == (
        "redis", crawl_name, 3, 3, 2)
    assert data["next_ready_at"] is not None and "leased_here" not in data
    text = run("inspect", url, "--crawl", crawl_name).output
    assert "pending     3" in text and "next ready  now" in text
    assert "seen        3 (64-bit keys in 1 buckets)" in text and data["seen_exact"]

    result = run("peek", url, "--crawl", crawl_name, "-n", "2")
    lines = result.output.splitlines()
    assert lines[0].startswith("2 of 3 pending, by priority (highest first)")
    assert lines[1] == "9  GET  https://a.example/top"
    assert lines[2].startswith("0  GET  https://")
    peeked = [json.loads(line) for line in run("peek", url, "--crawl", crawl_name, "--json").output.splitlines()]
    assert [r["priority"] for r in peeked] == [9, 0, 0]
    assert run("peek", url, "--crawl", crawl_name, "--priority", "4").output.strip() == (
        "nothing pending at priority 4 (3 pending at other priorities)")

    result = run("host", url, "a.example", "--crawl", crawl_name, "--delay", "3", "--budget", "10", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["delay"] == 3.0
    assert run("host", url, "b.example", "--crawl", crawl_name, "--block").exit_code == 0
    result = run("host", url, "b.example", "--crawl", crawl_name, "--budget", str(2**60))
    assert result.exit_code == 2 and "2**53 - 1" in result.output
    rows = {r["host"]: r for r in json.loads(run("hosts", url, "--crawl", crawl_name, "--json").output)}
    assert rows["a.example"] == {"host": "a.example", "pending": 2, "done": 0, "delay": 3.0, "blocked_until": None,
                                 "budget": 10, "in_flight": 0, "failures": 0, "ready_at": None, "revisits": None}
    assert rows["b.example"]["blocked_until"] == "forever" and rows["b.example"]["delay"] is None
    table = run("hosts", url, "--crawl", crawl_name).output.splitlines()
    assert table[1].split() == ["a.example", "2", "0", "3s", "10", "0", "-"]
    with RedisFrontier(url, crawl=crawl_name, create=False) as r:
        assert take(r).url == "https://a.example/top"  # b.example is blocked


def test_redis_pause_resume_and_drop(redis_url, crawl_name):
    url = redis_url
    assert run("push", url, "--crawl", crawl_name, "https://a.example/1", "https://a.example/2",
               "https://b.example/x").exit_code == 0
    paused = run("pause", url, "--crawl", crawl_name, "--json")
    assert paused.exit_code == 0 and json.loads(paused.stdout)["paused_at"] > time.time() - 60
    assert "paused" in run("inspect", url, "--crawl", crawl_name).output
    with RedisFrontier(url, crawl=crawl_name, create=False) as r:
        assert r.pop() is None  # paused: nothing is handed out
    dry = run("drop", url, "--crawl", crawl_name, "--host", "a.example", "--dry-run")
    assert dry.exit_code == 0 and sorted(dry.stdout.split()) == ["https://a.example/1", "https://a.example/2"]
    assert "would drop 2 pending requests" in dry.stderr
    dropped = run("drop", url, "--crawl", crawl_name, "--match", r"a\.example/1$", "--json")
    shown = json.loads(dropped.stdout)
    assert (shown["dropped"], shown["urls"], shown["dry_run"]) == (1, [], False)
    assert run("resume", url, "--crawl", crawl_name).stdout.strip() == "resumed"
    assert run("resume", url, "--crawl", crawl_name).stdout.strip() == "not paused: nothing to resume"
    with RedisFrontier(url, crawl=crawl_name, create=False) as r:
        popped = {take(r).url, take(r).url}
        assert popped == {"https://a.example/2", "https://b.example/x"} and r.pop() is None


def test_crawls_lists_the_crawls_of_a_server_and_delete_removes_one_whole(redis_url, crawl_name):
    other = crawl_name + "-other"
    with RedisFrontier(redis_url, crawl=crawl_name) as a, RedisFrontier(redis_url, crawl=other) as b:
        a.push_many(Request(f"https://a.example/{i}") for i in range(3))
        b.push(Request("https://b.example/"))
        leased = b.pop()
        assert leased is not None
        listed = {c["name"]: c for c in json.loads(run("crawls", redis_url, "--json").stdout)}
        assert listed[crawl_name]["pending"] == 3 and listed[crawl_name]["clients"] == 1  # open, holding nothing
        assert listed[other]["in_flight"] == 1 and listed[other]["clients"] == 1 and listed[other]["seen"] == 1
        assert listed[crawl_name]["memory_bytes"] > 0 and not listed[crawl_name]["paused"]
        b.done(leased)
    assert [c["clients"] for c in json.loads(run("crawls", redis_url, "--json").stdout)] == [0, 0]  # closed
    table = run("crawls", redis_url, "--no-memory").stdout.splitlines()
    assert table[0].split()[:2] == ["crawl", "pending"] and any(line.startswith(crawl_name + " ") for line in table)

    refused = run("delete", redis_url, "--crawl", crawl_name, input="n\n")
    assert refused.exit_code == 1 and "nothing was deleted" in refused.output
    deleted = run("delete", redis_url, "--crawl", crawl_name, "--yes", "--json")
    assert deleted.exit_code == 0 and json.loads(deleted.stdout)["deleted_keys"] > 0
    names = [c["name"] for c in json.loads(run("crawls", redis_url, "--json").stdout)]
    assert crawl_name not in names and other in names
    assert not list(redis.Redis.from_url(redis_url).scan_iter(match=f"df:{{{crawl_name}}}:*"))
    gone = run("delete", redis_url, "--crawl", crawl_name, "--yes")
    assert gone.exit_code == 1 and "Traceback" not in gone.output
    assert run("crawls", "some/folder").exit_code == 2


def test_redis_export_and_import_round_trip(tmp_path, redis_url, crawl_name):
    with RedisFrontier(redis_url, crawl=crawl_name) as r:
        r.push_many([Request("https://a.example/done"), Request("https://a.example/x", priority=2, meta={"k": [1]}),
                     Request("https://b.example/y", slot="s1")])
        done = r.pop()
        assert done is not None
        r.done(done)
        r.push(Request("https://c.example/later"), not_before=LATER)
        leased = r.pop()  # exported as pending
        assert leased is not None
        out = tmp_path / "out.jsonl"
        result = run("export", redis_url, "--crawl", crawl_name, "-o", str(out), "--seen")
        assert result.exit_code == 0, result.output
        assert "exported 3 pending requests and 4 seen fingerprints" in result.output
        r.done(leased)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    urls = sorted(line["url"] for line in lines if "url" in line)
    assert urls == sorted({"https://a.example/done", "https://a.example/x", "https://b.example/y",
                           "https://c.example/later"} - {done.url})
    assert {bytes.fromhex(line["$seen"]) for line in lines if "$seen" in line} == {  # the 64 bits a crawl keeps
        reduced(fp(u)) for u in ("https://a.example/done", "https://a.example/x", "https://b.example/y",
                        "https://c.example/later")}
    assert any(line.get("not_before") == LATER for line in lines)
    other = crawl_name + "-in"
    result = run("import", redis_url, str(out), "--crawl", other, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"queued": 3, "duplicates": 0, "bad": 0, "seen": 4, "seen_new": 1}
    with RedisFrontier(redis_url, crawl=other, create=False) as r:
        assert sorted(x.url for x in r.pending_requests()) == urls
        assert {x.slot for x in r.pending_requests()} >= {"s1"}
        assert r.push(Request(done.url)) is False


def test_console_script_copies_to_redis_and_reports_errors(tmp_path, redis_url, crawl_name):
    job = str(tmp_path / "job")
    seeded = subprocess.run([*SCRIPT, "push", job, "https://a.example/", "https://b.example/", "--priority", "4"],
                            capture_output=True, text=True)
    assert seeded.returncode == 0, seeded.stderr
    copied = subprocess.run([*SCRIPT, "copy", job, redis_url, "--to-crawl", crawl_name], capture_output=True, text=True)
    assert copied.returncode == 0, copied.stderr
    assert copied.stdout.splitlines()[1].split() == ["pending", "2", "requests"]
    shown = subprocess.run([*SCRIPT, "peek", redis_url, "--crawl", crawl_name, "--json"],
                           capture_output=True, text=True)
    assert shown.returncode == 0 and sorted(json.loads(x)["url"] for x in shown.stdout.splitlines()) == [
        "https://a.example/", "https://b.example/"]
    verified = subprocess.run([*SCRIPT, "verify", redis_url, "--crawl", crawl_name], capture_output=True, text=True)
    assert (verified.returncode, verified.stdout, verified.stderr) == (0, "sound: 2 stored requests checked\n", "")
    for args in (["compact", redis_url, "--crawl", crawl_name], ["inspect", DOWN, "--crawl", crawl_name],
                 ["inspect", redis_url]):
        failed = subprocess.run([*SCRIPT, *args], capture_output=True, text=True)
        assert failed.returncode in (1, 2) and failed.stdout == "", args
        assert len(failed.stderr.splitlines()) == 1 and failed.stderr.startswith("Error: "), failed.stderr
        assert "Traceback" not in failed.stderr
