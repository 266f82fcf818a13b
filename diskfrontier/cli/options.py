"""The arguments, option types and value formats that the command families share."""

from __future__ import annotations

import math
import time
from typing import Any

import click

from ..contract.checks import MAX_SECONDS, MAX_TIME
from ..request.model import PRIORITY_MAX, PRIORITY_MIN
from .support import JobDirOrRedis

JOBDIR = click.argument("jobdir", type=JobDirOrRedis(exists=False))
EXISTING_JOBDIR = click.argument("jobdir", type=JobDirOrRedis(exists=True))
PRIORITY = click.IntRange(PRIORITY_MIN, PRIORITY_MAX)


def when(moment: float | None) -> str:
    """A time.time() value as local time, and how far from now."""
    if moment is None:
        return "-"
    if math.isinf(moment):
        return "never (until unblocked)"
    ahead = moment - time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment))
    if ahead <= 0:
        return f"{stamp} (passed)"
    return f"{stamp} (in {ahead:,.0f}s)"


def finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds or a time")
    return value


def json_host(row: dict[str, Any]) -> dict[str, Any]:
    """A host as JSON: a block for ever is the string "forever" (JSON has no infinity)."""
    if row.get("blocked_until") == math.inf:
        return {**row, "blocked_until": "forever"}
    return row


SECONDS = click.FloatRange(min=0, max=MAX_SECONDS)
TIME = click.FloatRange(min=0, max=MAX_TIME)
