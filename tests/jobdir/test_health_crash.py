"""kill -9 during host failures and dones: a reopened job directory shows each host's failure streak and
block as the acknowledged calls left them (the call under way at the kill landed whole or not at all, except
that a failure's block may be lost while its count is kept: the next failure sets it again)."""

from __future__ import annotations

import os
import random

import pytest
from crashkit import kill_after_acks
from paths import KITS

from diskfrontier import Frontier

CHILD = os.path.join(KITS, "health_child.py")
HOSTS = ["h0.example", "h1.example", "h2.example"]
RUNS = 12

pytestmark = pytest.mark.crash


def model_of(acked: list[dict]) -> tuple[dict[str, int], dict[str, float | None]]:
    """Each host's failure count and block time (None: no block from a failure since its last done)."""
    failures = dict.fromkeys(HOSTS, 0)
    blocked: dict[str, float | None] = dict.fromkeys(HOSTS)
    for op in acked:
        host = op["host"]
        if op["op"] == "failed":
            failures[host] += 1
            blocked[host] = op["until"] or blocked[host]
        else:
            failures[host], blocked[host] = 0, None
    return failures, blocked


@pytest.mark.parametrize("run", range(RUNS))
def test_failure_streaks_and_their_blocks_survive_kill_9(tmp_path, run):
    rng = random.Random(run)
    job = str(tmp_path / "job")
    acked, begun = kill_after_acks([CHILD, job, str(run)], rng.randrange(3, 60))
    failures, blocked = model_of(acked)
    with Frontier(job) as frontier:
        seen = {host: frontier.host(host) for host in HOSTS}
    for host in HOSTS:
        info = seen[host]
        count = 0 if info is None else info.failures
        until = None if info is None else info.blocked_until
        if begun is not None and begun["host"] == host:
            if begun["op"] == "failed":  # landed or not; if its count landed, its block may not have
                assert count in (failures[host], failures[host] + 1)
                if count == failures[host] + 1:  # it landed: a block only from the third failure on
                    if count >= 3:
                        assert until is None or until >= (blocked[host] or 0)
                    else:
                        assert until is None, (host, until)
                    continue
            else:  # the done landed or not: the streak is ended, or as it was
                assert count in (0, failures[host])
                continue
        assert count == failures[host], (host, acked[-5:], begun)
        if blocked[host] is None:
            assert until is None, (host, until)
        else:
            assert until == pytest.approx(blocked[host])
