"""``Upkeep``: checkpoints and compactions of a job directory while its frontier runs.

Left to itself a journal only grows, and a recovery reads all of it: a crawl's costs would
follow its age. Here the holder keeps them to its size, in the background
(``maintenance/background.py`` runs the jobs, ``maintenance/jobs.py`` and
``maintenance/compactor.py`` are the jobs):

* **A checkpoint** saves the journal's state at an offset (``statefile.py``) and names it in
  ``requests.cursor``, which then also says that the journal held that many bytes (its
  floor): a recovery, ``inspect`` or ``peek`` loads the state and reads only the journal
  after it. One is made when ``checkpoint_records`` request records (and at least as many as
  are pending) were written since the last, or ``checkpoint_seconds`` passed with any.
* **A compaction** writes a new journal that holds only what is live (``compactor.py``) and
  its state, beside the running frontier, and swaps it in (``swap.py``). One is made when
  finished work is more than ``compact_share`` of the journal and at least
  ``compact_min_bytes``.

The frontier's own work for either is small and bounded: choosing the offset (a flush of
the seen file), starting the job, and at its end a rename and a few small writes, plus for a
compaction the translation of what it holds in memory (``swap.py``). Its calls go on
meanwhile. A job that fails (a full disk, an I/O error, its process killed) is named in the
log and abandoned: its files are removed and the frontier goes on as it was. The checkpoint
file is written under its own lock (``Shared.cursor_lock``), never while a call waits.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.errors import FrontierError
from . import checkpoint
from .maintenance.background import RUNNERS, Job, run_job
from .maintenance.compaction import Compacted
from .maintenance.steps import reached
from .shared import Shared
from .statefile import StateRecord, read_state_file, state_name
from .swap import Swap, take_seen_index

log = logging.getLogger("diskfrontier")


@dataclass(frozen=True)
class Maintenance:
    """When a running ``Frontier`` checkpoints and compacts its journal (``Frontier(maintenance=...)``).

    ``checkpoint_seconds``: at most this long between checkpoints while requests are written
    (None: no limit by time). ``checkpoint_records``: a checkpoint once this many request records
    were written since the last one, and at least as many as are pending (so that a checkpoint
    costs the writes of a few bytes a record, whatever the crawl's size; None: no limit by
    records). ``compact_share``: compact once finished work is more than this share of the
    journal (None: never while it runs; ``compact()`` and the close still may), and at least
    ``compact_min_bytes`` of it. ``runner``: ``"process"`` (a child process, on another core)
    or ``"thread"`` (in this process: for where no child can be started). Pass
    ``maintenance=None`` to ``Frontier`` for none of it: the journal then only shrinks at a close
    or by ``compact()``, and a recovery reads it from its start.
    """

    checkpoint_seconds: float | None = 300.0
    checkpoint_records: int | None = 100_000
    compact_share: float | None = 0.4
    compact_min_bytes: int = 8 << 20
    runner: str = "process"

    def __post_init__(self) -> None:
        seconds, records, share = self.checkpoint_seconds, self.checkpoint_records, self.compact_share
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                    or not 0 < seconds < math.inf):
            raise ValueError(f"checkpoint_seconds must be None or a number of seconds above 0, got {seconds!r}")
        if records is not None and (isinstance(records, bool) or not isinstance(records, int) or records < 1):
            raise ValueError(f"checkpoint_records must be None or a whole number of at least 1, got {records!r}")
        if share is not None and (isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1):
            raise ValueError(f"compact_share must be None or a number between 0 and 1, got {share!r}")
        minimum = self.compact_min_bytes
        if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 0:
            raise ValueError(f"compact_min_bytes must be a whole number of bytes, got {minimum!r}")
        if self.runner not in RUNNERS:
            raise ValueError(f"runner must be one of {RUNNERS}, got {self.runner!r}")


@dataclass
class _Pending:
    """A job under way: its parameters (what the frontier was when it began), and where it runs."""

    params: dict[str, Any]
    job: Job | None  # None: run in the caller's thread
    began: float

    @property
    def kind(self) -> str:
        return str(self.params["job"])

    @property
    def outputs(self) -> list[str]:
        """The files and folders it may write, removed if it is abandoned."""
        names = [self.params["name"], self.params["index_out"]]
        if self.kind == "compact":
            names += [self.params[key] for key in ("journal_out", "queues_out", "map_out", "new_name")]
        return [os.path.join(self.params["root"], name) for name in names]


class Upkeep:
    """The checkpoints and compactions of one open job directory (``tick`` is called by its watcher thread)."""

    def __init__(self, state: Shared, mutex: threading.RLock, settings: Maintenance | None,
                 swap: Swap | None = None) -> None:
        self.state = state
        self.mutex = mutex
        self.settings = settings
        self.swap = swap  # the compaction's swap, given the job's result and parameters
        self.job: _Pending | None = None
        self.last_checkpoint = time.time()
        self.records_at_checkpoint = state.pushes + state.dones
        self.checkpoints = 0
        self.compactions = 0
        self.last_error: str | None = None
        self.stopped = False
        self.busy = threading.Lock()  # one job's start or end at a time: the watcher's, or a call's (run_now)

    def reset(self) -> None:
        """Count from the directory as it was opened (called once the open is done)."""
        self.last_checkpoint = time.time()
        self.records_at_checkpoint = self.state.pushes + self.state.dones

    # ------------------------------------------------------------------ what is due
    def due(self, now: float) -> str | None:
        """"compact", "checkpoint" or None: what the state of the frontier calls for now (read without the lock)."""
        settings, st = self.settings, self.state
        if settings is None or st.broken or st.dirty or st.open_group is not None:
            return None
        size = st.journal.size
        dead = size - st.live_bytes - st.failed_bytes
        share = settings.compact_share
        if share is not None and self.swap is not None and dead >= settings.compact_min_bytes and dead >= share * size:
            return "compact"
        written = st.pushes + st.dones - self.records_at_checkpoint
        if written <= 0:
            return None
        records = settings.checkpoint_records
        if records is not None and written >= max(records, sum(st.pending.values())):
            return "checkpoint"
        seconds = settings.checkpoint_seconds
        if seconds is not None and now - self.last_checkpoint >= seconds:
            return "checkpoint"
        return None

    # ------------------------------------------------------------------ the watcher's turn
    def tick(self) -> None:
        """Collect a job that ended, or start the one that is due (without holding the frontier's lock)."""
        if self.stopped or not self.busy.acquire(blocking=False):
            return  # a call runs a job of its own (run_now): the next turn looks again
        try:
            self._tick()
        finally:
            self.busy.release()

    def _tick(self) -> None:
        pending = self.job
        if pending is not None:
            assert pending.job is not None
            result = pending.job.poll()
            if result is not None:
                self.job = None
                self.finish(pending, result)
            return
        kind = self.due(time.time())
        if kind is not None:
            self.start(kind)

    def start(self, kind: str) -> None:
        """Choose the journal offset under the lock, then start the job outside it (a failure to, such as a full
        disk when the seen file is flushed first, is named like a job's: the frontier goes on)."""
        assert self.settings is not None
        try:
            params = self.prepare(kind)
            if params is None:
                return
            self.job = _Pending(params, Job(params, self.settings.runner), time.monotonic())
        except Exception as exc:
            self.abandoned(kind, f"{type(exc).__name__}: {exc}")
            return
        reached("job-started")

    def prepare(self, kind: str, *, now: bool = False) -> dict[str, Any] | None:
        """The job's parameters: the journal's end now (the seen file flushed first), the newest state to start
        from, the names of the files it writes. None if the frontier cannot have one now (``now``: asked
        for by a call, even after the close has stopped the background)."""
        st = self.state
        with self.mutex:
            if st.broken or st.dirty or st.open_group is not None or (self.stopped and not now):
                return None
            st.seen.flush()
            at = st.journal.size
            params: dict[str, Any] = {
                "job": kind, "root": st.path, "ident": st.ident, "salt": st.salt, "order": st.order, "at": at,
                "start": st.states[0].to_json() if st.states else None, "seen_tail": list(st.seen.tail()),
                "name": state_name(at, secrets.randbits(48)), "generation": st.generation,
                "records": st.pushes + st.dones, "now": time.time(), "fsync": st.fsync,
                "seen_index": None if st.seen.index_record is None else st.seen.index_record.to_json(),
                "index_out": f"requests.seen.index.{secrets.randbits(48):x}",
            }
        if kind == "compact":
            nonce = f"{secrets.randbits(48):x}"
            params["journal_out"] = f"requests.urls.compact.{nonce}"
            params["queues_out"] = f"requests.queue.compact.{nonce}"
            params["map_out"] = f"requests.urls.map.{nonce}"
            params["new_name"] = state_name(0, secrets.randbits(48))
        return params

    # ------------------------------------------------------------------ a job's end
    def finish(self, pending: _Pending, result: dict[str, Any]) -> bool:
        """Commit what the job made, or abandon it (its files removed, the reason in the log); True if committed."""
        committed = False
        try:
            if result.get("ok"):
                if pending.kind == "checkpoint":
                    committed = self.commit_checkpoint(result, pending.params)
                else:
                    assert self.swap is not None
                    committed = self.swap(result, pending.params)
                    if committed:
                        self.compactions += 1
                        self.checkpoints += 1
                        self.last_checkpoint = time.time()
                        self.records_at_checkpoint = self.state.pushes + self.state.dones
            else:
                self.abandoned(pending.kind, str(result.get("error")))
        except Exception as exc:  # a full disk while committing: the job is abandoned, the frontier goes on
            self.abandoned(pending.kind, f"{type(exc).__name__}: {exc}")
        finally:
            self.remove_outputs(pending, keep_committed=committed)
        return committed

    def abandoned(self, kind: str, why: str) -> None:
        self.last_error = f"{kind}: {why}"
        if why != "cancelled":
            log.warning("%s: the %s was abandoned (%s); the frontier goes on as it was", self.state.path,
                        "compaction" if kind == "compact" else kind, why)

    def commit_checkpoint(self, result: dict[str, Any], params: dict[str, Any]) -> bool:
        """Name the new state in the checkpoint, with the journal's end it describes as its floor; False if the
        frontier moved on meanwhile (a close, a rebuild)."""
        st = self.state
        record = StateRecord.from_json(result["record"])
        at, generation = params["at"], params["generation"]
        tail = params["seen_tail"]
        with st.cursor_lock:
            if st.sealed or st.generation != generation or st.broken:
                return False
            index = take_seen_index(st, result, params)
            checkpoint.write_open(st.layout.cursor, st.ident, at, (tail[0], tail[1]), index, record.journal_crc,
                                  [record], st.compactions)
            st.seen.index_record = index
        reached("checkpoint-named")
        with self.mutex:
            if st.generation != generation or st.sealed:
                return False  # named by a cursor the close has replaced: removed with the outputs
            old = st.states
            st.states = [record]
            st.floor, st.floor_crc = at, record.journal_crc
            self.checkpoints += 1
            self.last_checkpoint = time.time()
            self.records_at_checkpoint = params["records"]
        for stale in old:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(st.path, stale.name))
        reached("checkpoint-done")
        return True

    def remove_outputs(self, pending: _Pending, *, keep_committed: bool) -> None:
        """Remove what the job wrote that no checkpoint names (all of it, unless it was committed)."""
        from ..files.safefs import remove_tree

        named = {record.name for record in self.state.states}
        for path in pending.outputs:
            name = os.path.basename(path)
            if keep_committed and name in named:
                continue
            with contextlib.suppress(OSError):
                if os.path.isdir(path) and not os.path.islink(path):
                    remove_tree(path)
                elif os.path.lexists(path):
                    os.unlink(path)

    # ------------------------------------------------------------------ now, and at the end
    def run_now(self, kind: str, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Run a job in this thread and commit it (``Frontier.checkpoint`` and ``compact``): its result, with
        ``"committed"`` saying whether it took effect. A job of the background under way is stopped first."""
        with self.busy:
            return self._run_now(kind, progress)

    def _run_now(self, kind: str, progress: Callable[[int, int], None] | None) -> dict[str, Any]:
        if self.job is not None:
            running, self.job = self.job, None
            if running.job is not None:
                running.job.cancel()
            self.remove_outputs(running, keep_committed=False)
        params = self.prepare(kind, now=True)
        if params is None:
            raise FrontierError(f"{self.state.path} cannot be checkpointed or compacted now: a call was interrupted "
                                f"or an inbox command is applied in part; close it and open it again")
        pending = _Pending(params, None, time.monotonic())
        try:
            result = run_job(params, lambda: False, progress)
        except BaseException:
            self.remove_outputs(pending, keep_committed=False)
            raise
        result["committed"] = self.finish(pending, result)
        return result

    def compact_now(self, progress: Callable[[int, int], None] | None = None) -> Compacted:
        """A compaction in this thread, swapped in (``Frontier.compact``, and at a close); what it did."""
        result = self.run_now("compact", progress)
        if not result.get("ok"):
            raise FrontierError(f"the compaction of {self.state.path} failed ({result.get('error')}); the journal "
                                f"is as it was")
        if not result["committed"]:
            raise FrontierError(f"the compaction of {self.state.path} was not swapped in ({self.last_error}); the "
                                f"journal is as it was")
        assert isinstance(self.swap, Swap)
        done = self.swap.last
        st = self.state
        kept: list[tuple[int, int, float]] = []
        record = st.states[0]
        saved = read_state_file(st.path, record, st.ident, st.salt)
        times = dict(zip(saved.timed_index, saved.timed_at, strict=True))
        for i, offset in enumerate(saved.order):
            kept.append((offset, saved.priorities[saved.codes[i]], times.get(i, 0.0)))
        return Compacted(done["bytes_before"], done["bytes_after"], done["pending"], done["failed"],
                         done["dropped_records"], kept)

    def stop(self) -> None:
        """Stop a job under way (the close): the child killed, what it wrote removed."""
        self.stopped = True
        with self.busy:
            pending, self.job = self.job, None
        if pending is not None and pending.job is not None:
            pending.job.cancel()
            self.remove_outputs(pending, keep_committed=False)

    def forget(self) -> None:
        """In a forked child: let go of the parent's job without touching it."""
        self.stopped = True
        if self.job is not None and self.job.job is not None:
            self.job.job.forget()
        self.job = None

    def stats(self) -> dict[str, Any]:
        """What ``stats()`` shows of the upkeep."""
        return {
            "checkpoints": self.checkpoints, "compactions": self.compactions,
            "last_checkpoint": self.last_checkpoint if self.checkpoints else None,
            "maintenance_running": None if self.job is None else self.job.kind,
            "maintenance_error": self.last_error,
        }
