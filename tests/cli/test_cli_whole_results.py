"""Commands leave a whole result or none: export writes its file under another name and renames it
at the end, demo refuses a folder that is not a job directory, inspect of a killed directory does
not say it has seen nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from click.testing import CliRunner

import diskfrontier.cli.transfer as cli
from diskfrontier import Frontier, Request
from diskfrontier.cli import main

KILLED_CHILD = """
import sys
from diskfrontier import Frontier, Request
f = Frontier(sys.argv[1])
f.push_many([Request(f"https://a.example/{i}") for i in range(699)])
print("ok", flush=True)
sys.stdin.read()
"""


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_an_interrupted_export_leaves_no_file_that_looks_whole(tmp_path, monkeypatch):
    job, out = str(tmp_path / "job"), tmp_path / "pending.jsonl"
    with Frontier(job) as f:
        f.push_many([Request(f"https://a.example/{i}") for i in range(3000)])
    written = 0
    plain = cli.request_to_json

    def interrupted_at_1000(request):
        nonlocal written
        written += 1
        if written > 1000:
            raise KeyboardInterrupt
        return plain(request)

    monkeypatch.setattr(cli, "request_to_json", interrupted_at_1000)
    result = run("export", job, "-o", str(out))
    assert result.exit_code == 130 and result.output == "Aborted.\n"
    assert os.listdir(tmp_path) == ["job"]  # no file, and no temp file left

    out.write_text("an older export\n")
    written = 0
    assert run("export", job, "-o", str(out)).exit_code == 130
    assert out.read_text() == "an older export\n"  # the file is replaced only by a whole export
    assert sorted(os.listdir(tmp_path)) == ["job", "pending.jsonl"]

    monkeypatch.setattr(cli, "request_to_json", plain)
    result = run("export", job, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 3000
    assert sorted(os.listdir(tmp_path)) == ["job", "pending.jsonl"]


def test_demo_refuses_a_folder_that_is_not_a_job_directory(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    result = run("demo", str(folder), "--pages", "5")
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {folder} is not a diskfrontier job directory (no frontier.json) and is "
                                    f"not empty; ")
    assert os.listdir(folder) == ["notes.txt"]


def test_inspect_of_a_killed_directory_counts_the_fingerprints_only_its_journal_holds(tmp_path):
    job = str(tmp_path / "job")
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, job], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    assert child.stdout is not None
    try:
        assert child.stdout.readline() == b"ok\n"
    finally:
        child.kill()
        child.wait()
    assert os.path.getsize(os.path.join(job, "requests.seen")) == 0  # buffered: only the journal has them

    result = run("inspect", job)
    assert result.exit_code == 0, result.output
    seen = next(line for line in result.output.splitlines() if line.startswith("seen "))
    assert seen.split(None, 1)[1] == ("at least 699 (the journal holds fingerprints that requests.seen may not "
                                      "have yet; the next open counts them all)")
    data = json.loads(run("inspect", job, "--json").output)
    assert (data["seen"], data["seen_exact"]) == (699, False)

    with Frontier(job) as f:
        assert len(f) == 699 and f.stats()["seen"] == 699
    data = json.loads(run("inspect", job, "--json").output)
    assert (data["seen"], data["seen_exact"]) == (699, True)
