"""The diskfrontier command on directories that are not job directories, and its URL input:
nothing is written where it does not belong, ``push -`` reads stdin, a line with whitespace
is a bad line, and ``peek --priority`` says what is pending elsewhere."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from click.testing import CliRunner
from paths import EXAMPLE

from diskfrontier import Frontier
from diskfrontier.cli import main


def run(*args: str, input: str | None = None):  # noqa: A002 - the name CliRunner.invoke uses
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def snapshot(root) -> dict[str, bytes | None]:
    """Every path under ``root`` (folders as None, files as their bytes, symlinks as their target)."""
    found: dict[str, bytes | None] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                found[rel] = os.readlink(path).encode()
            elif os.path.isdir(path):
                found[rel] = None
            else:
                with open(path, "rb") as f:
                    found[rel] = f.read()
    return found


@pytest.fixture(params=["notes", "empty"])
def plain_dir(tmp_path, request):
    """A folder that is not a job directory: one holding notes.txt, or an empty one."""
    folder = tmp_path / "folder"
    folder.mkdir()
    if request.param == "notes":
        (folder / "notes.txt").write_text("my notes\n")
    return folder


@pytest.mark.parametrize("command", [
    ["compact"], ["verify"], ["verify", "--repair"], ["inspect"], ["peek"], ["export"],
    ["export", "-o", "{tmp}/out.jsonl"],
])
def test_commands_refuse_a_directory_that_is_not_a_job_directory(plain_dir, tmp_path, command):
    before = snapshot(tmp_path)
    args = [command[0], str(plain_dir)] + [a.format(tmp=tmp_path) for a in command[1:]]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"Error: {plain_dir} is not a diskfrontier job directory (no frontier.json)")
    assert "diskfrontier push" in lines[0]  # the hint: how a job directory is made
    assert snapshot(tmp_path) == before  # nothing written: not in the folder, no output file


def test_a_frontier_json_that_is_a_symlink_is_not_a_job_directory(tmp_path):
    job = tmp_path / "job"
    shutil.copytree(EXAMPLE, job)
    fake = tmp_path / "fake"
    fake.mkdir()
    os.symlink(job / "frontier.json", fake / "frontier.json")
    before = snapshot(tmp_path)
    for command in (["compact"], ["push", "https://a.example/"], ["verify", "--repair"]):
        result = CliRunner().invoke(main, [command[0], str(fake), *command[1:]])
        assert result.exit_code == 1
        assert f"{fake} is not a diskfrontier job directory (its frontier.json is not a regular file)" in result.output
    assert snapshot(tmp_path) == before


def test_push_and_import_refuse_a_folder_that_holds_other_files(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes\n")
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"url": "https://a.example/"}\n')
    before = snapshot(tmp_path)
    for args in (["push", str(folder), "https://a.example/"], ["push", str(folder), "-f", str(lines)],
                 ["import", str(folder), str(lines)]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1, result.output
        assert result.output.startswith(f"Error: {folder} is not a diskfrontier job directory (no frontier.json) "
                                        f"and is not empty;")
        assert len(result.output.splitlines()) == 1
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["push", "import"])
def test_push_and_import_create_a_job_in_a_missing_or_empty_directory_and_reuse_one(tmp_path, command):
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"url": "https://a.example/"}\n')
    source = "https://a.example/" if command == "push" else str(lines)
    empty = tmp_path / "empty"
    empty.mkdir()
    for job in (empty, tmp_path / "missing" / "job"):
        assert run(command, str(job), source).exit_code == 0
        again = run(command, str(job), source)  # now an existing job directory
        assert again.exit_code == 0 and again.output.startswith("queued 0, duplicates 1")
        with Frontier(job) as frontier:
            assert len(frontier) == 1


def test_push_dash_reads_urls_from_stdin(tmp_path):
    job = str(tmp_path / "job")
    result = run("push", job, "-", "--json", input="https://a.example/\n# a comment\n\nhttps://b.example/\n")
    assert result.exit_code == 0 and json.loads(result.output) == {
        "queued": 2, "duplicates": 0, "bad": 0, "offered": 2, "via": "direct", "commands": []}
    result = run("push", job, "-f", "-", input="https://a.example/\nhttps://c.example/\n")  # -f - still works
    assert result.exit_code == 0 and result.output.strip() == "queued 1, duplicates 1, bad 0"
    with Frontier(job) as frontier:
        assert sorted(r.url for r in iter(frontier.pop, None)) == [
            "https://a.example/", "https://b.example/", "https://c.example/"]


def test_push_dash_with_other_urls_or_a_file_is_bad_usage(tmp_path):
    job = tmp_path / "job"
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("https://a.example/\n")
    for args in (["-", "https://a.example/"], ["https://a.example/", "-"], ["-", "-f", str(seeds)]):
        result = CliRunner().invoke(main, ["push", str(job), *args], input="https://b.example/\n")
        assert result.exit_code == 2, result.output
    assert not job.exists()


def test_a_url_with_whitespace_inside_is_a_bad_line(tmp_path):
    job = str(tmp_path / "job")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("https://a.example/\n# two words below\nhttps://a.example/x 10\n"
                     "https://b.example/\thttps://c.example/\n  https://d.example/  \n")
    result = CliRunner().invoke(main, ["push", job, "-f", str(seeds)])
    assert result.exit_code == 1
    assert "line 3: skipped: Request.url 'https://a.example/x 10' holds whitespace" in result.stderr
    assert "line 4: skipped: Request.url 'https://b.example/\\thttps://c.example/'" in result.stderr
    assert result.stdout.strip() == "queued 2, duplicates 0, bad 2"  # surrounding blanks are not inside
    result = CliRunner().invoke(main, ["push", job, "https://e.example/a b", "https://f.example/"])
    assert result.exit_code == 1
    assert "argument 1: skipped: Request.url 'https://e.example/a b' holds whitespace" in result.stderr
    with Frontier(job) as frontier:
        assert sorted(r.url for r in iter(frontier.pop, None)) == [
            "https://a.example/", "https://d.example/", "https://f.example/"]


def test_a_url_with_whitespace_makes_strict_push_nothing(tmp_path):
    job = tmp_path / "job"
    lines = "https://a.example/\nhttps://a.example/x 10\n"
    result = CliRunner().invoke(main, ["push", str(job), "--strict", "-"], input=lines)
    assert result.exit_code == 1 and "line 2: skipped" in result.stderr and "nothing was pushed" in result.stderr
    assert not job.exists()


def test_peek_at_an_empty_priority_says_what_is_pending_elsewhere(tmp_path):
    job = tmp_path / "job"
    shutil.copytree(EXAMPLE, job)
    result = run("peek", str(job), "--priority", "77")
    assert result.exit_code == 0
    assert result.output.strip() == "nothing pending at priority 77 (18 pending at other priorities)"
    assert run("peek", str(job), "--priority", "77", "--json").output == ""
    every = run("peek", str(job), "--priority", "5", "-n", "0").output  # 0: all, as for hosts and failed
    assert every == run("peek", str(job), "--priority", "5", "-n", "1000").output
    assert len(every.splitlines()) > 1 and all(line.split()[0] == "5" for line in every.splitlines())
    empty = tmp_path / "empty"
    Frontier(empty).close()
    assert run("peek", str(empty), "--priority", "77").output.strip() == "nothing pending"
    assert run("peek", str(empty)).output.strip() == "nothing pending"
