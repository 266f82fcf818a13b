"""Deferred dones (``ack="deferred"``) on Redis or PostgreSQL. ``done_frees_its_host``: a done carried by a pop
frees its host's place under ``per_host`` for that very pop. ``run_kills``: a process killed between a ``done``
and its next step; it starts a worker that kills itself at a chosen step (a pop, or just after a done returned) beside a
live one, and checks that no request was lost, that none was handed out more than once more, and that one handed
out again went out only after the killed client's last step (never to two live clients at once)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from diskfrontier import Request

LEASE = 1.0

CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from diskfrontier import PostgresFrontier, RedisFrontier
    backend, url, crawl, lease, kill_at = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
    f = (RedisFrontier if backend == "redis" else PostgresFrontier)(url, crawl=crawl, lease=lease)
    step = 0
    while (r := f.pop(timeout=None)) is not None:
        print("pop", r.url, time.time(), flush=True)
        step += 1
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # popped, not done
        f.done(r)
        print("done", r.url, time.time(), flush=True)
        step += 1
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # between a done that returned and the next step
    f.close()
""")


def _start(backend: str, url: str, crawl: str, kill_at: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, backend, url, crawl, str(LEASE), str(kill_at)],
                            stdout=subprocess.PIPE, text=True)


def _lines(out: str) -> list[tuple[str, str, float]]:
    return [(kind, url, float(at)) for kind, url, at in (line.split() for line in out.splitlines())]


def run_kills(backend: str, url: str, crawl_name: str, open_frontier: Callable[[str], Any], *, runs: int = 6,
              n: int = 40, seed: int = 35) -> None:
    """``runs`` crawls of ``n`` requests, each worked by a child killed at a random step and a live one;
    ``open_frontier(crawl)`` opens a client of the backend (to seed and to check)."""
    rng = random.Random(seed)
    for run in range(runs):
        crawl = f"{crawl_name}-{run}"
        with open_frontier(crawl) as seeder:
            seeder.push_many(Request(f"https://h{i % 4}.example/{i}") for i in range(n))
        kill_at = rng.randrange(2, 12)  # a step of the killed child's: a pop (odd) or a done (even)
        killed = _start(backend, url, crawl, kill_at)
        assert killed.stdout is not None
        first = killed.stdout.readline()  # it has begun: the live one starts beside it
        live = _start(backend, url, crawl, 0)
        out_killed = first + killed.stdout.read()  # (communicate() would pass over what readline() buffered)
        killed.wait(timeout=120)
        out_live, _ = live.communicate(timeout=120)
        assert killed.returncode == -signal.SIGKILL and live.returncode == 0
        dead, alive = _lines(out_killed), _lines(out_live)
        died_after = max(at for _kind, _url, at in dead)
        popped_dead = [url for kind, url, _at in dead if kind == "pop"]
        done_dead = [url for kind, url, _at in dead if kind == "done"]
        popped_live = {url: at for kind, url, at in alive if kind == "pop"}
        assert len(popped_live) == len([1 for kind, _u, _a in alive if kind == "pop"])  # none twice to one client
        # nothing lost: every request was popped and done by one of the two
        assert set(popped_dead) | set(popped_live) == {f"https://h{i % 4}.example/{i}" for i in range(n)}
        again = set(popped_dead) & set(popped_live)
        # handed out again only after the killed client's last step, so never to two live clients at once
        assert all(popped_live[url] > died_after for url in again), (run, again)
        # once more at most, and only what the kill cut short: the one in hand, or the last done not sent yet
        assert len(again) <= 1 and again <= {popped_dead[-1]}, (run, kill_at, again)
        assert len(set(done_dead) & again) <= 1
        with open_frontier(crawl) as check:
            stats = check.stats()
            assert (stats["done"], stats["pending"], stats["in_flight"]) == (n, 0, 0), (run, stats)


def done_frees_its_host(f: Any, per_host: int) -> None:
    """``f`` (opened with ``per_host``): a done carried by the next pop frees its host for that pop."""
    f.push_many([Request("https://a.example/1"), Request("https://a.example/2"), Request("https://a.example/3"),
                 Request("https://b.example/1")])
    held = [f.pop() for _ in range(per_host + 1)]  # a.example at its limit, then b.example
    assert all(held) and {r.slot for r in held if r is not None} == {"a.example", "b.example"}
    assert f.pop() is None  # a.example holds as many as it may
    first = next(r for r in held if r is not None and r.slot == "a.example")
    f.done(first)  # carried by the next pop, which sees a.example free again
    again = f.pop()
    assert again is not None and again.slot == "a.example"
    stats = f.stats()
    assert (stats["done"], stats["in_flight"]) == (1, len(held))
