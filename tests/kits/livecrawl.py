"""The crawl the dashboard's tests read: 500 requests over 7 hosts at priorities 0 to 2, 120 done, 25 failed,
one host blocked and one delayed (``fill``), and a status.json written as a holder writes it
(``publish_status``). A kit, not the live folder's conftest, so that any test module may import it whatever
other folders a run collects."""

from __future__ import annotations

import os
import time

from popkit import take

from diskfrontier import Frontier, Request
from diskfrontier.contract.snapshot import LATEST_FAILURES, snapshot
from diskfrontier.files.atomic import write_json_atomic

PUSHED, DONE, FAILED = 500, 120, 25


def fill(frontier: Frontier) -> None:
    """500 requests over 7 hosts at priorities 0 to 2; 120 done, 25 failed; one host blocked, one delayed."""
    frontier.push_many([Request(f"https://h{i % 7}.example/p{i}", priority=i % 3) for i in range(PUSHED)])
    for _ in range(DONE):
        frontier.done(take(frontier))
    for n in range(FAILED):
        frontier.fail(take(frontier), f"HTTP 500 number {n} <b>not markup</b>")
    frontier.block("h3.example", time.time() + 3600)
    frontier.set_delay("h2.example", 2.5)


def publish_status(frontier: Frontier, **changes) -> dict:
    """Write the frontier's snapshot to its status.json, as the holder of a job directory does."""
    shot = snapshot(frontier.stats(), frontier.hosts(), frontier.failed()[-LATEST_FAILURES:], frontier.next_ready(),
                    source=frontier.path)
    shot.update(changes)
    write_json_atomic(os.path.join(frontier.path, "status.json"), shot)
    return shot
