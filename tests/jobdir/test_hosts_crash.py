"""kill -9 during retries, re-fetches and host changes: recovery rebuilds attempts, not_before
times, delays, blocks, budgets and done counts as they were acknowledged."""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass, field

import pytest
from crashkit import kill_after_acks
from paths import KITS

from diskfrontier import Frontier
from diskfrontier.jobdir.reader import pending_requests

CHILD = os.path.join(KITS, "hosts_child.py")
HOSTS = ["h0.example", "h1.example", "h2.example", "h3.example"]
RUNS = 24

pytestmark = pytest.mark.crash


@dataclass
class Model:
    """What the acknowledged calls promise."""

    pending: dict[str, tuple[int, float | None]] = field(default_factory=dict)  # url -> (attempts, due)
    done: dict[str, int] = field(default_factory=lambda: dict.fromkeys(HOSTS, 0))
    settings: dict[str, dict[str, object]] = field(
        default_factory=lambda: {h: {"delay": None, "blocked_until": None, "budget": None} for h in HOSTS})

    def copy(self) -> Model:
        return Model(dict(self.pending), dict(self.done), {h: dict(s) for h, s in self.settings.items()})

    def apply(self, op: dict) -> None:
        kind = op["op"]
        host = op.get("host") or op["url"].split("/")[2]
        if kind == "push":
            self.pending[op["url"]] = (0, op["due"])
        elif kind == "done":
            del self.pending[op["url"]]
            self.done[host] += 1
        elif kind in ("retry-now", "retry-later", "refetch"):
            self.pending[op["url"]] = (op["attempts"], op["due"])
            self.done[host] += kind == "refetch"
        elif kind == "delay":
            self.settings[host]["delay"] = op["value"]
        elif kind == "block":
            self.settings[host]["blocked_until"] = math.inf if op["value"] == "inf" else op["value"]
        elif kind == "unblock":
            self.settings[host]["blocked_until"] = None
        elif kind == "budget":
            self.settings[host]["budget"] = op["value"]


def run_child(job: str, seed: int, acks: int) -> tuple[Model, dict | None]:
    """Run the child until it has confirmed ``acks`` calls and kill it with SIGKILL: the model of
    every call it confirmed, and the call it had begun and not confirmed, if any."""
    acked, begun = kill_after_acks([CHILD, job, str(seed)], acks)
    model = Model()
    for op in acked:
        if op["op"] != "pop":
            model.apply(op)
    return model, begun


def observed(job: str) -> Model:
    """The state a recovered frontier shows."""
    seen = Model()
    with Frontier(job) as frontier:
        assert frontier.recovery in ("rebuilt", "clean")
        for info in frontier.hosts():
            seen.done[info.host] = info.done
            seen.settings[info.host] = {"delay": info.delay,
                                        "blocked_until": info.blocked_until, "budget": info.budget}
    for request in pending_requests(job):
        seen.pending[request.url] = (request.attempts, request.not_before)
    return seen


def same_settings(want: dict, got: dict) -> bool:
    delay = want["delay"] or 0.0  # None: the frontier's delay, 0 here
    return (got["delay"] or 0.0) == delay and got["blocked_until"] == want["blocked_until"] \
        and got["budget"] == want["budget"]


def matches(model: Model, seen: Model) -> bool:
    return (seen.pending == model.pending and seen.done == model.done
            and all(same_settings(model.settings[h], seen.settings[h]) for h in HOSTS))


@pytest.mark.parametrize("run", range(RUNS))
def test_recovery_rebuilds_time_and_host_state(tmp_path, run):
    rng = random.Random(run)
    job = str(tmp_path / "job")
    acks = rng.randrange(5, 250)
    model, begun = run_child(job, run, acks)
    seen = observed(job)
    if matches(model, seen):
        return
    assert begun is not None, f"state differs from the acknowledged calls, and no call was under way: {seen}"
    # the call under way at the kill may have landed: its effect must be whole
    landed = model.copy()
    if begun["op"] == "push":
        assert seen.pending.get(begun["url"]) == (0, begun["due"])
        landed.apply(begun)
    elif begun["op"] in ("retry-now", "retry-later", "refetch"):
        attempts, due = seen.pending[begun["url"]]
        more = 0 if begun["op"] == "refetch" else 1
        assert attempts == (0 if more == 0 else begun["attempts"] + 1)
        assert (due is None) == (begun["op"] == "retry-now")
        landed.apply({**begun, "attempts": attempts, "due": due})
    else:
        landed.apply(begun)
    assert matches(landed, seen), (model, seen)
