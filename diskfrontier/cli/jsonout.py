"""What every ``--json`` of the command line shares: one JSON document a command (indented by two
spaces), the states ``inspect`` names, and times as Unix seconds.

Field names follow one rule across commands: ``*_at`` is an instant (Unix seconds, ``time.time()``
terms), ``*_seconds`` a duration, ``*_bytes`` a size. The schema of each command's output is shipped
beside this module (``schemas/<command>.json``, JSON Schema draft 2020-12).
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from importlib import resources
from typing import Any

import click

STATES = {
    "running": "a crawl holds the job directory and published what it is doing (or, on Redis, a client is live)",
    "held": "a process holds the job directory without publishing what it is doing",
    "clean": "closed cleanly: the next open starts from its checkpoint",
    "needs_recovery": "killed or interrupted: the next open rebuilds it from its journal",
    "old_format": "written by an older version: upgraded at the next open",
    "damaged": "a record read was damaged: 'diskfrontier verify --repair' recovers every intact one",
    "idle": "a Redis crawl with no live client",
}
"""The values of ``inspect``'s ``state``, and what each means (the ``state_text`` field says it in a sentence)."""

FOREVER = "forever"
"""A block with no end: JSON has no infinity."""


def echo_json(document: Any) -> None:
    """Print one JSON document, indented by two spaces, as every command's ``--json`` does."""
    click.echo(json.dumps(document, indent=2, ensure_ascii=False))


def echo_json_line(document: Any) -> None:
    """Print one JSON document on one line: a record of a stream (``peek``, ``failed``, ``export``)."""
    click.echo(json.dumps(document, ensure_ascii=False))


def instant(value: float | None) -> float | str | None:
    """A time as JSON: Unix seconds, ``"forever"`` for an end that never comes, None for none."""
    if value is None:
        return None
    return FOREVER if math.isinf(value) else value


def iso_to_unix(text: str | None) -> float | None:
    """An ISO 8601 time (``2026-12-06T19:46:10Z``) as Unix seconds; None if there is none or it is no time."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def schema_text(command: str) -> str:
    """The JSON Schema of ``command``'s ``--json`` output, as shipped with the package."""
    return resources.files(__package__).joinpath("schemas").joinpath(f"{command}.json").read_text(encoding="utf-8")


def schema_commands() -> list[str]:
    """The commands that have a schema file."""
    folder = resources.files(__package__).joinpath("schemas")
    return sorted(entry.name[:-len(".json")] for entry in folder.iterdir() if entry.name.endswith(".json"))
