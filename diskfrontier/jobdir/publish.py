"""``StatusPublisher``: ``status.json``, the snapshot of a running crawl other processes read.

The watcher (``watcher.py``) asks for one every so often; the snapshot's shape is the contract's
(``contract/snapshot.py``), the same a Redis crawl publishes. The busiest hosts cost a pass over
every host, so they are refreshed only when asked (``with_hosts``) and reused in between.
"""

from __future__ import annotations

import json
import time

from ..contract.snapshot import LATEST_FAILURES, TOP_HOSTS, snapshot
from ..files.atomic import write_atomic
from ..politeness.schedule import HostInfo
from .dispatch import Dispatch
from .guard import Guard
from .shared import Shared


class StatusPublisher:
    """Writes ``status.json`` for one open job directory."""

    def __init__(self, state: Shared, dispatch: Dispatch, guard: Guard) -> None:
        self.state = state
        self.dispatch = dispatch
        self.guard = guard
        self.hosts_seen: tuple[list[HostInfo], int, int, int] = ([], 0, 0, 0)

    def publish(self, *, with_hosts: bool) -> float:
        """Write ``status.json`` now; return the seconds the host list took (0 when not refreshed)."""
        state, dispatch = self.state, self.dispatch
        cost = 0.0
        with self.guard:
            stats = state.stats(journal_open=True)
            ready = None if state.paused_since is not None else dispatch.next_ready()
            if with_hosts:
                started = time.perf_counter()
                self.hosts_seen = dispatch.busiest_hosts(TOP_HOSTS, time.time())
                cost = time.perf_counter() - started
            failures = dispatch.latest_failed(LATEST_FAILURES)
            outcome_file = state.outcomes
            outcomes = None if outcome_file is None else outcome_file.changed(state.counters)
        if outcome_file is not None and outcomes is not None:
            outcome_file.write(outcomes)  # before status.json: what a reader sees there is on disk
        busiest, total, ready_hosts, waiting = self.hosts_seen
        value = snapshot(stats, busiest, failures, ready, source=state.path, host_counts=(total, ready_hosts, waiting))
        write_atomic(state.layout.status, json.dumps(value, default=str).encode(), durable=False)
        return cost
