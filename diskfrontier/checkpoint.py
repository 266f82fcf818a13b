"""``requests.cursor``: the checkpoint that says whether the queue files can be trusted.

A JSON document, replaced atomically. While a frontier is open it says
``"state": "open"``. A clean close writes ``"state": "clean"`` with the journal's and
the seen file's sizes and the pending count per priority. At the next open the queue
files are used as they are only if the checkpoint is clean and every size matches;
anything else (a crash, a damaged or missing cursor, a file that changed) means the
queues are rebuilt from the journal. Trusting nothing is always safe, only slower.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

from .atomic import write_json_atomic


@dataclass
class Checkpoint:
    """The decoded cursor."""

    state: str = "missing"
    journal_bytes: int = -1
    seen_bytes: int = -1
    pending: dict[int, int] = field(default_factory=dict)
    pid: int | None = None
    journal_pushes: int = 0
    journal_dones: int = 0
    problem: str | None = None

    @property
    def clean(self) -> bool:
        """True when the last close was clean."""
        return self.state == "clean"


def read_checkpoint(path: str) -> Checkpoint:
    """Read the cursor; a missing or unreadable one comes back as not clean, with the reason."""
    try:
        with open(path, "rb") as f:
            value = json.loads(f.read())
        pending = {int(k): int(v) for k, v in value.get("pending", {}).items()}
        return Checkpoint(
            state=str(value["state"]), journal_bytes=int(value.get("journal_bytes", -1)),
            seen_bytes=int(value.get("seen_bytes", -1)), pending=pending, pid=value.get("pid"),
            journal_pushes=int(value.get("journal_pushes", 0)), journal_dones=int(value.get("journal_dones", 0)),
        )
    except FileNotFoundError:
        return Checkpoint(state="missing", problem="no requests.cursor")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return Checkpoint(state="damaged", problem=f"unreadable requests.cursor ({exc})")


def write_open(path: str) -> None:
    """Mark the directory as open: from now on the queue files are not to be trusted."""
    write_json_atomic(path, {"state": "open", "pid": os.getpid(), "time": time.time()})


def write_clean(
    path: str, journal_bytes: int, seen_bytes: int, pending: dict[int, int], pushes: int, dones: int
) -> None:
    """Mark a clean close: the queue files match this journal and seen file."""
    write_json_atomic(path, {
        "state": "clean", "journal_bytes": journal_bytes, "seen_bytes": seen_bytes,
        "journal_pushes": pushes, "journal_dones": dones,
        "pending": {str(p): n for p, n in sorted(pending.items())}, "time": time.time(),
    })


def write_json_repaired(path: str) -> None:
    """Mark the directory as repaired: the queues must be rebuilt at the next open."""
    write_json_atomic(path, {"state": "repaired", "time": time.time()})
