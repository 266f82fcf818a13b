"""What importing the package and starting the command line load: the public names are imported when
first used, and a command's module when the command is looked up, so that ``diskfrontier peek`` starts
without the frontier, the Redis backend, ``crawl()`` or w3lib (``urllib.request``, ``http.client``).

Each check runs in a fresh interpreter, as this one has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys

import click

import diskfrontier
from diskfrontier import Frontier, Request
from diskfrontier.cli import main
from diskfrontier.cli.group import COMMANDS

# Modules that neither ``import diskfrontier``, ``import diskfrontier.cli`` nor ``diskfrontier peek`` need
HEAVY = ["diskfrontier.jobdir.frontier", "diskfrontier.redisfrontier.frontier", "diskfrontier.run.crawl",
         "diskfrontier.run.demo", "diskfrontier.cli.demo", "diskfrontier.transfer.copy", "w3lib.url", "urllib.request",
         "http.client", "asyncio", "redis"]


def _loaded(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_importing_the_package_loads_only_its_errors():
    loaded = _loaded("import diskfrontier")
    assert {m for m in loaded if m.startswith("diskfrontier.")} == {"diskfrontier.core", "diskfrontier.core.errors"}
    assert not loaded & set(HEAVY)


def test_importing_the_command_line_loads_no_command():
    loaded = _loaded("import diskfrontier.cli")
    assert not loaded & {"diskfrontier.cli.inspect", "diskfrontier.cli.write", "diskfrontier.cli.maintain",
                         "diskfrontier.cli.transfer", "diskfrontier.cli.demo", *HEAVY}


def test_peek_loads_neither_backend_nor_crawl(tmp_path):
    job = str(tmp_path / "job")
    with Frontier(job) as frontier:
        frontier.push(Request("https://a.example/"))
    loaded = _loaded("from diskfrontier.cli import main\n"
                     f"main(['peek', {job!r}, '-n', '5'], standalone_mode=False)")
    assert "diskfrontier.jobdir.reader" in loaded
    assert not loaded & set(HEAVY)


def test_every_public_name_is_there_when_asked_for():
    namespace: dict[str, object] = {}
    exec("from diskfrontier import *", namespace)  # noqa: S102 - the star import is what is tested
    assert set(diskfrontier.__all__) <= set(namespace)
    assert set(diskfrontier.__all__) <= set(dir(diskfrontier))
    assert diskfrontier.Frontier is Frontier and diskfrontier.Request is Request
    assert diskfrontier.RedisFrontier.__module__ == "diskfrontier.redisfrontier.frontier"
    try:
        diskfrontier.NoSuchName  # type: ignore[attr-defined]  # noqa: B018 - the lookup is what is tested
    except AttributeError as exc:
        assert "NoSuchName" in str(exc)
    else:
        raise AssertionError("an unknown name was found")


def test_the_group_names_every_command_as_the_command_names_itself():
    assert list(main.commands) == list(COMMANDS)
    for name, command in main.commands.items():
        assert isinstance(command, click.Command) and command.name == name
    assert main.list_commands(click.Context(main)) == sorted(COMMANDS)
