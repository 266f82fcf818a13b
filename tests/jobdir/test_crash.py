"""Guarantees 1-4 under SIGKILL: a real child process killed at many moments.

Each test runs the same seeded crawl-like workload (crash_child.py) on one job
directory through many rounds; every round is killed with SIGKILL at the N-th
occurrence of one kind of call (push, push_many, pop, done, close/reopen, compact).
After the last round the job directory is drained and checked against the model
rebuilt from what the child had acknowledged.
"""

from __future__ import annotations

import random

import pytest
from crashkit import TORN, check_guarantees, dedupe_survives, drain, mark_torn_line, read_log, run_round
from volume import forms, scaled

pytestmark = pytest.mark.crash

MARKERS = ["?P", "?M", "?O", "?D", "?C", "?K", "P ", "D ", "C"]


def _crash_rounds(tmp_path, order: str, seed: int, rounds: int, markers: list[str], fsync: bool = False):
    jobdir = str(tmp_path / "job")
    log_path = str(tmp_path / "child.log")
    rng = random.Random(seed)
    tally: dict[str, int] = {}
    for round_no in range(rounds):
        marker = markers[round_no % len(markers)]
        count = rng.randrange(1, 4) if marker in ("?C", "?K", "C") else rng.randrange(5, 120)
        run_round(jobdir, log_path, seed * 1000 + round_no, round_no, order, marker, count, fsync)
        tally[marker] = tally.get(marker, 0) + 1
    replayed = read_log(log_path, order)
    drained = drain(jobdir)
    try:
        result = check_guarantees(replayed, drained)
    except AssertionError as exc:
        raise AssertionError(f"{exc} (the child's log: {log_path})") from None
    result["dedupe_checked"] = dedupe_survives(jobdir, replayed.model)
    result["kills"] = rounds
    print(f"\n{order} seed={seed}: kills by point {tally}; {result}")
    return result


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_loss_no_resurrection_dedupe_order_survive_sigkill_lifo(tmp_path, seed):
    result = _crash_rounds(tmp_path, "lifo", seed, rounds=18, markers=MARKERS)
    assert result["promised"] > 0 and result["done"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [4, 5])
def test_no_loss_no_resurrection_dedupe_order_survive_sigkill_fifo(tmp_path, seed):
    result = _crash_rounds(tmp_path, "fifo", seed, rounds=18, markers=MARKERS)
    assert result["promised"] > 0 and result["done"] > 0


@pytest.mark.parametrize("volume", forms(0.5))
def test_guarantees_hold_with_the_seen_index_saved_at_every_close(tmp_path, monkeypatch, volume):
    # Every clean close saves requests.seen.index; kills fall in the middle of saving it, and
    # opens after a kill load it and add the rest of requests.seen and of the journal.
    monkeypatch.setenv("DISKFRONTIER_TEST_INDEX_MIN_NEW_KEYS", "1")
    result = _crash_rounds(tmp_path, "lifo", 8, rounds=scaled(12, volume), markers=["?C", "C", "?P", "?M", "?D"])
    assert result["promised"] > 0 and result["dedupe_checked"] > 0
    assert (tmp_path / "job" / "requests.seen.index").exists()


@pytest.mark.parametrize("volume", forms(0.5))
def test_no_loss_with_fsync_on(tmp_path, volume):
    result = _crash_rounds(tmp_path, "lifo", 6, rounds=scaled(6, volume), markers=["?P", "?D", "?C"], fsync=True)
    assert result["promised"] > 0


@pytest.mark.parametrize("volume", forms(0.5))
def test_in_flight_requests_come_back_after_sigkill(tmp_path, volume):
    result = _crash_rounds(tmp_path, "lifo", 7, rounds=scaled(8, volume), markers=["?D", "?O"])
    assert result["in_flight_returned"] > 0


def test_the_model_reads_log_lines_cut_short_by_a_kill(tmp_path):
    log = tmp_path / "child.log"
    log.write_text("R\n?M https://a.example/1 0 https://a.example/2 1\nM https://a.example/1 0 https://a.exa")
    mark_torn_line(str(log))  # push_many had returned: both are promised, with the priorities they were pushed with
    with open(log, "a") as f:
        f.write("R\n?M https://a.example/3 -1\n?P https://a.exa")
    mark_torn_line(str(log))  # an intent cut short: that push never started
    with open(log, "a") as f:
        f.write("R\n")
    assert log.read_text().count(TORN) == 2
    model = read_log(str(log), "lifo").model
    assert model.seen == {"https://a.example/1", "https://a.example/2"}
    assert model.pending == {"https://a.example/1": (0, 1), "https://a.example/2": (1, 2)}
    assert set(model.maybe_pushed) == {"https://a.example/3"}  # its push was under way at the kill


def test_the_model_reads_pops_and_dones_cut_short_by_a_kill(tmp_path):
    log = tmp_path / "child.log"
    log.write_text("R\n?P https://a.example/1 0\nP https://a.example/1 0\n?P https://a.example/2 0\n"
                   "P https://a.example/2 0\n?P https://a.example/3 0\nP https://a.example/3 0\n"
                   "?O\nO https://a.example/3\n?O\nO https://a.example/2\n?D https://a.example/3\nD https://a.exa")
    mark_torn_line(str(log))  # done() had returned: 3 is finished
    with open(log, "a") as f:
        f.write("R\n?O\nO https://a.example/2\n?O\nO https://a.ex")
    mark_torn_line(str(log))  # 2 came back after the kill; a pop handed out 1 as the kill fell
    with open(log, "a") as f:
        f.write("R\n?O\nO https://a.example/1\n?D https://a.example/1\n")
    replayed = read_log(str(log), "lifo")
    model = replayed.model
    assert replayed.refuted == [] and replayed.torn_pops == ["https://a.ex"]
    assert model.completed == {"https://a.example/3"} and set(model.maybe_done) == {"https://a.example/1"}
    assert model.pending == {"https://a.example/2": (0, 2)}  # in flight at the last kill: at its place again
    assert model.handed_out == {"https://a.example/1", "https://a.example/2", "https://a.example/3"}
    with open(log, "a") as f:
        f.write("R\n?O\nO https://a.example/3\n")  # a finished request handed out again
    assert read_log(str(log), "lifo").refuted == ["a pop handed out https://a.example/3, which was not pending"]
