"""The kill campaign of checkpoints and compactions: guarantees 1-4 when SIGKILL lands anywhere in them.

A steady crawl (upkeep_child.py) checkpoints and compacts its job directory over and over, in a child
process of its own or in a thread. Each round it is killed: at the N-th acknowledgement of a call (so at
whatever the upkeep was doing then), or by itself at the N-th time one named step of a checkpoint or a
swap is reached (``jobdir/maintenance/steps.py``). After the last round the job directory is drained and
checked against the reference model driven by what the child acknowledged (crashkit): nothing
acknowledged lost, nothing done back, every accepted URL still a duplicate, the order of what was never
handed out kept.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections import Counter

import pytest
from crashkit import check_guarantees, dedupe_survives, drain, kill_when, mark_torn_line, read_log

pytestmark = pytest.mark.crash

CHILD = os.path.join(os.path.dirname(__file__), os.pardir, "kits", "upkeep_child.py")
STEPS = ["job-started", "checkpoint-named", "checkpoint-done", "swap-caught-up", "swap-named", "swap-queues",
         "swap-installed", "swap-done"]
JOB_ENDS = ("checkpoint-done", "swap-done")


def _inside(log_path: str, start: int) -> str:
    """Where the run that began at byte ``start`` of the log was killed: the step it had reached last, if a job
    was under way ("outside" otherwise)."""
    with open(log_path, "rb") as f:
        f.seek(start)
        lines = f.read().decode(errors="replace").split("\n")
    last = "outside"
    for line in lines:
        if line.startswith("S "):
            name = line[2:]
            last = "outside" if name in JOB_ENDS else name
    return last


def _round(jobdir: str, log_path: str, seed: int, round_no: int, order: str, runner: str, rng: random.Random,
           ) -> tuple[str, str]:
    """One run killed: (how it was killed, where it was)."""
    open(log_path, "ab").close()
    start = os.path.getsize(log_path)
    args = [sys.executable, CHILD, jobdir, log_path, str(seed), str(round_no), order, runner]
    if rng.random() < 0.5:
        step = rng.choice(STEPS)
        proc = subprocess.Popen([*args, step, str(rng.randrange(1, 3))], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        assert proc.stderr is not None
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"the child never reached {step}") from None
        assert code == -9, f"the child ended with {code}: {proc.stderr.read().decode()[-2000:]}"
        proc.stderr.close()
        mark_torn_line(log_path)
        return f"at {step}", _inside(log_path, start)
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    marker = rng.choice(["D ", "P ", "O ", "?D", "?O"])
    assert kill_when(proc, log_path, marker, rng.randrange(200, 6000), start, timeout=60)
    proc.stderr.close()
    return "at an acknowledgement", _inside(log_path, start)


def _campaign(tmp_path, order: str, runner: str, seed: int, rounds: int) -> dict:
    jobdir, log_path = str(tmp_path / "job"), str(tmp_path / "child.log")
    rng = random.Random(seed)
    how: Counter = Counter()
    where: Counter = Counter()
    started = time.monotonic()
    for round_no in range(rounds):
        killed, inside = _round(jobdir, log_path, seed * 1000 + round_no, round_no, order, runner, rng)
        how[killed] += 1
        where[inside] += 1
    replayed = read_log(log_path, order)
    drained = drain(jobdir)
    try:
        result = check_guarantees(replayed, drained)
    except AssertionError as exc:
        raise AssertionError(f"{exc} (the child's log: {log_path})") from None
    result["dedupe_checked"] = dedupe_survives(jobdir, replayed.model)
    left = [n for n in os.listdir(jobdir) if ".compact" in n or ".map." in n or ".old." in n]
    assert not left, f"a compaction's files were left after the opens: {left}"
    named = [n for n in os.listdir(jobdir) if n.startswith("requests.state.")]
    assert len(named) <= 1, f"state files no checkpoint names were left: {named}"

    with open(log_path) as f:
        logged = Counter(line[2:] for line in f.read().split("\n") if line.startswith("S "))
    result["kills"] = rounds
    result["inside a job"] = rounds - where["outside"]
    print(f"\n{order} {runner} seed={seed}: {rounds} SIGKILLs in {time.monotonic() - started:.0f}s; "
          f"by how {dict(how)}; killed inside a job at {dict(where)}; steps reached {dict(logged)}; {result}")
    return result | {"steps": logged, "where": where}


@pytest.mark.parametrize("runner", ["process", "thread"])
def test_kills_in_checkpoints_and_compactions_lose_nothing(tmp_path, runner):
    result = _campaign(tmp_path, "lifo", runner, 11, rounds=10)
    assert result["promised"] > 0 and result["done"] > 0
    assert result["steps"]["swap-done"] > 0 and result["steps"]["checkpoint-done"] > 0  # the upkeep did its work


@pytest.mark.slow
@pytest.mark.parametrize(("order", "runner", "seed"), [("lifo", "process", 21), ("fifo", "process", 22),
                                                        ("lifo", "thread", 23), ("fifo", "thread", 24)])
def test_the_kill_campaign_of_the_upkeep(tmp_path, order, runner, seed):
    result = _campaign(tmp_path, order, runner, seed, rounds=50)
    assert result["promised"] > 0 and result["done"] > 0
    assert result["inside a job"] >= 10, result["where"]  # kills did land inside checkpoints and compactions
