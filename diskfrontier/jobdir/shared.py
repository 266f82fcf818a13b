"""``Shared``: the state the parts of the job directory's ``Frontier`` share.

Only what two or more parts change or read lives here; a part keeps to itself what only it
changes (the ledger its memory-only fingerprints, the waiting pops their count, the commands
their skipped inbox entries, the guard the closed mark). The façade (``frontier.py``) owns the
lock; the parts — the writes (``ledger.py``), the pop side (``dispatch.py``), opening
(``opening.py``), the background's swap (``swap.py``, ``upkeep.py``) and the close
(``closing.py``) — act on this one object, so what crosses between them is visible in one
place. It holds data and the two marks every part may set (``dirty``, ``broken``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from queuelib import PriorityQueue

from ..politeness.delayed import DelayedRequests
from ..politeness.schedule import HostSchedule
from ..request.model import Request
from ..request.revisit import REVISIT_COUNTERS
from .journal import JournalWriter
from .layout import Layout
from .outcomefile import OutcomeFile
from .queues import OffsetQueues
from .replay import OpenGroup
from .seen import SeenFile
from .statefile import StateRecord

log = logging.getLogger("diskfrontier")

COUNTERS = ("pushed", "duplicates", "popped", "done", "unserializable", "memory_lost", "recovered", "requeued",
            "torn_bytes_cut", "seen_added_from_journal", "retried", "refetch_scheduled", "dropped", "commands",
            *REVISIT_COUNTERS)


class Shared:
    """The files, queues, hosts and counts of one open job directory.

    The files (``journal``, ``queues``, ``seen``) and the memory queue ``memq`` are set
    when the directory is opened (``opening.py``) and replaced by a rebuild or a
    compaction. ``pending`` counts what may be popped by priority (held back or not);
    ``inflight`` maps each popped request's seq (its record's offset; negative for a
    request kept in memory only) to the object handed out; ``failed`` maps each failed
    request's offset to its FAIL record's. ``pushes``, ``dones``, ``live_bytes`` and
    ``last_record`` describe the journal since its last compaction (what the checkpoint
    keeps and what tells a close whether to compact).
    """

    journal: JournalWriter
    queues: OffsetQueues
    seen: SeenFile
    memq: PriorityQueue

    def __init__(self, path: str, layout: Layout, *, fsync: bool, delay: float, per_host: int | None,
                 prefer: str) -> None:
        # set at the open (opening.py), then fixed
        self.path = path
        self.layout = layout
        self.fsync = fsync
        self.delay, self.per_host, self.prefer = delay, per_host, prefer
        self.order = "lifo"
        self.ident = ""
        self.salt = 0
        self.recovery = "new"
        self.recovered_from: int | None = None  # where the last rebuild began reading the journal (a saved state's)
        # what the journal holds: changed by every write (ledger.py) and the pop side (dispatch.py), rebuilt by
        # an open, replaced by a compaction (swap.py)
        self.hosts = self.new_schedule()
        self.delayed = DelayedRequests()
        self.delayed_due: float | None = None  # the earliest due time held back, when any is
        self.counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.inflight: dict[int, Request] = {}
        self.failed: dict[int, int] = {}  # failed request offset -> its FAIL record's offset, in FAIL order
        self.memory_failed = 0  # requests kept in memory only that failed in this run (no record)
        self.pending: dict[int, int] = {}
        self.paused_since: float | None = None  # pause(): when; None while running
        self.applied: dict[str, str] = {}  # inbox commands applied, by the journal since the open: id -> result
        self.open_group: OpenGroup | None = None  # an inbox command a stop cut short, finished at the open
        # the journal since its last compaction: what a checkpoint keeps and what tells upkeep to compact
        self.pushes = 0  # records that carry a request
        self.dones = 0  # records that finish one
        self.last_record = -1
        self.live_bytes = 0  # bytes of the pending PUSH records (in flight included): what compaction keeps
        self.failed_bytes = 0  # bytes of the failed requests' records and FAIL records (kept by compaction)
        # the saved states (upkeep.py writes them, swap.py replaces them, closing.py seals them)
        self.floor = 0  # the journal's end at its last checkpoint
        self.floor_crc: int | None = None  # the crc32 of the journal below the floor, when known
        self.states: list[StateRecord] = []  # saved states of the journal a recovery may start from, newest first
        self.compactions = 0  # compactions since the directory was made (kept in every checkpoint)
        self.generation = 0  # grows each time the journal or the queues are replaced (a rebuild, a compaction)
        self.cursor_lock = threading.Lock()  # held by whoever writes requests.cursor
        self.sealed = False  # the close has written its checkpoint: no later one may replace it
        self.outcomes: OutcomeFile | None = None  # the outcome counters, read once the directory is locked
        # the marks
        self.dirty: str | None = None  # why the queues may not match the journal any more
        self.broken: str | None = None  # why no further call can be served

    def new_schedule(self) -> HostSchedule:
        """An empty host schedule with the frontier's order and host rules."""
        return HostSchedule(self.order, self.delay, self.per_host, self.prefer)

    def count_pending(self, priority: int, delta: int) -> None:
        """``delta`` more requests pending at ``priority``."""
        pending = self.pending
        count = pending.get(priority, 0) + delta
        if count:
            pending[priority] = count
        else:
            del pending[priority]

    def interrupted(self, what: str, exc: BaseException) -> None:
        """An exception after a journal write, half-way through the bookkeeping: mark the frontier dirty."""
        if self.dirty is None:
            self.dirty = f"{type(exc).__name__} during {what}"
            log.warning("%s was interrupted during %s (%s: %s): its queues will be rebuilt from the journal at "
                        "the next open", self.path, what, type(exc).__name__, exc)

    def memory_only(self) -> int:
        """Requests kept in memory only, pending or in flight."""
        return len(self.memq) + sum(1 for seq in self.inflight if seq < 0)

    def stats(self, *, journal_open: bool) -> dict[str, Any]:
        """The counters of this run and the state of the frontier, as ``Frontier.stats`` gives them."""
        return {
            **self.counters,
            "pending": sum(self.pending.values()),
            "in_flight": len(self.inflight),
            "pending_by_priority": dict(sorted(self.pending.items(), reverse=True)),
            "memory_only": self.memory_only(),
            "seen": len(self.seen),
            "journal_bytes": self.journal.size if journal_open else None,
            "order": self.order,
            "recovery": self.recovery,
            "dirty": self.dirty,
            "delayed": len(self.delayed),
            "failed": len(self.failed) + self.memory_failed,
            "hosts": len(self.hosts.counts),
            "buffered": self.hosts.buffered,
            "politeness": self.hosts.active,
            "delay": self.hosts.delay,
            "paused_since": self.paused_since,
            "live_bytes": self.live_bytes + self.failed_bytes,
            "compactions_total": self.compactions,
            "recovered_from": self.recovered_from,
            **(self.outcomes.counts if self.outcomes is not None else {}),
            **(self.outcomes.totals(self.counters) if self.outcomes is not None else {}),
        }

    def __repr__(self) -> str:
        return f"<Shared {self.path}>"
