"""The diskfrontier command: CliRunner tests of every command, and subprocess tests of the console script."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

import click
import pytest
from click.testing import CliRunner
from paths import EXAMPLE, TESTS
from popkit import take

from diskfrontier import Frontier
from diskfrontier.cli import main
from diskfrontier.jobdir.layout import FORMAT_VERSION

SCRIPT = [os.path.join(os.path.dirname(sys.executable), "diskfrontier")]  # the installed console script


@pytest.fixture
def example(tmp_path):
    job = tmp_path / "example"
    shutil.copytree(EXAMPLE, job)
    return str(job)


def run(*args, input=None):  # noqa: A002 - the name CliRunner.invoke uses
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def test_every_command_has_help_with_an_example():
    for name in main.commands:
        result = run(name, "--help")
        assert result.exit_code == 0, name
        assert "Example:" in result.output, f"{name} --help has no example"


def test_inspect_example(example):
    result = run("inspect", example)
    assert result.exit_code == 0
    lines = dict(line.split(None, 1) if "  " in line else (line, "") for line in result.output.splitlines())
    assert "state          clean" in result.output
    assert "pending        18" in result.output
    assert "  priority 5   2" in result.output
    data = json.loads(run("inspect", example, "--json").output)
    assert data["pending"] == 18 and data["pending_by_priority"] == {"5": 2, "1": 1, "0": 15}
    assert data["seen"] == 20 and data["state"] == "clean" and data["format_version"] == FORMAT_VERSION
    assert lines


def _contents(folder: str) -> dict[str, bytes]:
    """The bytes of every file of ``folder``, by name."""
    contents = {}
    for name in os.listdir(folder):
        if name in ("status.json", "outcomes.json"):
            continue  # the holder's figures, replaced about once a second while it runs
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                contents[name] = f.read()
    return contents


def test_inspect_is_read_only_on_a_live_directory(example):
    """A holder that publishes nothing (watch=False): inspect reads the files, and changes none."""
    code = ("import sys,time; from diskfrontier import Frontier; f=Frontier(sys.argv[1], watch=False); "
            "print('ok', flush=True); time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", code, example], stdout=subprocess.PIPE)
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == b"ok"
        before = _contents(example)
        out = subprocess.run([*SCRIPT, "inspect", example, "--json"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        shown = json.loads(out.stdout)
        assert shown["state"] == "held" and shown["pid"] == child.pid
        assert shown["state_text"].startswith(f"in use by pid {child.pid}")
        after = _contents(example)
        assert before == after
        push = subprocess.run([*SCRIPT, "push", example, "https://x.example/", "--timeout", "0.3"],
                              capture_output=True, text=True)
        assert push.returncode == 1 and "did not apply command" in push.stderr  # queued: nobody applies it
        assert "Traceback" not in push.stderr
    finally:
        child.kill()
        child.wait()


def test_peek_shows_pop_order_without_consuming(example):
    result = run("peek", example, "-n", "3")
    assert result.output.splitlines() == [
        "5  GET  https://shop.example/hats/",
        "5  GET  https://shop.example/shoes/",
        "1  POST https://shop.example/api/search",
    ]
    peeked = run("peek", example, "--priority", "0", "-n", "2", "--json").output
    only = [json.loads(line) for line in peeked.splitlines()]
    assert [r["url"] for r in only] == ["https://shop.example/bags/item-5.html", "https://shop.example/bags/item-4.html"]
    with Frontier(example) as f:
        assert take(f).url == "https://shop.example/hats/"  # peek did not consume it
        assert len(f) == 17


def test_verify_sound_and_damaged(example):
    result = run("verify", example)
    assert result.exit_code == 0 and result.output.startswith("sound:")
    with open(os.path.join(example, "requests.urls"), "r+b") as f:
        f.seek(30)
        f.write(b"\xee")
    result = run("verify", example, "--json")
    data = json.loads(result.output)
    assert result.exit_code == 1 and not data["sound"]
    assert data["findings"][0]["where"].endswith("requests.urls") and data["findings"][0]["offset"] == 8
    result = run("verify", example, "--repair")
    assert result.exit_code == 1 and "repaired" in result.output
    assert run("verify", example).exit_code == 0
    # the damaged record was the finished home page: every pending request survives
    assert json.loads(run("inspect", example, "--json").output)["pending"] == 18


def test_compact_reports_bytes(example):
    result = run("compact", example, "--json")
    data = json.loads(result.output)
    assert result.exit_code == 0 and data["bytes_after"] < data["bytes_before"] and data["pending"] == 18
    assert "journal:" in run("compact", example).output


def test_push_from_stdin_with_bad_lines(tmp_path):
    job = str(tmp_path / "seeded")
    lines = "https://a.example/\nnot a url\n# a comment\nhttps://b.example/\nftp:///nohost\nhttps://a.example/\n"
    result = CliRunner().invoke(main, ["push", job, "-f", "-", "--priority", "3"], input=lines)
    assert result.exit_code == 1
    assert "line 2: skipped: Request.url 'not a url' has no scheme" in result.output
    assert "line 5: skipped" in result.output
    assert "queued 2, duplicates 1, bad 2" in result.output
    with Frontier(job) as f:
        assert [r.priority for r in [take(f), take(f)]] == [3, 3]


def test_push_strict_pushes_nothing(tmp_path):
    job = str(tmp_path / "strict")
    result = CliRunner().invoke(main, ["push", job, "--strict", "https://a.example/", "bad"])
    assert result.exit_code == 1 and "nothing was pushed" in result.output
    assert not os.path.exists(os.path.join(job, "requests.urls"))


def test_push_usage_errors_exit_2(tmp_path):
    assert run("push", str(tmp_path / "j")).exit_code == 2
    assert run("inspect", str(tmp_path / "missing")).exit_code == 2
    assert run("peek", str(tmp_path), "-n", "-1").exit_code == 2


def test_inspect_of_a_plain_directory_is_one_line_error(tmp_path):
    result = CliRunner().invoke(main, ["inspect", str(tmp_path)])
    assert result.exit_code == 1 and "not a diskfrontier job directory" in result.output


def test_export_then_import_round_trips(example, tmp_path):
    out = tmp_path / "pending.jsonl"
    assert run("export", example, "-o", str(out)).exit_code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 18 and rows[0]["url"] == "https://shop.example/shoes/"  # push order
    assert any(r["method"] == "POST" and r["body"] for r in rows)
    target = str(tmp_path / "copy")
    result = run("import", target, str(out), "--json")
    assert json.loads(result.output) == {"queued": 18, "duplicates": 0, "bad": 0, "seen": 0, "seen_new": 0}
    assert run("import", target, str(out)).output.strip() == "queued 0, duplicates 18, bad 0, seen 0"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"url": "https://z.example/"}\n{"nourl": 1}\nnot json\n')
    result = CliRunner().invoke(main, ["import", target, str(bad)])
    assert result.exit_code == 1 and "line 2: skipped" in result.output and "line 3: skipped" in result.output
    with Frontier(target) as f:
        post = list(f.in_flight) or None
        assert post is None
        requests = []
        while (r := f.pop()) is not None:
            requests.append(r)
        assert any(r.body == b'{"q": "red"}' for r in requests)


def _fetch_counts(job: str) -> Counter:
    with open(os.path.join(job, "demo-fetches.log")) as f:
        return Counter(line.strip() for line in f if line.strip())


def test_demo_runs_to_completion(tmp_path):
    job = str(tmp_path / "demo")
    result = subprocess.run([*SCRIPT, "demo", job, "--pages", "120", "--json"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["fetched"] == 120 and data["pending"] == 0 and data["stopped_by"] == "finished"
    assert set(_fetch_counts(job).values()) == {1}
    # the demo's two broken links (404) fail at once: one try each, no retry
    with Frontier(job) as frontier:
        broken = [f for f in frontier.failed() if "404" in f.error]
    assert data["failed_at_once"] == len(broken) == 2 and all(f.request.attempts == 0 for f in broken)


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
def test_demo_interrupted_then_resumed_fetches_every_page(tmp_path, sig):
    job = str(tmp_path / "demo")
    pages = 400
    for delay in (0.6, 0.9):
        proc = subprocess.Popen([*SCRIPT, "demo", job, "--pages", str(pages)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        time.sleep(delay)
        proc.send_signal(sig)
        proc.wait(timeout=60)
    result = subprocess.run([*SCRIPT, "demo", job, "--pages", str(pages), "--json"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    counts = _fetch_counts(job)
    assert set(counts) == {f"/page/{n}" for n in range(pages)}  # every page fetched
    refetched = sum(c - 1 for c in counts.values())
    # a page is fetched again only if it was in hand at a kill: at most one a worker (8) a kill
    assert refetched <= (2 * 8 if sig == signal.SIGKILL else 0)
    if sig == signal.SIGINT:
        assert set(counts.values()) == {1}


def test_demo_runs_again_on_schedule_with_its_workers(tmp_path):
    job = str(tmp_path / "demo")
    result = run("demo", job, "--pages", "4000", "--workers", "4", "--duration", "0.2", "--every", "0.4",
                 "--times", "2", "--json")
    data = json.loads(result.output)
    assert data["runs"] == 2 and data["stopped_by"] == "time limit" and data["fetched"] > 0
    hosts = json.loads(run("hosts", job, "--json").output)
    assert len(hosts) == 4 and all(h["done"] > 0 for h in hosts)  # served on four addresses


def test_demo_for_seconds_stops_cleanly(tmp_path):
    job = str(tmp_path / "demo")
    result = run("demo", job, "--pages", "5000", "--for", "0.2", "--json")
    data = json.loads(result.output)
    assert data["stopped_by"] == "time limit" and data["pending"] > 0
    assert json.loads(run("inspect", job, "--json").output)["state"] == "clean"


def test_the_console_script_is_installed():
    assert os.access(SCRIPT[0], os.X_OK), f"{SCRIPT[0]} missing: is the package installed (pip install -e .)?"
    result = subprocess.run([*SCRIPT, "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and "version" in result.stdout


def test_verbose_logs_the_recovery(example, caplog):
    with open(os.path.join(example, "requests.cursor"), "w") as f:
        f.write("{}")  # as after a crash: the queues are rebuilt at the next open
    result = subprocess.run([*SCRIPT, "-v", "compact", example], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "rebuilding the queues" in result.stderr and "compacted" in result.stderr
    quiet = subprocess.run([*SCRIPT, "compact", example], capture_output=True, text=True)
    assert quiet.stderr == ""


def test_push_from_a_file_with_dont_filter_and_json(tmp_path):
    job = str(tmp_path / "seeded")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("https://a.example/\nhttps://b.example/\n")
    assert json.loads(run("push", job, "--file", str(seeds), "--json").output) == {
        "queued": 2, "duplicates": 0, "bad": 0, "offered": 2, "via": "direct", "commands": []}
    assert json.loads(run("push", job, "-f", str(seeds), "--json").output) == {
        "queued": 0, "duplicates": 2, "bad": 0, "offered": 2, "via": "direct", "commands": []}
    result = run("push", job, "https://a.example/", "--dont-filter", "--json")
    assert json.loads(result.output) == {
        "queued": 1, "duplicates": 0, "bad": 0, "offered": 1, "via": "direct", "commands": []}
    with Frontier(job) as f:
        assert len(f) == 3


def test_push_with_only_bad_lines_creates_nothing(tmp_path):
    job = tmp_path / "never"
    result = CliRunner().invoke(main, ["push", str(job), "bad-one"])
    assert result.exit_code == 1 and "argument 1: skipped" in result.output
    assert not job.exists()


def test_priority_out_of_range_is_bad_usage(tmp_path):
    result = run("push", str(tmp_path / "j"), "https://a.example/", "--priority", str(2**31))
    assert result.exit_code == 2 and "--priority" in result.output


def test_an_os_error_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = CliRunner().invoke(main, ["push", str(blocker / "job"), "https://a.example/"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and len(result.output.strip().splitlines()) == 1


def test_export_to_stdout_and_by_priority(example):
    rows = [json.loads(line) for line in run("export", example, "--priority", "5").output.splitlines()]
    assert [r["url"] for r in rows] == ["https://shop.example/shoes/", "https://shop.example/hats/"]  # push order
    assert len(run("export", example).output.splitlines()) == 18


def test_import_from_stdin(example, tmp_path):
    exported = run("export", example).output
    result = CliRunner().invoke(main, ["import", str(tmp_path / "copy"), "-", "--json"], input=exported)
    assert result.exit_code == 0 and json.loads(result.output) == {
        "queued": 18, "duplicates": 0, "bad": 0, "seen": 0, "seen_new": 0}


def test_import_names_a_bad_base64_value(tmp_path):
    line = '{"url": "https://a.example/", "body": {"$base64": "%%%"}}\n'
    result = CliRunner().invoke(main, ["import", str(tmp_path / "j"), "-"], input=line)
    assert result.exit_code == 1 and "line 1: skipped" in result.output and "base64" in result.output


@pytest.mark.parametrize("command", [
    ["compact", "{job}"], ["verify", "{job}"], ["export", "{job}", "-o", "{tmp}/out.jsonl"],
    ["import", "{tmp}/new", "{tmp}/in.jsonl"], ["demo", "{tmp}/demo", "--pages", "30"],
    ["push", "{tmp}/pushed", "-f", "{tmp}/urls.txt"],
])
def test_long_work_draws_a_progress_bar_on_a_terminal(example, tmp_path, monkeypatch, command):
    (tmp_path / "in.jsonl").write_text(run("export", example).output)
    (tmp_path / "urls.txt").write_text("".join(f"https://a.example/{i}\n" for i in range(3000)))
    args = [a.format(job=example, tmp=tmp_path) for a in command]
    quiet = CliRunner().invoke(main, args)
    label = {"compact": "compacting", "verify": "verifying", "export": "exporting",
             "import": "importing", "demo": "crawling", "push": "pushing"}[command[0]]
    assert label not in quiet.stderr  # not a terminal: no bar
    monkeypatch.setattr("diskfrontier.cli.support.stderr_is_terminal", lambda: True)
    if command[0] in ("import", "push"):
        args[1] += "2"
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert label in result.stderr


def _options_in_tests() -> set[str]:
    text = ""
    for root, _dirs, names in sorted(os.walk(TESTS)):
        for name in sorted(names):
            if not (name.startswith("test_") and name.endswith(".py")):
                continue
            with open(os.path.join(root, name)) as f:
                text += f.read()
    return {token for token in text.replace('"', " ").replace("'", " ").split() if token.startswith("-")}


def test_every_option_of_every_command_is_exercised():
    used = _options_in_tests()
    missing = []
    for name, command in [*main.commands.items(), ("(group)", main)]:
        for param in command.params:
            if isinstance(param, click.Option) and not any(o in used for o in param.opts + param.secondary_opts):
                missing.append(f"{name} {param.opts[0]}")
    assert not missing, f"options no test uses: {missing}"
