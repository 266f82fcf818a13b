"""The kill -9 campaign of many worker processes on one crawl, on any shared backend (one Redis server, a
Redis Cluster, PostgreSQL): workers started from ``worker_child.py``, a victim SIGKILLed while it holds
leases, what their logs say, and the checks every backend must pass (nothing lost, each request acknowledged
once, handed out again only if a killed worker held it, never held by two live workers at once)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from paths import KITS

from diskfrontier import Request

CHILD = os.path.join(KITS, "worker_child.py")

Handout = tuple[str, float, float]  # (worker, start, end) of a pop or a done


def start_worker(backend: str, url: str, crawl: str, log: str, hold: int) -> subprocess.Popen:
    """A worker on crawl ``crawl`` of ``backend`` ("redis" or "postgres") at ``url`` writing its log to ``log``,
    holding up to ``hold`` requests."""
    return subprocess.Popen([sys.executable, CHILD, backend, url, crawl, log, str(hold)], stderr=subprocess.PIPE)


def read_log(path: str) -> list[list[str]]:
    """A worker's log, a list of words a line."""
    with open(path) as f:
        return [line.split() for line in f.read().splitlines()]


def not_begun(lines: list[list[str]]) -> set[str]:
    """URLs popped whose done was not begun in a worker's log: a kill then leaves them leased, and their leases
    must run out and be taken back."""
    held: set[str] = set()
    for line in lines:
        if line[0] == "P":
            held.add(line[1])
        elif line[0] in ("B", "D"):
            held.discard(line[1])
    return held


def outstanding(lines: list[list[str]]) -> set[str]:
    """URLs popped and not yet done in a worker's log."""
    held: set[str] = set()
    for line in lines:
        if line[0] == "P":
            held.add(line[1])
        elif line[0] == "D":
            held.discard(line[1])
    return held


@dataclass
class Campaign:
    """What a campaign did: each worker's log (by name), the workers killed, and what each kill left held."""

    logs: dict[str, str]
    dead: set[str] = field(default_factory=set)
    held_at_kill: list[set[str]] = field(default_factory=list)
    pops: dict[str, list[Handout]] = field(default_factory=lambda: defaultdict(list))  # url -> hand-outs
    dones: dict[str, list[Handout]] = field(default_factory=lambda: defaultdict(list))

    @property
    def reclaimed(self) -> int:
        """Hand-outs of a request after its first."""
        return sum(len(p) - 1 for p in self.pops.values())

    def read(self) -> None:
        """Read every log's pops and dones (once the workers ended)."""
        for name, path in self.logs.items():
            for line in read_log(path):
                if line[0] == "P":
                    self.pops[line[1]].append((name, float(line[2]), float(line[3])))
                elif line[0] == "D":
                    self.dones[line[1]].append((name, float(line[2]), float(line[3])))

    def lost(self, everything: set[str]) -> set[str]:
        """Requests of ``everything`` without a done line, but for a done under way at a kill."""
        begun = {line[1] for name in self.dead for line in read_log(self.logs[name]) if line[0] == "B"}
        return everything - set(self.dones) - begun

    def held_twice(self) -> list[str]:
        """A URL for each time it was held by two live workers at once (a live holder's time runs from its pop
        to its done)."""
        twice = []
        for url, handed in self.pops.items():
            spans = sorted((start, next((d[2] for d in self.dones[url] if d[0] == name), float("inf")))
                           for name, start, _ in handed if name not in self.dead)
            twice += [url for (_, end1), (start2, _) in pairwise(spans) if start2 < end1]
        return twice

    def closest_of_one_host(self) -> float:
        """The least time between two hand-outs of one host, each known only to lie between its pop's call and
        return."""
        by_host: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for url, handed in self.pops.items():
            for _, start, end in handed:
                by_host[url.split("/")[2]].append((start, end))
        closest = float("inf")
        for times in by_host.values():
            times.sort()
            for (a1, b1), (a2, b2) in pairwise(times):
                closest = min(closest, max(b2 - a1, b1 - a2))
        return closest

    def check(self, everything: set[str]) -> None:
        """What every backend promises through the kills: nothing lost, each request acknowledged once, handed
        out again only if a killed worker held it (and at least one was), never held by two live workers."""
        lost = self.lost(everything)
        assert not lost, sorted(lost)[:3]  # only a done under way at a kill may lack its line
        assert all(len(d) == 1 for d in self.dones.values())  # each acknowledged once
        assert {url for url, p in self.pops.items() if len(p) > 1} <= set().union(*self.held_at_kill)
        twice = self.held_twice()
        assert not twice, f"{sorted(set(twice))[:3]} held by two live workers at once"
        assert self.reclaimed >= 1


def kill_campaign(start: Callable[[str, int], subprocess.Popen], folder: str, *, victim_dones: int,
                  patience: float, late: bool, wait: float) -> Campaign:
    """Workers "a", "b", "c" (each holding up to 2 requests) with a victim (holding up to 8) started and
    SIGKILLed once it logged ``victim_dones`` dones and holds a request whose done it has not begun, until two
    kills left such leases (a victim that began every done before the kill does not count); then a fresh worker
    joins if ``late``, and every worker is waited for (``wait`` seconds at most) and must end well.
    ``start(log, hold)`` starts a worker; ``patience``: seconds a victim may take to reach the kill."""
    names = ("a", "b", "c", "late") if late else ("a", "b", "c")
    campaign = Campaign({name: os.path.join(folder, f"{name}.log") for name in names})
    logs = campaign.logs
    workers = [start(logs[name], 2) for name in ("a", "b", "c")]
    reclaimable = 0  # kills that left a request whose done was not begun: its lease must run out and be taken back
    while reclaimable < 2:  # two kills that land while the victim holds leases
        name = f"victim-{len(campaign.dead) + 1}"
        logs[name] = os.path.join(folder, f"{name}.log")
        victim = start(logs[name], 8)
        assert victim.stderr is not None
        deadline = time.monotonic() + patience
        while True:  # kill it once it has done some work and holds leases
            lines = read_log(logs[name]) if os.path.exists(logs[name]) else []
            if sum(1 for line in lines if line[0] == "D") >= victim_dones and not_begun(lines):
                victim.send_signal(signal.SIGKILL)
                victim.wait()
                break
            assert victim.poll() is None, victim.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, f"the victim never held leases after {victim_dones} dones"
            time.sleep(0.001)
        campaign.dead.add(name)
        held = outstanding(read_log(logs[name]))
        reclaimable += bool(not_begun(read_log(logs[name])))  # else it began every done before the kill
        if held:  # else it finished them between the look and the kill: kill another
            campaign.held_at_kill.append(held)
        assert len(campaign.dead) < 10
    if late:
        workers.append(start(logs["late"], 2))  # a fresh one joins late
    for worker in workers:
        _, err = worker.communicate(timeout=wait)
        assert worker.returncode == 0, err.decode()[-3000:]
    campaign.read()
    return campaign


def polite_campaign(open_crawl: Callable[..., Any], start: Callable[[str, int], subprocess.Popen], folder: str, *,
                    total: int, hosts: int, delay: float, victim_dones: int, patience: float,
                    wait: float) -> tuple[Campaign, float]:
    """``total`` requests of ``hosts`` hosts with a delay of ``delay`` seconds, pushed by ``open_crawl(**settings)``
    and crawled by the kill campaign of ``kill_campaign`` with a late worker: every check of ``Campaign.check``,
    and the delay held across processes. The campaign and the least time between two hand-outs of one host."""
    with open_crawl(delay=delay, lease=2.0, order="fifo") as seed:
        assert seed.push_many(Request(f"https://h{i % hosts}.example/{i}") for i in range(total)) == total
    campaign = kill_campaign(start, folder, victim_dones=victim_dones, patience=patience, late=True, wait=wait)
    campaign.check({f"https://h{i % hosts}.example/{i}" for i in range(total)})
    closest = campaign.closest_of_one_host()  # politeness across processes
    assert closest >= delay - 1e-4, f"two hand-outs of one host only {closest:.4f}s apart"
    return campaign, closest
