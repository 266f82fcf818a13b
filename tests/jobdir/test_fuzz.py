"""Seeded damage to every file of LIFO and FIFO job directories, after a clean close and after a kill.

Each case damages one file of a copy of a fixture (``fuzzkit.py``) and then opens it and
pops everything. The outcome must be ``exact`` (everything pending comes back, nothing
done does, dedupe is kept), ``torn`` (a crash-state journal cut where a kill could have
cut it), or a refusal naming the file, after which ``verify`` sees the damage and
``verify --repair`` lets the directory open with no request invented or resurrected.
Anything else (a raw exception, a hang, a huge allocation, wrong data) fails.

The basic fixtures hold PUSH and DONE records only; the ``requeue`` fixtures also HOST,
RETRY and REFETCH records and requests held back by time (``REQUEUE_WEIGHTS`` more cases).

``DISKFRONTIER_FUZZ_CASES=5000`` runs about that many cases instead of the default
(~2,000); ``pytest -s`` prints the table of outcomes (file x damage).
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections import Counter

import fuzzkit
import pytest
from fuzzkit import KINDS, TARGETS, Tally, applicable, no_fsync, run_case

pytestmark = pytest.mark.slow  # ~2,000 cases: CI runs them, `pytest -m 'not slow'` does not

# cases per damage kind (on the basic fixtures); others: 16
WEIGHTS = {"requests.urls": 36, "requests.seen": 20, "requests.hosts": 8, "lock": 8}
DEFAULT_WEIGHT = 16
# more cases per damage kind, on the requeue fixtures (small ones; the journal is what they are about); others: 2
REQUEUE_WEIGHTS = {"requests.urls": 16, "requests.hosts": 8, "requests.cursor": 4, "queue": 4}
REQUEUE_DEFAULT_WEIGHT = 2
KNOWN: dict[tuple[str, str], str] = {}  # (file, damage) -> why it fails, for a known bug not fixed yet

PARAMS = [(target, kind) for target in TARGETS for kind in KINDS if applicable(target, kind)]
DEFAULT_TOTAL = sum(WEIGHTS.get(target, DEFAULT_WEIGHT) + REQUEUE_WEIGHTS.get(target, REQUEUE_DEFAULT_WEIGHT)
                    for target, _ in PARAMS)


def cases_for(target: str, weights: dict[str, int] = WEIGHTS, default: int = DEFAULT_WEIGHT) -> int:
    weight = weights.get(target, default)
    wanted = os.environ.get("DISKFRONTIER_FUZZ_CASES")
    if not wanted:
        return weight
    return max(4, math.ceil(int(wanted) * weight / DEFAULT_TOTAL))


TALLIES: dict[tuple[str, str], Tally] = {}


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-fixtures")
    built = fuzzkit.build_fixtures(str(root))
    yield built
    if TALLIES:
        ordered = {key: TALLIES[key] for key in PARAMS if key in TALLIES}
        sys.stdout.write("\n" + fuzzkit.table(ordered) + "\n")


def _param(target: str, kind: str):
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN[target, kind])] if (target, kind) in KNOWN else []
    return pytest.param(target, kind, id=f"{target}-{kind}", marks=marks)


@pytest.fixture
def quiet_recoveries():
    """Recoveries log warnings by design: only errors are shown, for this test only."""
    logger = logging.getLogger("diskfrontier")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@pytest.mark.parametrize(("target", "kind"), [_param(t, k) for t, k in PARAMS])
def test_damaged_job_directory(fixtures, tmp_path, target, kind, quiet_recoveries):
    tally = TALLIES[target, kind] = Tally()
    basic, requeue = fuzzkit.basic_fixtures(fixtures), fuzzkit.requeue_fixtures(fixtures)
    with no_fsync():
        for seed in range(cases_for(target)):
            fixture = basic[seed % len(basic)]
            tally.add(fixture, run_case(fixture, str(tmp_path), target, kind, seed), seed)
        for seed in range(cases_for(target, REQUEUE_WEIGHTS, REQUEUE_DEFAULT_WEIGHT)):
            fixture = requeue[(seed + KINDS.index(kind)) % len(requeue)]  # a few cases per kind: all fixtures in turn
            tally.add(fixture, run_case(fixture, str(tmp_path), target, kind, seed), seed)
    listed = "\n".join(tally.failures[:10])
    assert not tally.failures, f"{len(tally.failures)} of {tally.cases} cases failed:\n{listed}"
    if target == "requests.seen.index":  # a cache: whatever is wrong with it, the seen file is read instead
        assert {kind for kind, _ in tally.counts} <= {"exact", "n/a"}, tally.counts
        assert tally.counts["exact", "clean"] + tally.counts["exact", "crash"] > 0


def test_each_requeue_record_destroyed(fixtures, tmp_path, quiet_recoveries):
    """HOST, RETRY and REFETCH records of the crash-state requeue fixtures (whose whole journal is read at the
    open), and records a RETRY or REFETCH finished, two of each class (``requeue_records``), destroyed one at a
    time: a refusal, and after repair exactly what the other records hold (the request a destroyed RETRY or
    REFETCH finished is back, the one it made pending is lost, a RETRY or REFETCH whose target is destroyed is
    pending as a PUSH, held back as before)."""
    tally = Tally()
    kinds: Counter = Counter()
    with no_fsync():
        for fixture in fuzzkit.requeue_fixtures(fixtures):
            if fixture.state != "crash":
                continue
            for record in fuzzkit.requeue_records(fixture):
                outcome = fuzzkit.run_record_case(fixture, str(tmp_path), record)
                tally.add(fixture, outcome, record.offset)
                kinds[record.kind, outcome.kind] += 1
    listed = "\n".join(tally.failures[:10])
    assert not tally.failures, f"{len(tally.failures)} of {tally.cases} cases failed:\n{listed}"
    sys.stdout.write(f"\ndestroyed records (type, outcome): {dict(sorted(kinds.items()))}\n")
    assert {outcome for _, outcome in kinds} == {"refused"}, kinds  # the open reads every record of the journal
