"""``Opening``: open a job directory — create it, lock it, upgrade it, trust its queue files or rebuild them.

The settings ``Frontier`` is given are checked here first (``check_settings``); then the
directory is made if need be and locked. A new directory gets an empty journal and its
``frontier.json``. An existing one is upgraded if its format is older, checked against its
id, and then either its queue files and host file are trusted (a clean checkpoint that
matches them) or the queues, seen set, hosts and failed requests are rebuilt from the
journal (``recovery.py``). Either way the shared state is filled in and the checkpoint says
"open" before the first call.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Callable
from typing import Any, cast

from queuelib import PriorityQueue
from queuelib.queue import FifoMemoryQueue, LifoMemoryQueue

from ..contract.checks import check_seconds
from ..core.errors import JobDirCorrupt, ScrapyQueueFound
from ..files.safefs import check_entries, open_file, remove_stale_temps, remove_tree
from ..politeness.delayed import DelayedRequests
from ..scrapyfiles.queue import holds_requests, set_aside
from . import checkpoint
from .hostfile import HostFileUnusable, load_host_state
from .identity import foreign_meta, foreign_meta_problem
from .journal import MAGIC, MAGIC_CRC, JournalWriter
from .layout import FORMAT_VERSION, Lock, read_meta, salt_of, write_meta
from .maintenance.upgrade import upgrade_journal
from .outcomefile import path_of as outcomes_path
from .queues import OffsetQueues, distrust_reason
from .recovery import rebuild, save_torn_tail
from .replay import JournalState, Progress
from .seen import SeenFile
from .shared import Shared
from .statefile import StateUnusable, read_state_file, remove_stale_states, state_name, write_state

log = logging.getLogger("diskfrontier")
SAVE_AFTER_BYTES = 4 << 20
"""A scan of the journal that read more than this saves the state it reached (``requests.state.*``)."""


def check_settings(*, delay: Any, per_host: Any, prefer: Any, order: Any, fsync: Any) -> float:
    """The settings ``Frontier`` is opened with, checked (``ValueError`` or ``TypeError`` naming the
    first that is wrong); returns ``delay`` as a float."""
    delay = check_seconds("delay", delay)
    if prefer not in ("priority", "idle"):
        raise ValueError(f"prefer must be 'priority' or 'idle', got {prefer!r}")
    if per_host is not None and (isinstance(per_host, bool) or not isinstance(per_host, int) or per_host < 1):
        raise ValueError(f"per_host must be None or a whole number of at least 1, got {per_host!r}")
    if order not in (None, "lifo", "fifo"):
        raise ValueError(f"order must be 'lifo' or 'fifo', got {order!r}")
    if not isinstance(fsync, bool):
        raise TypeError(f"fsync must be True or False, got {fsync!r}")
    return delay


class Opening:
    """Fills in the shared state of a job directory being opened."""

    def __init__(self, state: Shared) -> None:
        self.state = state

    def open_locked(self, order: str | None, progress: Progress | None, release_files: Callable[[], None]) -> Lock:
        """Make the directory if there is none, check what it holds, lock it and ``open`` it; returns the
        lock, held. If the open fails, ``release_files`` closes what it had opened and the lock is let go."""
        st = self.state
        os.makedirs(st.path, exist_ok=True)
        check_entries(st.path, st.layout.entries())
        lock = Lock(st.layout.lock)
        lock.acquire()
        try:
            self.open(order, progress)
        except BaseException:
            release_files()
            lock.release()
            raise
        return lock

    def open(self, order: str | None, progress: Progress | None) -> None:
        """Open (or create) the directory, whose lock is held: ``order`` as ``Frontier`` takes it."""
        st = self.state
        layout = st.layout
        started = time.perf_counter()
        remove_stale_temps(layout.cursor)
        remove_stale_temps(layout.meta)
        remove_stale_temps(layout.seen_index)
        remove_stale_temps(layout.hosts)
        remove_stale_temps(layout.status)  # a holder killed while it replaced status.json
        remove_stale_temps(layout.health)
        remove_stale_temps(outcomes_path(st.path))
        if os.path.exists(layout.meta):
            meta = read_meta(layout)
            if order is not None and order != meta["order"]:
                raise ValueError(
                    f"{st.path} was created with order={meta['order']!r}; it cannot be reopened "
                    f"with order={order!r} (the order is fixed when the directory is created)"
                )
            if not os.path.exists(layout.journal):
                raise JobDirCorrupt(layout.journal, 0, "the journal is missing, so pending requests cannot be read")
            if meta["version"] < FORMAT_VERSION:
                upgrade_journal(layout, progress)
                meta = read_meta(layout)
            named = foreign_meta(layout, meta["id"])
            if named is not None:
                problem, advice = foreign_meta_problem(meta["id"], named)
                raise JobDirCorrupt(layout.meta, 0, problem, hint=advice)
            fresh = False
        else:
            if _just_created(layout.journal):
                os.unlink(layout.journal)  # a creation killed before frontier.json was written
            if os.path.lexists(layout.journal):
                named = checkpoint.named_id(layout.cursor) or "<the id its requests.cursor names>"
                raise JobDirCorrupt(layout.meta, 0, "missing, but the directory has a journal (requests.urls)",
                                    hint='restore frontier.json from a backup, or write it anew as {"format": '
                                         f'"diskfrontier", "version": {FORMAT_VERSION}, "order": "lifo", '
                                         f'"id": "{named}"}} (or "fifo")')
            self.set_aside_foreign_queue()
            JournalWriter.create(layout.journal)
            meta = write_meta(layout, order or "lifo")
            fresh = True
        st.order = meta["order"]
        st.ident = meta["id"]
        st.salt = salt_of(meta)
        st.hosts = st.new_schedule()
        remove_compaction_leftovers(layout.root)  # a compaction stopped before its swap: the old journal stands
        saved = checkpoint.read_checkpoint(layout.cursor, st.ident)
        st.floor = saved.floor
        st.states = list(saved.states)
        st.compactions = saved.compactions
        checkpoint.write_open(layout.cursor, st.ident, saved.floor, saved.seen_tail, saved.seen_index,
                              saved.journal_crc, st.states, st.compactions)
        st.floor_crc = saved.journal_crc
        st.seen = SeenFile(layout.seen, st.salt)
        loaded = st.seen.open(require_sums=not fresh, tail=saved.seen_tail, index=saved.seen_index)
        if loaded.torn:
            log.warning("cut %d bytes of torn tail from %s", loaded.torn, layout.seen)
        if loaded.legacy_hex:
            log.warning("converted %s from hex lines (Scrapy < 2.19) to the binary format", layout.seen)
        memory_queue = LifoMemoryQueue if st.order == "lifo" else FifoMemoryQueue
        st.memq = PriorityQueue(cast(Any, lambda _key: memory_queue()))
        reason = None if fresh else self.distrust_reason(saved)
        if fresh or reason is None:
            self.open_trusted(saved)
        else:
            self.rebuild(reason, progress)
        st.counters["torn_bytes_cut"] += loaded.torn
        st.seen.flush()
        checkpoint.write_open(layout.cursor, st.ident, st.journal.size, st.seen.tail(),
                              st.seen.index_record, st.journal.crc, st.states, st.compactions)
        st.floor, st.floor_crc = st.journal.size, st.journal.crc
        remove_stale_states(layout.root, st.states)
        st.hosts.active = st.hosts.active or bool(st.hosts.hot)  # a host with a setting
        st.delayed_due = st.delayed.next_due()
        if not fresh:
            self.log_resume(time.perf_counter() - started)

    def set_aside_foreign_queue(self) -> None:
        """A Scrapy JOBDIR's queue: an empty one is set aside; one with requests needs ``adopt-scrapy``."""
        layout = self.state.layout
        if os.path.isdir(layout.queue_dir) and os.listdir(layout.queue_dir):
            if holds_requests(layout.queue_dir):
                raise ScrapyQueueFound(self.state.path)
            aside = set_aside(layout.queue_dir)
            log.info("moved the empty queue folder %s of a finished Scrapy crawl to %s", layout.queue_dir, aside)

    def distrust_reason(self, saved: checkpoint.Checkpoint) -> str | None:
        """Why the queue files cannot be used as they are, or None if they can."""
        st = self.state
        distrust = distrust_reason(st.layout, saved, st.seen.end, st.salt)
        return None if distrust is None else f"{distrust[0]}: {distrust[1]}"

    def open_trusted(self, saved: checkpoint.Checkpoint) -> None:
        """Use the queue files and the host file as the clean checkpoint left them (else rebuild)."""
        st = self.state
        layout = st.layout
        size = os.path.getsize(layout.journal)
        crc = MAGIC_CRC if size == len(MAGIC) else saved.journal_crc if saved.clean else None
        st.journal = JournalWriter(layout.journal, size, salt=st.salt, fsync=st.fsync, crc=crc)
        try:
            st.queues = OffsetQueues(layout.queue_dir, st.order, saved.queues)
        except JobDirCorrupt as exc:
            self.rebuild(str(exc), None)
            return
        try:
            if saved.clean and saved.hosts_file is None:
                raise HostFileUnusable("the clean checkpoint names no requests.hosts")
            host_state = load_host_state(layout.hosts, saved.hosts_file) if saved.hosts_file else None
            if host_state is not None and host_state.failed and next(reversed(host_state.failed.values())) >= size:
                raise HostFileUnusable(f"{layout.hosts} names a FAIL record past the end of the journal")
        except HostFileUnusable as exc:
            st.queues.close()
            self.rebuild(str(exc), None)
            return
        sizes = st.queues.sizes()
        if host_state is not None:
            for priority, count in host_state.delayed.by_priority.items():
                sizes[priority] = sizes.get(priority, 0) + count
        if sizes != saved.pending:
            st.queues.close()
            self.rebuild(f"queue sizes {sizes} do not match the checkpoint {saved.pending}", None)
            return
        if host_state is not None:
            st.delayed = host_state.delayed
            st.hosts.counts = host_state.counts
            st.failed = host_state.failed
            for hid, delay, blocked_until, budget in host_state.settings:
                host = st.hosts.host(hid)
                host.delay, host.blocked_until, host.budget = delay, blocked_until, budget
        st.pending = dict(sizes)
        st.pushes, st.dones = saved.journal_pushes, saved.journal_dones
        st.last_record = saved.last_record
        st.live_bytes = saved.live_bytes
        st.failed_bytes = saved.failed_bytes or 0
        st.paused_since = saved.paused_since
        st.recovery = "clean" if saved.clean else "new"

    def rebuild(self, reason: str, progress: Progress | None, exclude: tuple[int, ...] = ()) -> None:
        """Rebuild the queues, seen set, hosts and failed requests from the journal (``exclude``: the
        offsets of requests in flight, left out of the queues)."""
        st = self.state
        layout = st.layout
        log.info("rebuilding the queues of %s from its journal: %s", st.path, reason)
        if getattr(st, "journal", None) is not None:
            st.journal.close()
        OffsetQueues.wipe(layout.queue_dir)
        st.queues = OffsetQueues(layout.queue_dir, st.order)
        state, added = self.scan(progress, exclude)
        st.live_bytes = state.live_bytes
        st.failed = state.failed
        st.failed_bytes = state.failed_bytes
        st.paused_since, st.applied, st.open_group = state.paused_since, state.applied, state.open_group
        st.delayed = DelayedRequests()
        for offset, priority, due in state.delayed:
            st.delayed.add(due, offset, priority)
        st.hosts = st.new_schedule()
        counts = st.hosts.counts
        for index, raw in enumerate(state.host_names):
            hid = counts.add(raw)
            counts.pending[hid], counts.done[hid] = state.host_pending.get(index, 0), state.host_done[index]
            record = state.host_settings.get(index)
            if record is not None:
                host = st.hosts.host(hid)
                host.delay = None if record.delay != record.delay else record.delay  # NaN: the default
                host.blocked_until = record.blocked_until
                host.budget = None if record.budget < 0 else record.budget
                st.hosts.cool(host, 0.0)  # a host whose settings were all undone
        torn = state.scan.torn
        if torn:
            aside = save_torn_tail(layout.journal, state.scan.end)
            log.warning("cut %d bytes of torn tail from %s (kept in %s)", torn, layout.journal, aside)
            st.counters["torn_bytes_cut"] += torn
        st.journal = JournalWriter(layout.journal, state.scan.end, salt=st.salt, fsync=st.fsync, crc=state.end_crc)
        st.pending = dict(state.counts)
        st.pushes, st.dones = state.pushes, state.dones
        st.last_record = state.last_record
        st.counters["recovered"] = state.pending_count
        st.counters["seen_added_from_journal"] = added
        st.recovery = "rebuilt"
        st.generation += 1
        self.keep_state(state)

    def scan(self, progress: Progress | None, exclude: tuple[int, ...]) -> tuple[JournalState, int]:
        """``recovery.rebuild`` into the (empty) queues: from the newest saved state that describes the journal,
        else from the journal's start (a state not used is named in the log, with the reason)."""
        st = self.state
        layout = st.layout
        for record in st.states:
            try:
                start = read_state_file(layout.root, record, st.ident, st.salt)
                scanned = rebuild(layout.journal, st.queues, st.seen, salt=st.salt, floor=st.floor,
                                  floor_crc=st.floor_crc, progress=progress, now=time.time(), exclude=exclude,
                                  start=start, save=st.ident)
                st.recovered_from = start.at
                return scanned
            except StateUnusable as exc:
                log.warning("%s: the checkpoint %s is not used (%s): the journal is read from its start instead",
                            st.path, record.name, exc)
        st.states = []
        st.recovered_from = 0
        return rebuild(layout.journal, st.queues, st.seen, salt=st.salt, floor=st.floor, floor_crc=st.floor_crc,
                       progress=progress, now=time.time(), exclude=exclude, save=st.ident)

    def keep_state(self, state: JournalState) -> None:
        """After a scan that read much of the journal, save the state it reached, so that the next one starts there.

        The state file is written (fsynced) here; the checkpoint that names it is written by the caller
        (``open``, the next ``write_open``), and until then the earlier states stand.
        """
        st = self.state
        saved = state.saved
        read = state.scan.end - state.started_at
        if saved is None or read < SAVE_AFTER_BYTES or st.journal.size != saved.at:
            return
        saved.seen_tail = None  # named by the checkpoint instead, which the seen file is checked against
        try:
            record = write_state(st.path, state_name(saved.at, secrets.randbits(48)), saved, st.salt)
        except OSError as exc:  # a full disk: the state is a cache; the next recovery reads more
            log.warning("%s: could not save the state of its journal (%s)", st.path, exc.strerror or exc)
            return
        st.states = [record]

    def log_resume(self, elapsed: float) -> None:
        """Say what was resumed (a warning after an unclean stop)."""
        st = self.state
        pending = sum(st.pending.values())
        torn = st.counters["torn_bytes_cut"]
        tail = f", {torn:,} bytes of torn tail cut" if torn else ""
        if st.recovery == "rebuilt":
            log.warning(
                "recovered %s after an unclean stop: %s pending (requests in flight at the stop included)%s, "
                "%s seen, in %.2fs", st.path, f"{pending:,}", tail, f"{len(st.seen):,}", elapsed)
        else:
            log.info("resumed %s: %s pending, %s seen%s", st.path, f"{pending:,}", f"{len(st.seen):,}", tail)


LEFTOVERS = ("requests.urls.compact", "requests.urls.map.", "requests.queue.compact.", "requests.queue.old.",
             "requests.seen.index.")


def remove_compaction_leftovers(root: str) -> int:
    """Remove what compactions stopped by a kill left in the job directory (never following a link); how many."""
    removed = 0
    for name in os.listdir(root):
        if not name.startswith(LEFTOVERS):
            continue
        path = os.path.join(root, name)
        if os.path.isdir(path) and not os.path.islink(path):
            remove_tree(path)
        else:
            os.unlink(path)
        removed += 1
    return removed


def _just_created(journal: str) -> bool:
    """True if ``journal`` holds no more than (a beginning of) its magic: created, never written."""
    if not os.path.lexists(journal) or os.lstat(journal).st_size > len(MAGIC):
        return False
    with open_file(journal) as f:
        return MAGIC.startswith(f.read())
