"""The ``diskfrontier`` command: one click group, with the commands of each family added to it.

Where a command takes JOBDIR it also takes a Redis URL (``redis://``, ``rediss://``, ``unix://``)
or a PostgreSQL URL (``postgresql://``, ``postgres://``) with ``--crawl NAME``; the commands that
work on a job directory's files refuse one. The families: ``inspect`` (inspect, peek, hosts,
failed), ``write`` (push, import, requeue-failed, host), ``maintain`` (verify, compact,
adopt-scrapy), ``transfer`` (export, copy), ``steer`` (pause, resume, drop), ``crawls`` (crawls,
clients, release, delete: the crawls of a Redis server or a PostgreSQL database), ``demo`` and
``serve`` (a live dashboard, ``live/``).

A family's module is imported when one of its commands is looked up (to run it, or for ``--help``),
not when the group is: ``diskfrontier peek`` does not load the Redis backend, ``crawl()``, the
demo's web server or the dashboard's.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
from collections.abc import Iterator, MutableMapping

import click

# Every command, in the order the documentation lists them: its name -> (module, attribute)
COMMANDS = {
    "inspect": (".inspect", "inspect"),
    "peek": (".inspect", "peek"),
    "hosts": (".inspect", "hosts"),
    "failed": (".inspect", "failed_command"),
    "push": (".write", "push"),
    "import": (".write", "import_command"),
    "requeue-failed": (".write", "requeue_failed_command"),
    "host": (".write", "host"),
    "pause": (".steer", "pause"),
    "resume": (".steer", "resume"),
    "drop": (".steer", "drop"),
    "verify": (".maintain", "verify_command"),
    "compact": (".maintain", "compact"),
    "adopt-scrapy": (".maintain", "adopt_scrapy_command"),
    "export": (".transfer", "export_command"),
    "copy": (".transfer", "copy_command"),
    "demo": (".demo", "demo"),
    "serve": (".serve", "serve"),
    "crawls": (".crawls", "crawls"),
    "clients": (".crawls", "clients"),
    "release": (".crawls", "release"),
    "delete": (".crawls", "delete"),
}


# the end of a docstring's first clause: '.', ':' or ';' before a space or the end, outside parentheses
_CLAUSE_END = re.compile(r"[.:;](?=\s|\Z)")


def summary(help_text: str) -> str:
    """A command's one-line summary, for ``--help``'s list of commands and the reference page: the first
    clause of its help (to the first '.', ':' or ';' outside parentheses), as a sentence. Click would cut
    the help at 45 characters, and the reference page at the end of its first line, mid-sentence."""
    first = " ".join(inspect.cleandoc(help_text).split("\n\n")[0].split())
    depth = 0
    for at, char in enumerate(first):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and _CLAUSE_END.match(first, at):
            return first[:at] + "."
    return first if not first or first.endswith(".") else first + "."


class LazyCommands(MutableMapping[str, click.Command]):
    """The group's ``commands``: every name is known at once, and a command's module is imported
    when the command is first looked up (``commands[name]``, ``commands.get(name)``). Listing the
    names, as ``click.Group.list_commands`` does, imports nothing."""

    def __init__(self, where: dict[str, tuple[str, str]]) -> None:
        self._entries: dict[str, click.Command | tuple[str, str]] = dict(where)

    def __getitem__(self, name: str) -> click.Command:
        entry = self._entries[name]
        if isinstance(entry, click.Command):
            return entry
        module, attribute = entry
        command = getattr(importlib.import_module(module, __package__), attribute)
        assert isinstance(command, click.Command) and command.name == name, (name, command)
        if command.short_help is None:
            command.short_help = summary(command.help or "")
        self._entries[name] = command
        return command

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._entries[name] = command

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


@click.group(commands=LazyCommands(COMMANDS))
@click.version_option(package_name="diskfrontier")
@click.option("-v", "--verbose", is_flag=True, help="Log what the frontier does (recovery, compaction).")
def main(verbose: bool) -> None:
    """Inspect, verify, seed and compact diskfrontier job directories, and Redis and PostgreSQL crawls.

    Where a command takes JOBDIR, a Redis URL with --crawl NAME names a crawl of the Redis
    backend instead (diskfrontier inspect redis://localhost:6379/0 --crawl news), and a
    PostgreSQL URL one of the PostgreSQL backend (postgresql://user@host:5432/db --crawl news).

    Example: diskfrontier demo crawls/demo && diskfrontier inspect crawls/demo
    """
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(name)s: %(message)s")
