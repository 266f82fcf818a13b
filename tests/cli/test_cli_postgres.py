"""Every command that takes a Redis URL with --crawl takes a PostgreSQL URL with it too: inspect, peek, hosts,
host, failed, requeue-failed, push, import, pause, resume, drop, export, verify [--repair], crawls, clients,
release and delete, against the session's real PostgreSQL server, each --json checked against its schema;
clients and release with real worker processes killed with SIGKILL."""

from __future__ import annotations

import json
import signal
import time

import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator
from leaseholders import Workers
from popkit import take

from diskfrontier import LeaseExpired, PostgresFrontier, Request
from diskfrontier.access.checking import verify_target
from diskfrontier.cli import main
from diskfrontier.cli.jsonout import schema_text


def run(*args: str, input: str | None = None):  # noqa: A002 - the name CliRunner.invoke uses
    return CliRunner().invoke(main, list(args), input=input)


def valid(command: str, text: str):
    document = json.loads(text)
    Draft202012Validator(json.loads(schema_text(command))).validate(document)
    return document


@pytest.fixture
def crawl(postgres_url: str, crawl_name: str):
    """A PostgreSQL crawl made by pushes and pops: pending, one done, one failed, a host's delay, a block."""
    with PostgresFrontier(postgres_url, crawl=crawl_name) as f:
        f.push_many([Request(f"https://h{i % 3}.example/{i}") for i in range(30)])
        f.done(take(f))
        f.fail(take(f), "boom")
        f.set_delay("h1.example", 2.0)
        f.block("h2.example", float("inf"))
    return postgres_url, crawl_name


def test_the_reading_commands_on_a_postgres_crawl(crawl) -> None:
    url, name = crawl
    result = run("inspect", url, "--crawl", name)
    assert result.exit_code == 0, result.output
    assert "postgres" in result.output and "28" in result.output and "64-bit keys in the seen table" in result.output
    document = valid("inspect", run("inspect", url, "--crawl", name, "--json").output)
    assert (document["backend"], document["pending"], document["done"], document["failed"]) == ("postgres", 28, 1, 1)
    assert document["settings"] == {"delay": 0.0, "per_host": None, "prefer": "priority"}
    result = run("peek", url, "--crawl", name, "-n", "3")
    assert result.exit_code == 0 and "3 of 28 pending" in result.output and "a PostgreSQL crawl" in result.output
    hosts = valid("hosts", run("hosts", url, "--crawl", name, "--json").output)
    with PostgresFrontier(url, crawl=name, create=False) as f:
        assert {h["host"]: h["pending"] for h in hosts} == {h.host: h.pending for h in f.hosts()}
    assert sum(h["pending"] for h in hosts) == 28 and len(hosts) == 3
    assert {h["host"]: h["delay"] for h in hosts}["h1.example"] == 2.0
    failed = [json.loads(line) for line in run("failed", url, "--crawl", name, "--json").output.splitlines()]
    assert [f["error"] for f in failed] == ["boom"]
    exported = run("export", url, "--crawl", name, "--seen").output.splitlines()
    assert sum('"$seen"' in line for line in exported) == 30 and len(exported) == 30 + 28


def test_the_writing_and_steering_commands_on_a_postgres_crawl(crawl, tmp_path) -> None:
    url, name = crawl
    result = run("push", url, "--crawl", name, "https://new.example/a", "https://h0.example/0")
    assert result.exit_code == 0 and "queued 1, duplicates 1" in result.output, result.output
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps({"url": "https://imported.example/x", "priority": 5}) + "\n")
    assert run("import", url, str(lines), "--crawl", name).exit_code == 0
    assert valid("requeue-failed", run("requeue-failed", url, "--crawl", name, "--json").output)["requeued"] == 1
    result = run("host", url, "h2.example", "--crawl", name, "--unblock", "--json")
    assert result.exit_code == 0, result.output
    assert valid("pause", run("pause", url, "--crawl", name, "--json").output)["paused"] is True
    with PostgresFrontier(url, crawl=name, create=False) as f:
        assert f.paused_since is not None and f.pop() is None
        h2 = f.host("h2.example")
        assert h2 is not None and h2.blocked_until is None
    assert valid("resume", run("resume", url, "--crawl", name, "--json").output)["paused"] is False
    with PostgresFrontier(url, crawl=name, create=False) as f:
        h0 = f.host("h0.example")
        assert h0 is not None
        before, of_h0 = len(f), h0.pending
    dropped = valid("drop", run("drop", url, "--crawl", name, "--host", "h0.example", "--json").output)
    assert dropped["dropped"] == of_h0 > 0 and before == 28 + 1 + 1 + 1
    with PostgresFrontier(url, crawl=name, create=False) as f:
        assert len(f) == before - of_h0
        top = f.pop()
        assert top is not None and top.url == "https://imported.example/x"  # the highest priority, not paused


def test_crawls_and_delete_in_a_postgres_database(crawl) -> None:
    url, name = crawl
    listed = valid("crawls", run("crawls", url, "--json").output)
    assert [(c["name"], c["pending"], c["done"], c["failed"], c["seen"]) for c in listed] == [(name, 28, 1, 1, 30)]
    assert listed[0]["memory_bytes"] > 0  # its tables and indexes on disk
    result = run("crawls", url)
    assert result.exit_code == 0 and "disk" in result.output.splitlines()[0] and name in result.output
    result = run("delete", url, "--crawl", name, "--yes", "--json")
    assert valid("delete", result.output)["deleted_keys"] > 0
    assert valid("crawls", run("crawls", url, "--json").output) == []
    result = run("inspect", url, "--crawl", name)
    assert result.exit_code == 1 and "there is no crawl" in result.output


def test_a_postgres_url_is_checked_as_a_redis_one(postgres_url, crawl_name, tmp_path) -> None:
    shown = postgres_url.replace("//postgres@", "//***@")  # the user (and a password) are not shown
    result = run("inspect", postgres_url)
    assert result.exit_code == 2
    assert f"{shown} is a PostgreSQL URL: name the crawl in it with --crawl NAME" in result.output
    result = run("compact", postgres_url, "--crawl", crawl_name)
    assert result.exit_code == 1 and "a PostgreSQL crawl has none" in result.output
    result = run("push", postgres_url, "--crawl", crawl_name, "--shards", "2", "https://a.example/")
    assert result.exit_code == 2 and "--shards is for a Redis crawl" in result.output
    result = run("crawls", str(tmp_path))
    assert result.exit_code == 2 and "PostgreSQL URL" in result.output


def test_a_crawl_name_with_a_dot_or_a_capital_is_made_and_reopened(postgres_url) -> None:
    for name in ("news.v2", "Shop"):
        with PostgresFrontier(postgres_url, crawl=name) as f:
            assert f.made and f.push(Request("https://a.example/"))
        with PostgresFrontier(postgres_url, crawl=name, create=False) as f:
            assert not f.made and len(f) == 1


# ------------------------------------------------------------------ verify
def test_verify_and_repair_of_a_postgres_crawl(crawl, postgres_server) -> None:
    url, name = crawl
    result = run("verify", url, "--crawl", name)
    assert result.exit_code == 0 and result.output.startswith("sound: 29 rows of crawl"), result.output
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "df_{name}"')
        conn.execute("UPDATE hosts SET ready_n = ready_n + 2, top_priority = 7 WHERE name = 'h0.example'")
        conn.execute("UPDATE requests SET rank = rank + 1000 WHERE id = (SELECT min(id) FROM requests)")
        conn.execute("UPDATE counters SET value = value + 5 WHERE name = 'failed'")
    result = run("verify", url, "--crawl", name, "--json")
    assert result.exit_code == 1
    found = valid("verify", result.output)
    assert found["backend"] == "postgres" and not found["sound"] and not found["repaired"]
    wheres = sorted(f["where"] for f in found["findings"])
    assert wheres == ["counters failed", "hosts row h0.example ready_n", "hosts row h0.example top",
                      wheres[3]] and wheres[3].startswith("requests row ")
    result = run("verify", url, "--crawl", name, "--repair")
    assert result.exit_code == 1  # damage was found (and mended), as for a job directory and Redis
    assert "repaired: set the counts, ranks and counters" in result.output and "left" not in result.output
    result = run("verify", url, "--crawl", name)
    assert result.exit_code == 0, result.output
    with PostgresFrontier(url, crawl=name, create=False) as f:  # the crawl works as before the damage
        assert len(f) == 28 and f.stats()["failed"] == 1
        h0 = f.host("h0.example")
        assert h0 is not None
        of_h0 = h0.pending
        popped = []
        while (r := f.pop()) is not None:
            popped.append(r.url)
            f.done(r)
        assert len(popped) == len(set(popped))
        assert sum(u.startswith("https://h0.") for u in popped) == of_h0  # h1 waits out its delay, h2 is blocked
        assert sum(u.startswith("https://h1.") for u in popped) <= 1 and not any("h2." in u for u in popped)


def test_repair_names_what_the_rows_cannot_tell_and_leaves_it(crawl) -> None:
    url, name = crawl
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "df_{name}"')
        [(row,)] = conn.execute("SELECT min(id) FROM requests").fetchall()
        conn.execute("UPDATE requests SET record = '\\xc1'::bytea WHERE id = %s", (row,))
        conn.execute("UPDATE hosts SET in_flight = 3 WHERE name = 'h1.example'")
    report = verify_target(url, name, repair=True)
    assert report.repaired and not report.sound
    assert [n for n in report.notes if n.startswith("not repaired")] == [
        f"not repaired: requests row {row}: " + next(f.problem for f in report.findings
                                                     if f.where == f"requests row {row}")
        + " (left in place: the rows do not tell what it should be)"]
    after = verify_target(url, name)
    assert [f.where for f in after.findings] == [f"requests row {row}"]  # the count is mended, the record is not
    result = run("verify", url, "--crawl", name, "--repair")
    assert result.exit_code == 1 and "1 problem left (see the notes)" in result.output


def test_verify_of_a_missing_postgres_crawl(postgres_url, crawl_name) -> None:
    result = run("verify", postgres_url, "--crawl", crawl_name, "--repair")
    assert result.exit_code == 1
    assert "there is no such schema" in result.output and "note: not repaired: the crawl is not there" in result.output


# ------------------------------------------------------------------ clients and release
@pytest.fixture
def workers(postgres_url, crawl_name):
    started = Workers("postgres", postgres_url, crawl_name)
    yield started
    started.end()


def listed(url: str, crawl: str) -> dict[str, dict]:
    result = run("clients", url, "--crawl", crawl, "--json")
    assert result.exit_code == 0, result.output
    return {c["client"]: c for c in valid("clients", result.stdout)}


def test_clients_lists_a_live_worker_and_release_refuses_it_unless_forced(postgres_url, crawl_name, workers):
    with PostgresFrontier(postgres_url, crawl=crawl_name) as f:
        f.push_many(Request(f"https://h{i}.example/") for i in range(6))
    proc, client = workers.start(hold=4, lease=60.0)
    entry = listed(postgres_url, crawl_name)[client]
    assert (entry["live"], entry["leases"], entry["pid"], entry["lease_seconds"]) == (True, 4, proc.pid, 60.0)
    result = run("release", postgres_url, "--crawl", crawl_name, "--client", client)
    assert result.exit_code == 1 and f"client {client} of crawl '{crawl_name}' is live" in result.output
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    result = run("release", postgres_url, "--crawl", crawl_name, "--client", client, "--force", "--json")
    assert result.exit_code == 0, result.output
    answer = valid("release", result.stdout)
    assert (answer["released"], answer["was_live"]) == (4, True)  # seen within its lease: live until then
    with PostgresFrontier(postgres_url, crawl=crawl_name, create=False) as f:
        assert len(f) == 6 and f.stats()["reclaimed"] == 4 and f.stats()["in_flight"] == 0
    result = run("release", postgres_url, "--crawl", crawl_name, "--client", "0123456789ab-1")
    assert result.exit_code == 1 and "has no client" in result.output


def test_release_expired_gives_back_the_leases_of_a_killed_worker(postgres_url, crawl_name, workers):
    with PostgresFrontier(postgres_url, crawl=crawl_name) as f:
        f.push_many(Request(f"https://h{i}.example/") for i in range(5))
    lease = 1.0
    proc, client = workers.start(hold=3, lease=lease)
    killed = time.monotonic()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    while listed(postgres_url, crawl_name)[client]["live"]:  # dead once two beats of its renewal are missed
        assert time.monotonic() - killed < 30
        time.sleep(0.05)
    time.sleep(max(0.0, lease - (time.monotonic() - killed)) + 0.1)  # and its leases run out
    result = run("release", postgres_url, "--crawl", crawl_name, "--expired")
    assert result.exit_code == 0 and result.output == "released 3 leases that had run out (pending again)\n"
    entry = listed(postgres_url, crawl_name)[client]
    assert (entry["live"], entry["leases"]) == (False, 0)
    result = run("release", postgres_url, "--crawl", crawl_name, "--client", client)  # a dead client: no --force
    assert result.exit_code == 0 and "released 0 leases" in result.output
    assert client not in listed(postgres_url, crawl_name)  # and its row is gone


@pytest.mark.parametrize("ack", ["wait", "deferred"])
def test_a_released_lease_cannot_be_finished_by_its_old_holder(postgres_url, crawl_name, ack):
    with PostgresFrontier(postgres_url, crawl=crawl_name, lease=60.0, ack=ack) as f:
        f.push(Request("https://a.example/"))
        held = f.pop()
        assert held is not None
        result = run("release", postgres_url, "--crawl", crawl_name, "--client", f.client_id, "--force")
        assert result.exit_code == 0 and "released 1 lease of client" in result.output
        assert "was live" in result.stderr
        if ack == "wait":
            with pytest.raises(LeaseExpired):
                f.done(held)
        else:  # the done rides on the next step, which finds the lease gone: counted, nothing changed
            f.done(held)
            assert f.stats()["acks_lost"] == 1
        again = f.pop()
        assert again is not None and again.url == "https://a.example/"
        f.done(again)
        assert f.finished
