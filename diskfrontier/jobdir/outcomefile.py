"""``outcomes.json``: a job directory's outcome counters (``contract/outcomes.py``), kept across runs.

The holder adds to them in memory (``Frontier.record_outcome``) and writes the file whole, atomically
and durably, when its watcher publishes ``status.json`` (if they changed) and at the close. A kill
loses what was added since the last write; a file that cannot be read is named in a warning and the
counters start again from 0 (they are figures, not requests: nothing of the crawl depends on them).
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


def path_of(root: str) -> str:
    """Where a job directory keeps its outcome counters."""
    return os.path.join(root, FILE)


def read_outcomes(root: str, *, warn: bool = True) -> dict[str, float]:
    """The outcome counters stored in ``root`` (all 0 when there is no file, or one that cannot be read)."""
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
    return outcome_counts(found)


class OutcomeFile:
    """The outcome counters of an open job directory and the last figures written."""

    def __init__(self, root: str) -> None:
        self.path = path_of(root)
        self.counts: dict[str, float] = read_outcomes(root)
        self.written: dict[str, float] = dict(self.counts)

    def add(self, counts: dict[str, float]) -> None:
        """Add ``counts`` (from ``contract.outcomes.tally``). The caller holds the frontier's lock."""
        mine = self.counts
        for key, value in counts.items():
            mine[key] += value

    def changed(self) -> dict[str, Any] | None:
        """A copy of the counters if they changed since the last write, else None (under the lock)."""
        return None if self.counts == self.written else dict(self.counts)

    def write(self, counts: dict[str, Any]) -> None:
        """Write ``counts`` (from ``changed``) to ``outcomes.json``, durably."""
        write_atomic(self.path, json.dumps({key: counts[key] for key in OUTCOME_KEYS}).encode())
        self.written = counts
