"""Seeded damage to Redis crawls (sharded, exact and Bloom), each case checked against the undamaged crawl.

A fixture is a crawl made once (requests pushed, some done, some failed) and kept as the DUMP of every
key of every shard; each case restores it, deletes something (a key, a hash field, a set or sorted-set
member, every key of a shard, seen buckets), and then uses it as a client would:

1. ``verify`` (read only) — is the damage named?
2. open a client, push every URL that was finished or failed (each must be a duplicate), push new URLs
   (each must be queued), pop and finish everything (exactly the pending and new URLs, once each),
   ``finished`` (True).

The outcome is ``named`` (a step raised ``CrawlDamaged`` naming a key of the damaged shard, and verify
was not sound), ``exact`` (every step behaved as on the undamaged crawl) or one of the failures:
``silent`` (a step answered wrong without an error), ``misnamed`` (``CrawlDamaged`` naming another
shard), ``unnamed`` (another ``FrontierError``), ``raw`` (any other exception), ``verify-sound`` (a step
named damage that verify did not see). A crawl of one shard whose every key was deleted is not there
any more: an open (``create=False``, as a client of a crawl that exists) saying so is ``named``.
Then, for a named case, the same damage again, ``verify --repair`` and the same steps: ``whole`` (sound
after repair, and exact), ``recorded`` (verify names a recorded loss, and the steps hand out nothing
finished and nothing twice), ``refused`` (repair raised ``CrawlDamaged``: it cannot rebuild what is lost,
and says so) or ``wrong``.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from damagetally import DamageTally

from diskfrontier import CrawlDamaged, FrontierError, RedisFrontier, Request
from diskfrontier.redisfrontier.verify import verify_crawl

HOSTS = 30
NEW = 12  # URLs pushed after the damage, never seen before


@dataclass
class Fixture:
    """A crawl made once and kept as the DUMP of its keys."""

    crawl: str
    shards: int
    dedupe: str
    dumps: dict[bytes, bytes]
    types: dict[bytes, bytes]
    pending: list[str]
    finished: list[str]  # done or failed: their URLs are seen
    fresh: list[str]

    def tag_of(self, key: bytes) -> str:
        return key.decode().split("{", 1)[1].split("}", 1)[0]


def _url(i: int) -> str:
    return f"https://h{i % HOSTS}.example/{i}"


def crawl_keys(client: Any, crawl: str) -> list[bytes]:
    """Every key of ``crawl``'s shards (their tags: the crawl's name, or the name and '/')."""
    return sorted(key for key in client.scan_iter(match=f"df:[{{]{crawl}[}}/]*", count=1000)
                  if key.decode().split("{", 1)[1].split("}", 1)[0].split("/")[0] == crawl)


def build(url: str, client: Any, crawl: str, *, shards: int, dedupe: str, count: int, done: int,
          failed: int) -> Fixture:
    """Make the crawl (``count`` URLs, ``done`` of them done, ``failed`` failed) and keep its keys."""
    with RedisFrontier(url, crawl=crawl, shards=shards, dedupe=dedupe) as f:
        assert f.push_many(Request(_url(i), priority=i % 3) for i in range(count)) == count
        popped = f.pop_many(done + failed)
        f.done_many(popped[:done])
        for request in popped[done:]:
            f.fail(request, "gone")
    finished = sorted(r.url for r in popped)
    keys = crawl_keys(client, crawl)
    pipe = client.pipeline(transaction=True)
    for key in keys:
        pipe.dump(key)
        pipe.type(key)
    answers = pipe.execute()
    dumps = dict(zip(keys, answers[0::2], strict=True))
    types = dict(zip(keys, answers[1::2], strict=True))
    pending = sorted({_url(i) for i in range(count)} - set(finished))
    return Fixture(crawl, shards, dedupe, dumps, types, pending, finished,
                   [f"https://new{i}.example/{i}" for i in range(NEW)])


def restore(client: Any, fx: Fixture) -> None:
    left = crawl_keys(client, fx.crawl)
    pipe = client.pipeline(transaction=True)
    if left:
        pipe.delete(*left)
    for key, dump in fx.dumps.items():
        pipe.restore(key, 0, dump, replace=True)
    pipe.execute()


# ------------------------------------------------------------------ damage
@dataclass
class Damage:
    kind: str
    what: str
    tags: set[str]
    keys: list[bytes] = field(default_factory=list)  # deleted whole
    field: tuple[bytes, bytes] | None = None  # (hash key, field) deleted
    member: tuple[bytes, bytes] | None = None  # (set or sorted-set key, member) removed
    everything: bool = False  # every key of the crawl: nothing is left to name, and the crawl is not there

    def apply(self, client: Any) -> None:
        if self.keys:
            client.delete(*self.keys)
        if self.field:
            assert client.hdel(*self.field) == 1
        if self.member:
            key, member = self.member
            kind = client.type(key)
            assert (client.srem if kind == b"set" else client.zrem)(key, member) == 1


KINDS = {"key": 30, "meta field": 25, "field": 12, "member": 13, "bucket": 8, "shard": 6, "seen buckets": 6}


def damages(fx: Fixture, client: Any, rng: random.Random, count: int) -> list[Damage]:
    """``count`` damages drawn with ``KINDS``' weights (the fixture restored, to read what there is)."""
    restore(client, fx)
    keys = sorted(fx.dumps)
    bucket_keys = [k for k in keys if b":k:" in k or b":b:" in k]
    metas = [k for k in keys if k.endswith(b":meta")]
    hashes = [k for k in keys if fx.types[k] == b"hash" and not k.endswith(b":meta")]
    members = [k for k in keys if fx.types[k] in (b"set", b"zset")]
    tags = sorted({fx.tag_of(k) for k in keys})
    out = []
    kinds = list(KINDS)
    for _ in range(count):
        kind = rng.choices(kinds, weights=[KINDS[k] for k in kinds])[0]
        if kind == "key":
            key = rng.choice(keys)
            out.append(Damage(kind, f"DEL {key.decode()}", {fx.tag_of(key)}, keys=[key]))
        elif kind == "bucket":
            key = rng.choice(bucket_keys)
            out.append(Damage(kind, f"DEL {key.decode()}", {fx.tag_of(key)}, keys=[key]))
        elif kind in ("meta field", "field"):
            key = rng.choice(metas if kind == "meta field" else hashes)
            name = rng.choice(sorted(client.hkeys(key)))
            out.append(Damage(kind, f"HDEL {key.decode()} {name.decode(errors='replace')}", {fx.tag_of(key)},
                              field=(key, name)))
        elif kind == "member":
            key = rng.choice(members)
            kind_of = fx.types[key]
            every = sorted(client.smembers(key)) if kind_of == b"set" else client.zrange(key, 0, -1)
            member = rng.choice(every)
            out.append(Damage(kind, f"{'SREM' if kind_of == b'set' else 'ZREM'} {key.decode()} "
                                    f"{member.decode(errors='replace')}", {fx.tag_of(key)}, member=(key, member)))
        elif kind == "shard":
            tag = rng.choice(tags)
            gone = [k for k in keys if fx.tag_of(k) == tag]
            out.append(Damage(kind, f"DEL every key of df:{{{tag}}}: ({len(gone)} keys)", {tag}, keys=gone,
                              everything=len(gone) == len(keys)))
        else:
            tag = rng.choice([*tags, "*"])
            gone = [k for k in bucket_keys if tag == "*" or fx.tag_of(k) == tag]
            out.append(Damage(kind, f"DEL the seen buckets of {'every shard' if tag == '*' else f'df:{{{tag}}}:'} "
                                    f"({len(gone)} keys)", set(tags) if tag == "*" else {tag}, keys=gone))
    return out


# ------------------------------------------------------------------ one case
class Wrong(Exception):
    """A step answered differently from the undamaged crawl."""


def _steps(url: str, fx: Fixture, *, after_repair: bool = False) -> dict[str, Any]:
    """Open, push the finished and the new URLs, drain, ``finished``; raises ``Wrong`` on the first wrong
    answer. Returns what was seen (for the checks after a repair, which may have lost things)."""
    seen: dict[str, Any] = {"accepted": [], "handed": []}
    with RedisFrontier(url, crawl=fx.crawl, create=False) as f:
        answers = f.push_each([Request(u) for u in fx.finished])
        seen["accepted"] = [u for u, a in zip(fx.finished, answers, strict=True) if a]
        if seen["accepted"] and not after_repair:
            raise Wrong(f"a finished URL was accepted again: {seen['accepted'][0]}")
        refused = [u for u, a in zip(fx.fresh, f.push_each([Request(u) for u in fx.fresh]), strict=True) if not a]
        if refused:
            raise Wrong(f"a new URL was refused as seen: {refused[0]}")
        handed: list[str] = seen["handed"]
        while got := f.pop_many(100):
            handed += [r.url for r in got]
            f.done_many(got)
        if not f.finished:
            raise Wrong("the crawl is not finished after every request was handed out")
    counts = Counter(handed)
    twice = [u for u, n in counts.items() if n > 1]
    if twice:
        raise Wrong(f"handed out twice: {twice[0]}")
    expected = set(fx.pending) | set(fx.fresh)
    extra = set(handed) - expected - set(seen["accepted"])
    if extra:
        raise Wrong(f"handed out what was not pending: {sorted(extra)[0]}")
    missing = expected - set(handed)
    if missing and not after_repair:
        raise Wrong(f"{len(missing)} pending requests were not handed out (e.g. {sorted(missing)[0]})")
    seen["missing"] = missing
    return seen


def _named(exc: BaseException, damage: Damage) -> bool:
    return any(f"df:{{{tag}}}:" in str(exc) for tag in damage.tags)


def run_case(url: str, client: Any, fx: Fixture, damage: Damage) -> tuple[str, str, str]:
    """(outcome, repair outcome or '', detail) of one case."""
    restore(client, fx)
    damage.apply(client)
    try:
        verified = verify_crawl(url, fx.crawl)
        verify_named = not verified.sound
    except CrawlDamaged:
        verify_named = True
    except FrontierError as exc:  # "there is no crawl": only when nothing of it is left
        verify_named = "there is no crawl" not in str(exc)
    try:
        _steps(url, fx)
    except CrawlDamaged as exc:
        if not _named(exc, damage):
            return "misnamed", "", str(exc)[:300]
        if not verify_named:
            return "verify-sound", "", str(exc)[:300]
        return "named", _repair(url, client, fx, damage), str(exc)[:200]
    except Wrong as exc:
        return "silent", "", str(exc)
    except FrontierError as exc:
        if damage.everything and "there is no crawl" in str(exc):
            return "named", "", str(exc)[:200]  # (its clients' next steps say its keys are gone)
        return "unnamed", "", str(exc)[:300]
    except Exception as exc:  # any other exception is what the campaign looks for
        return "raw", "", f"{type(exc).__name__}: {exc}"[:300]
    return "exact", "", "verify named it" if verify_named else ""


def _repair(url: str, client: Any, fx: Fixture, damage: Damage) -> str:
    """The same damage to the fixture again, ``verify --repair``, then the steps: whole, recorded, refused or
    wrong (with what)."""
    restore(client, fx)
    damage.apply(client)
    try:
        verify_crawl(url, fx.crawl, repair=True)
    except CrawlDamaged as exc:
        return f"refused: {exc}"[:300]
    after = verify_crawl(url, fx.crawl)
    recorded = any("could not bring back" in x.problem for x in after.findings)
    if not after.sound and not recorded:
        return f"wrong: not sound after repair and no loss recorded: {after.findings[0]}"
    try:
        seen = _steps(url, fx, after_repair=True)
    except (Wrong, FrontierError) as exc:
        return f"wrong: {exc}"[:300]
    if not recorded and (seen["accepted"] or seen["missing"]):
        return "wrong: sound after repair, yet it lost pending requests or seen URLs"
    return "recorded" if recorded else "whole"


def Tally() -> DamageTally:  # noqa: N802 - what the campaign's test makes, as a class would be
    """A tally of this campaign's outcomes."""
    return DamageTally(("named", "exact"),
                       ("named", "exact", "silent", "misnamed", "unnamed", "raw", "verify-sound"),
                       ())
