"""Seeded damage to a PostgreSQL crawl, done the way someone with SQL access can (``pgdamage.py``): a row
deleted, a column changed or a row copied from another crawl in each table, a table truncated or dropped, a
function dropped or replaced, the format row changed, a sequence set back, the schema renamed. Every case
must be named (a project error naming the damage, and verify not sound), behave exactly as the undamaged
crawl, or be named by verify (the steps cannot see it: a row deleted that a count still counts, a seen key
gone); a value a client writes as it likes (``pgdamage.FREE``) changed to another is tallied apart: no check
can tell it. None silent, none raw. A named case is then repaired: after ``verify --repair`` the crawl is sound and
whole, or the repair says what it could not bring back (or that it left the crawl as it was, and verify
still names it).

``DISKFRONTIER_FUZZ_CASES=600`` runs about that many cases instead of the default; ``pytest -s`` prints the
tallies.
"""

from __future__ import annotations

import random
import sys

import pgdamage
import pytest
from damagetally import DamageTally

pytestmark = pytest.mark.slow

FIXTURES = {"pl": "lifo", "pf": "fifo"}  # name: order
DEFAULT_CASES = 50  # per fixture


@pytest.fixture
def conn(postgres_url):
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as connection:
        yield connection


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_damage_to_a_crawl_is_named_or_changes_nothing(postgres_url, conn, name):
    fx = pgdamage.build(postgres_url, conn, name, FIXTURES[name])
    cases = pgdamage.cases_wanted(DEFAULT_CASES, len(FIXTURES))
    rng = random.Random(f"pg-damage-{name}")
    tally = pgdamage.Tally()
    by_kind: dict[str, DamageTally] = {}
    for damage in pgdamage.damages(fx, conn, rng, cases):
        outcome, repair, detail = pgdamage.run_case(postgres_url, conn, fx, damage)
        tally.add(f"{fx.name} {damage.what}", outcome, repair, detail)
        by_kind.setdefault(damage.kind, pgdamage.Tally()).add(f"{fx.name} {damage.what}", outcome, repair, detail)
    lines = [tally.line(f"{name} ({FIXTURES[name]})"), *(t.line(f"  {kind}") for kind, t in sorted(by_kind.items()))]
    sys.stdout.write("\n" + "\n".join(lines) + "\n")
    assert tally.failures == [], "\n".join(tally.failures[:30])
    assert tally.outcomes["silent"] == tally.outcomes["raw"] == tally.outcomes["verify-sound"] == 0
    assert tally.repairs["wrong"] == 0
    assert tally.outcomes["named"] + tally.outcomes["verify-named"] > cases // 4
