"""``outcomes.json``: a job directory's outcome counters (``contract/outcomes.py``) and its request
counters summed over every run, kept across runs.

The holder adds to the outcome counters in memory (``Frontier.record_outcome``) and writes the file
whole, atomically and durably, when its watcher publishes ``status.json`` (if anything changed:
``status.json`` is written after it, so that a reader of ``status.json`` never sees a figure the file
does not hold) and at the close. ``runs`` holds the counters of ``CARRIED`` summed over the runs
before this one plus this run's so far; ``stats()`` gives them as ``<name>_total`` (``done_total``...).
A kill loses what was added since the last write; a file that cannot be read is named in a warning
and the counters start again from 0 (they are figures, not requests: nothing of the crawl depends on
them).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from ..contract.outcomes import OUTCOME_KEYS, outcome_counts
from ..files.atomic import write_atomic

log = logging.getLogger("diskfrontier")

FILE = "outcomes.json"
CARRIED = ("done", "pushed", "duplicates", "retried", "refetch_scheduled", "revisits", "revisit_changes",
           "revisit_not_modified")
"""The counters of a run (``Shared.counters``) that are summed over every run, as ``<name>_total``."""


def path_of(root: str) -> str:
    """Where a job directory keeps its outcome counters."""
    return os.path.join(root, FILE)


def read_outcomes(root: str, *, warn: bool = True) -> dict[str, float]:
    """The outcome counters stored in ``root``, and the ``<name>_total`` of ``CARRIED`` (all 0 when there is no
    file, or one that cannot be read)."""
    path = path_of(root)
    try:
        with open(path, "rb") as f:
            found = json.loads(f.read(1 << 20))
        if not isinstance(found, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        found = {}
    except (OSError, ValueError) as exc:
        if warn:
            log.warning("%s cannot be read (%s): its outcome counters start again from 0", path, exc)
        found = {}
    runs = found.get("runs")
    runs = runs if isinstance(runs, dict) else {}
    totals = {f"{name}_total": _whole(runs.get(name)) for name in CARRIED}
    return {**outcome_counts(found), **totals}


def _whole(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class OutcomeFile:
    """The outcome counters of an open job directory and the last figures written."""

    def __init__(self, root: str) -> None:
        self.path = path_of(root)
        found = read_outcomes(root)
        self.counts: dict[str, float] = {key: found[key] for key in OUTCOME_KEYS}
        self.before = {name: int(found[f"{name}_total"]) for name in CARRIED}  # the runs before this one
        self.written: dict[str, Any] = {**self.counts, "runs": self.before}

    def totals(self, counters: dict[str, int]) -> dict[str, int]:
        """``<name>_total`` of each of ``CARRIED``: the runs before this one and this run's ``counters``."""
        return {f"{name}_total": self.before[name] + counters[name] for name in CARRIED}

    def add(self, counts: dict[str, float]) -> None:
        """Add ``counts`` (from ``contract.outcomes.tally``). The caller holds the frontier's lock."""
        mine = self.counts
        for key, value in counts.items():
            mine[key] += value

    def changed(self, counters: dict[str, int]) -> dict[str, Any] | None:
        """What to write, if anything changed since the last write (else None), with this run's ``counters``
        (the caller holds the frontier's lock)."""
        now = {**self.counts, "runs": {name: self.before[name] + counters[name] for name in CARRIED}}
        return None if now == self.written else now

    def write(self, counts: dict[str, Any]) -> None:
        """Write ``counts`` (from ``changed``) to ``outcomes.json``, durably."""
        write_atomic(self.path, json.dumps(counts).encode())
        self.written = counts

    def save_at_close(self, counters: dict[str, int]) -> None:
        """Write what changed since the last write, at the close (a failure is named in the log: the close
        goes on)."""
        counts = self.changed(counters)
        if counts is None:
            return
        try:
            self.write(counts)
        except OSError as exc:
            log.warning("%s: the outcome counters since the last write are lost (%s)", self.path, exc)
