"""The README's examples run, and its claims about commands stay true."""

from __future__ import annotations

import os
import re

from diskfrontier.cli import main

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def _python_blocks() -> list[str]:
    with open(README) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)


def test_readme_library_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks()
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    from diskfrontier import Frontier, Request

    with Frontier("crawls/shop") as frontier:  # the example crawled and finished its seed
        assert len(frontier) == 0
        assert frontier.push(Request("https://shop.example/")) is False


def test_readme_lists_every_command():
    with open(README) as f:
        text = f.read()
    for name in main.commands:
        assert f"diskfrontier {name} " in text, name


def _sh_blocks() -> list[str]:
    with open(README) as f:
        return re.findall(r"```sh\n(.*?)```", f.read(), flags=re.S)


def test_readme_test_command_tests_the_installed_package_as_ci_does():
    commands = [line for block in _sh_blocks() for line in block.splitlines() if "pytest" in line]
    assert len(commands) == 1, commands
    command = commands[0]
    assert "pip install '.[test]'" in command and "-e" not in command.split()  # not editable
    assert "cd tests && DISKFRONTIER_INSTALLED_TEST=1 pytest -q" in command  # not python -m pytest from the root
    with open(os.path.join(os.path.dirname(__file__), "..", ".ci", "run")) as f:
        ci = f.read()
    assert "cd tests && DISKFRONTIER_INSTALLED_TEST=1 pytest -q" in ci

