"""Seeded damage to Redis crawls of several shards, exact and Bloom: a key, a hash field or a set member
deleted, every key of a shard, one or all seen buckets (``redisdamage.py``). Every case must be named
(``CrawlDamaged`` naming the damaged shard, and verify not sound) or behave exactly as the undamaged crawl
(no finished URL accepted, every pending request handed out once): none silent. A named case is then
repaired: after ``verify --repair`` the crawl is sound and whole, or verify names the loss it recorded.

``DISKFRONTIER_FUZZ_CASES=1000`` runs about that many cases instead of the default (~360); ``pytest -s``
prints the tallies. Crawls of the ``hash`` seen layout (made before format 2) are not in it: their
buckets are not mapped, so a lost one is named by verify's count only (docs/format.md, "Whole").
"""

from __future__ import annotations

import os
import random
import sys

import pytest
import redisdamage
from damagetally import DamageTally
from redisserver import RedisServer

pytestmark = pytest.mark.slow

FIXTURES = {  # name: (shards, dedupe, URLs, done, failed)
    "f3x": (3, "exact", 900, 60, 3),
    "f1x": (1, "exact", 600, 40, 3),
    "f2b": (2, "bloom", 400, 30, 3),
}
DEFAULT_CASES = 120  # per fixture


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = RedisServer(str(tmp_path_factory.mktemp("fuzz-redis")), aof=False)
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_damage_to_a_crawl_is_named_or_changes_nothing(server, name):
    client = server.client()
    shards, dedupe, count, done, failed = FIXTURES[name]
    fx = redisdamage.build(server.url, client, name, shards=shards, dedupe=dedupe, count=count, done=done,
                           failed=failed)
    cases = max(20, int(os.environ.get("DISKFRONTIER_FUZZ_CASES", DEFAULT_CASES * len(FIXTURES))) // len(FIXTURES))
    rng = random.Random(f"redis-damage-{name}")
    tally = redisdamage.Tally()
    by_kind: dict[str, DamageTally] = {}
    for damage in redisdamage.damages(fx, client, rng, cases):
        outcome, repair, detail = redisdamage.run_case(server.url, client, fx, damage)
        tally.add(f"{fx.crawl} {damage.what}", outcome, repair, detail)
        by_kind.setdefault(damage.kind, redisdamage.Tally()).add(f"{fx.crawl} {damage.what}", outcome, repair, detail)
    lines = [tally.line(f"{name} ({shards} shards, {dedupe})"), *(t.line(f"  {kind}") for kind, t in
                                                                   sorted(by_kind.items()))]
    sys.stdout.write("\n" + "\n".join(lines) + "\n")
    assert tally.failures == [], "\n".join(tally.failures[:20])
    assert tally.outcomes["silent"] == 0 and tally.outcomes["named"] > cases // 3
