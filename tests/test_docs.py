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



def test_the_readme_crawler_is_short_and_crawls_a_whole_site(tmp_path):
    """The README's crawler (stdlib HTTP) crawls a site served on four loopback addresses."""
    import subprocess
    import sys

    from diskfrontier.demo import MultiHostSite

    with open(README) as f:
        (block,) = [b for b in re.findall(r"```py\n(.*?)```", f.read(), flags=re.S) if "crawl(frontier, fetch" in b]
    assert len([line for line in block.splitlines() if line.strip()]) < 20
    script = tmp_path / "crawler.py"
    script.write_text(block.replace("delay=1.0", "delay=0.002"))  # the site is local: a short delay
    with MultiHostSite(120, hosts=4, share=0.5) as site:
        out = subprocess.run([sys.executable, str(script), site.url(0)], cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)
        fetched = site.fetched()
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("120 pages, 0 failed: []"), out.stdout
    assert set(fetched) == {f"/page/{n}" for n in range(120)} and set(fetched.values()) == {1}


def test_readme_installs_extras_from_the_checkout():
    """The package is installed from a checkout (it is not on an index): extras are ``.[name]``."""
    with open(README) as f:
        text = f.read()
    from_index = re.findall(r"pip install [^\n`]*diskfrontier\[", text)
    assert from_index == []
    assert "pip install '.[scrapy]'" in text and "pip install '.[redis]'" in text
