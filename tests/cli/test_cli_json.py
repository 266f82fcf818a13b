"""Every command's --json: one document of the shape its shipped JSON Schema gives (draft 2020-12), on a
stopped job directory, on one a running crawl holds and on a Redis crawl, checked against real output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator
from popkit import take

from diskfrontier import Frontier, RedisFrontier, Request
from diskfrontier.cli import main
from diskfrontier.cli.group import COMMANDS
from diskfrontier.cli.jsonout import STATES, schema_commands, schema_text

SCRIPT = [os.path.join(os.path.dirname(sys.executable), "diskfrontier")]  # the installed console script

# A crawl that holds the directory: it pops a request every 20 ms and finishes it a little later.
CRAWL = textwrap.dedent("""
    import sys, time
    from diskfrontier import Frontier
    f = Frontier(sys.argv[1])
    print("ready", flush=True)
    while True:
        r = f.pop(timeout=0.02)
        if r is not None:
            time.sleep(0.05)
            f.done(r)
""")


def run(*args: str, input: str | None = None):  # noqa: A002 - the name CliRunner.invoke uses
    return CliRunner().invoke(main, list(args), input=input)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SCRIPT, *args], capture_output=True, text=True, timeout=120, check=False)


def valid(command: str, text: str):
    """The document ``text`` printed by ``command``, after checking it against the command's schema."""
    document = json.loads(text)
    Draft202012Validator(json.loads(schema_text(command))).validate(document)
    return document


def valid_lines(command: str, text: str) -> list:
    return [valid(command, line) for line in text.splitlines()]


def make_job(path: Path) -> Path:
    """A job directory made by pushes and pops: pending, done, failed, delayed, a host's own delay."""
    with Frontier(path) as f:
        for i in range(60):
            f.push(Request(f"https://h{i % 3}.example/{i}"))
        f.push(Request("https://slow.example/wait"), not_before=time.time() + 3600)
        f.done(take(f))
        f.fail(take(f), "boom")
        f.set_delay("h1.example", 2.0)
        f.block("h2.example", float("inf"))
    return path


@pytest.fixture
def job(tmp_path: Path) -> Path:
    return make_job(tmp_path / "job")


@pytest.fixture
def held(tmp_path: Path):
    """A job directory that a running crawl holds, once it published its status."""
    path = make_job(tmp_path / "held")
    script = tmp_path / "crawl.py"
    script.write_text(CRAWL)
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 30
    while not (path / "status.json").exists():
        assert time.monotonic() < deadline, "the crawl published no status.json"
        time.sleep(0.05)
    yield path
    proc.kill()
    proc.wait()


@pytest.fixture
def crawl(redis_url: str, crawl_name: str):
    """A Redis crawl made by pushes and pops, with this test's client live."""
    with RedisFrontier(redis_url, crawl=crawl_name, create=True) as f:
        for i in range(30):
            f.push(Request(f"https://h{i % 3}.example/{i}"))
        f.done(take(f))
        f.fail(take(f), "boom")
        f.set_delay("h1.example", 2.0)
        f.block("h2.example", float("inf"))
        yield redis_url, crawl_name, f


def test_every_command_with_json_has_a_schema_and_every_schema_a_command() -> None:
    with_json = []
    for name in COMMANDS:
        command = main.commands[name]
        if any(isinstance(p, click.Option) and "--json" in p.opts for p in command.params):
            with_json.append(name)
    assert sorted(with_json) == schema_commands()
    assert sorted(with_json) == sorted(COMMANDS)  # every command prints a result
    for name in schema_commands():
        Draft202012Validator.check_schema(json.loads(schema_text(name)))


def test_inspect_has_one_shape_stopped_running_and_on_redis(job: Path, held: Path, crawl) -> None:
    stopped = valid("inspect", run("inspect", str(job), "--json").output)
    running = valid("inspect", cli("inspect", str(held), "--json").stdout)
    url, name, _frontier = crawl
    shared = valid("inspect", run("inspect", url, "--crawl", name, "--json").output)
    assert list(stopped) == list(running) == list(shared)
    assert (stopped["state"], running["state"], shared["state"]) == ("clean", "running", "running")
    assert all(doc["state"] in STATES for doc in (stopped, running, shared))
    assert stopped["pending"] == 59 and stopped["done"] == 1 and stopped["failed"] == 1
    assert stopped["next_due_at"] > time.time() + 3000 and stopped["created_at"] <= time.time()
    assert running["pid"] and running["status_at"] <= time.time() and running["run"]["popped"] >= 0
    assert shared["pending"] == 28 and shared["settings"]["delay"] is not None and shared["inbox"] is None


def test_inspect_of_a_damaged_directory_says_damaged(job: Path) -> None:
    journal = job / "requests.urls"
    data = bytearray(journal.read_bytes())
    data[len(data) // 2] ^= 0xFF
    journal.write_bytes(bytes(data))
    result = run("inspect", str(job), "--json")
    shown = valid("inspect", result.output)
    assert result.exit_code == 1 and shown["state"] == "damaged" and "verify --repair" in shown["state_text"]
    human = run("inspect", str(job))
    assert human.exit_code == 1 and "state          clean" not in human.output and "damaged" in human.output


def test_host_and_hosts_give_the_same_fields_stopped_running_and_on_redis(job: Path, held: Path, crawl) -> None:
    url, name, _frontier = crawl
    one = valid("host", run("host", str(job), "h1.example", "--json").output)
    listed = {row["host"]: row for row in valid("hosts", run("hosts", str(job), "--json").output)}
    assert one["delay"] == listed["h1.example"]["delay"] == 2.0 and listed["h0.example"]["delay"] is None
    assert listed["h2.example"]["blocked_until"] == "forever"
    assert isinstance(one["ready_at"], float) and one["ready_at"] > 1e9  # a time, not a delay
    live = cli("host", str(held), "h1.example", "--json")  # no option: it reads, while a crawl runs
    assert live.returncode == 0, live.stderr
    shown = valid("host", live.stdout)
    assert shown["host"] == "h1.example" and shown["delay"] == 2.0
    assert shown["ready_at"] is None or shown["ready_at"] > 1e9
    live_rows = valid("hosts", cli("hosts", str(held), "--json").stdout)
    assert list(live_rows[0]) == [*list(one), "revisits"]
    shared_one = valid("host", run("host", url, "h1.example", "--crawl", name, "--json").output)
    shared = {row["host"]: row for row in valid("hosts", run("hosts", url, "--crawl", name, "--json").output)}
    assert shared_one["delay"] == shared["h1.example"]["delay"] == 2.0 and shared["h0.example"]["delay"] is None
    assert list(shared_one) == list(one)


def test_host_without_an_option_reads_a_directory_a_crawl_holds(held: Path) -> None:
    shown = cli("host", str(held), "h1.example")
    assert shown.returncode == 0, shown.stderr
    assert "in use" not in shown.stderr and "h1.example" in shown.stdout and "2s" in shown.stdout


def test_pause_and_resume_answer_the_same_document(job: Path, held: Path, crawl) -> None:
    url, name, _frontier = crawl
    for target in ([str(job)], [url, "--crawl", name]):
        paused = valid("pause", run("pause", *target, "--json").output)
        resumed = valid("resume", run("resume", *target, "--json").output)
        assert list(paused) == list(resumed)
        assert paused["paused"] and paused["paused_at"] <= time.time() and paused["changed"] is True
        assert not resumed["paused"] and resumed["paused_at"] is None and resumed["changed"] is True
        assert paused["via"] == "direct"
    paused = valid("pause", cli("pause", str(held), "--json").stdout)
    resumed = valid("resume", cli("resume", str(held), "--json").stdout)
    assert paused["via"] == resumed["via"] == "inbox" and paused["paused"] and not resumed["paused"]
    assert paused["applied_at"] <= time.time() and paused["command_id"]


def test_drop_dry_run_says_nothing_was_dropped(job: Path, crawl) -> None:
    url, name, _frontier = crawl
    for target in ([str(job)], [url, "--crawl", name]):
        dry = valid("drop", run("drop", *target, "--host", "h0.example", "--dry-run", "--json").output)
        assert dry["dry_run"] and dry["dropped"] == 0 and dry["would_drop"] >= 9 and dry["urls"]
        done = valid("drop", run("drop", *target, "--host", "h0.example", "--json").output)
        assert not done["dry_run"] and done["dropped"] == dry["would_drop"] and done["would_drop"] is None


def test_writing_commands(job: Path, tmp_path: Path, held: Path, crawl) -> None:
    url, name, _frontier = crawl
    pushed = valid("push", run("push", str(job), "https://new.example/1", "https://h0.example/0", "--json").output)
    assert (pushed["queued"], pushed["duplicates"], pushed["via"]) == (1, 1, "direct")
    sent = valid("push", cli("push", str(held), "https://new.example/2", "--json").stdout)
    assert sent["via"] == "inbox" and sent["queued"] == 1 and len(sent["commands"]) == 1
    queued = valid("push", cli("push", str(held), "https://new.example/3", "--json", "--no-wait").stdout)
    assert queued["queued"] is None and queued["offered"] == 1
    valid("push", run("push", url, "--crawl", name, "https://new.example/1", "--json").output)
    requeued = valid("requeue-failed", run("requeue-failed", str(job), "--json").output)
    assert requeued["requeued"] == 1
    valid("requeue-failed", run("requeue-failed", url, "--crawl", name, "--json").output)
    valid("requeue-failed", cli("requeue-failed", str(held), "--json").stdout)
    for target in ([str(job)], [url, "--crawl", name]):
        valid("host", run("host", *target, "h0.example", "--delay", "3", "--json").output)
    changed = valid("host", cli("host", str(held), "h0.example", "--block-for", "600", "--json").stdout)
    assert changed["blocked_until"] > time.time() + 500


def test_export_and_import_of_seen_fingerprints(job: Path, tmp_path: Path, crawl) -> None:
    url, name, _frontier = crawl
    out = tmp_path / "all.jsonl"
    exported = valid("export", run("export", str(job), "-o", str(out), "--seen", "--json").output)
    assert exported["requests"] == 59 and exported["seen"] == 61
    assert run("export", str(job), "--json").exit_code == 2  # the requests go to stdout: no room for a summary
    imported = run("import", str(tmp_path / "copy"), str(out), "--json")
    shown = valid("import", imported.output)
    assert shown["queued"] == 59 and shown["seen"] == 61 and shown["seen_new"] == 2
    human = run("import", str(tmp_path / "again"), str(out))
    assert human.output.strip() == "queued 59, duplicates 0, bad 0, seen 61 (2 not seen before)"
    valid("import", run("import", url, str(out), "--crawl", name, "--json").output)
    valid("export", run("export", url, "--crawl", name, "-o", str(tmp_path / "r.jsonl"), "--json").output)


def test_streams_one_document_a_line(job: Path, crawl) -> None:
    url, name, _frontier = crawl
    for target in ([str(job)], [url, "--crawl", name]):
        assert len(valid_lines("peek", run("peek", *target, "-n", "3", "--json").output)) == 3
        failures = valid_lines("failed", run("failed", *target, "--json").output)
        assert [f["error"] for f in failures] == ["boom"]


def test_maintenance_and_transfer(job: Path, tmp_path: Path, crawl) -> None:
    url, name, _frontier = crawl
    sound = valid("verify", run("verify", str(job), "--json").output)
    shared = valid("verify", run("verify", url, "--crawl", name, "--json").output)
    assert sound["sound"] and shared["sound"] and list(sound) == list(shared)
    valid("compact", run("compact", str(job), "--json").output)
    copied = valid("copy", run("copy", str(job), url, "--to-crawl", "copied", "--json").output)
    assert copied["queued"] == 59
    scrapy = tmp_path / "scrapy"
    scrapy.mkdir()
    fingerprint = bytes(range(20))
    (scrapy / "requests.seen").write_bytes(len(fingerprint).to_bytes(2, "big") + fingerprint)
    adopted = run("adopt-scrapy", str(scrapy), "--json")
    assert valid("adopt-scrapy", adopted.output)["seen"] == 1, adopted.output
    demo = run("demo", str(tmp_path / "demo"), "--pages", "20", "--json")
    assert valid("demo", demo.output)["fetched"] == 20, demo.output


def test_redis_management(crawl) -> None:
    url, name, _frontier = crawl
    listed = valid("crawls", run("crawls", url, "--json").output)
    assert [c["name"] for c in listed] == [name] and listed[0]["memory_bytes"] > 0
    clients = valid("clients", run("clients", url, "--crawl", name, "--json").output)
    assert clients[0]["live"] and clients[0]["last_seen_at"] <= time.time() + 1
    released = valid("release", run("release", url, "--crawl", name, "--expired", "--json").output)
    assert released["released"] == 0


def test_delete_on_redis(redis_url: str, crawl_name: str) -> None:
    with RedisFrontier(redis_url, crawl=crawl_name, create=True) as f:
        f.push(Request("https://a.example/"))
    deleted = valid("delete", run("delete", redis_url, "--crawl", crawl_name, "--yes", "--json").output)
    assert deleted["crawl"] == crawl_name and deleted["deleted_keys"] > 0


def test_release_counts_its_leases_in_words(redis_url: str, crawl_name: str) -> None:
    with RedisFrontier(redis_url, crawl=crawl_name, create=True) as f:
        f.push(Request("https://a.example/"))
        assert f.pop() is not None
        client = valid("clients", run("clients", redis_url, "--crawl", crawl_name, "--json").output)[0]["client"]
        said = run("release", redis_url, "--crawl", crawl_name, "--client", client, "--force")
    assert said.stdout.strip() == f"released 1 lease of client {client} (pending again)"


def test_serve_prints_where_it_listens(job: Path) -> None:
    pytest.importorskip("aiohttp")
    proc = subprocess.Popen([*SCRIPT, "serve", str(job), "--listen", "127.0.0.1", "--port", "0", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        text = ""
        while True:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            text += line
            if line.startswith("}"):
                break
        shown = valid("serve", text)
        assert shown["listen"] == "127.0.0.1" and shown["port"] > 0 and shown["token"] is None
        assert shown["url"] == f"http://127.0.0.1:{shown['port']}/"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
