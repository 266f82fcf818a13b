"""What proves that a Redis crawl is all there: each shard's sentinel, shard 0's count and tags of the
shards, the seen buckets that must exist, and the losses ``verify --repair`` recorded. Read by the open
(``opening.py``) and by ``verify`` alike; see docs/format.md, "Redis", "Whole".

* The ``sentinel`` key of a shard holds ``1`` in a crawl of one shard, and ``i/N`` in shard i of a crawl
  of N shards. Shard 0's is made (``SEAL``) only once every shard of the crawl is there, so a shard
  missing from a crawl whose shard 0 says ``0/N`` was lost, not left unmade by a maker that stopped;
  and a shard 0 that lost its ``shards`` field still says how many shards there are.
* Bit n of a shard's ``seen_map`` is set while its seen bucket n (``set64``), or part n of its Bloom
  filters counted one filter after the other, holds something: such a bucket missing was evicted or
  deleted.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from .shards import MAX_SHARDS, shard_tags

BLOOM_PART = 2**23  # the scripts' BLOOM_PART: bits in one part of a Bloom filter, at most
_SHARD_SENTINEL = re.compile(rb"(\d+)/(\d+)\Z")
LOSS_FIELDS = ("lost_seen", "lost_requests", "lost_shard")  # what verify --repair records in a shard's meta


def sentinel_value(index: int, count: int) -> str:
    """The value of the sentinel of shard ``index`` of a crawl of ``count`` shards."""
    return "1" if count == 1 else f"{index}/{count}"


def parse_sentinel(value: bytes | None) -> tuple[int, int] | None:
    """(index, count) that a shard's sentinel names; None for ``1`` (a crawl of one shard, or one made before
    sentinels named their shard), a missing sentinel or any other value."""
    found = _SHARD_SENTINEL.match(value or b"")
    return (int(found.group(1)), int(found.group(2))) if found else None


@functools.lru_cache(maxsize=64)
def tags_of(crawl: str, count: int) -> tuple[str, ...]:
    """``shard_tags`` (a crawl of 1,024 shards costs a fifth of a second: asked once)."""
    return tuple(shard_tags(crawl, count))


@dataclass
class ShardLayout:
    """How many shards a crawl has and under which tags, as shard 0 tells it; ``sealed``: its sentinel says
    every shard was made; ``problems``: (key, problem) of each piece of evidence that disagrees."""

    count: int
    tags: list[str]
    sealed: bool
    problems: list[tuple[str, str]] = field(default_factory=list)


def shard_layout(crawl: str, meta: Mapping[str, bytes | None], sentinel: bytes | None) -> ShardLayout:
    """The shards of ``crawl`` from shard 0's ``meta`` fields (``shards``, ``tags``, ``v``, ``sentinel``) and
    the value of its ``sentinel`` key. Where they disagree, the count is the largest any of them names (so
    that no shard goes unlooked at), and each disagreement is a problem."""
    key = f"df:{{{crawl}}}:meta"
    problems: list[tuple[str, str]] = []
    named = parse_sentinel(sentinel)
    raw = meta.get("shards")
    counted: int | None = None
    if raw is not None:
        counted = int(raw) if raw.isdigit() and 1 <= int(raw) <= MAX_SHARDS else None
        if counted is None:
            problems.append((key, f"field shards is {raw[:60]!r}, not a number of shards from 1 to {MAX_SHARDS}"))
    listed = meta.get("tags")
    tag_list = listed.decode("utf-8", "replace").split(",") if listed else []
    version = meta.get("v") or b""
    several = version.endswith(b"s")
    count = max(counted or 1, named[1] if named else 1, len(tag_list) + 1 if tag_list else 1, 2 if several else 1)
    count = min(count, MAX_SHARDS)
    if named is not None and (named[0] != 0 or named[1] != (counted or 1)):
        if named[0] != 0:
            problems.append((f"df:{{{crawl}}}:sentinel", f"is {sentinel!r}: the sentinel of shard {named[0]}, not of "
                                                        f"shard 0"))
        elif raw is None:
            problems.append((key, f"field shards is missing, while its sentinel says the crawl has {named[1]} shards "
                                  f"(the crawl would open as one of shard 0 alone)"))
        else:
            problems.append((key, f"field shards is {raw!r}, while its sentinel says the crawl has {named[1]} shards"))
    if version and (several != (count > 1) or (several and counted is None and named is None)):
        if raw is None and several:
            problems.append((key, f"field shards is missing, while field v is {version.decode(errors='replace')!r} "
                                  f"(a crawl of several shards)"))
        elif not several:
            problems.append((key, f"field v is {version.decode(errors='replace')!r} (a crawl of one shard), while the "
                                  f"crawl has {count} shards"))
    tags = list(tags_of(crawl, count))
    if count > 1 and tag_list != tags[1:]:
        shown = "missing" if not listed else repr(listed[:120])
        problems.append((key, f"field tags is {shown}, not the tags of the crawl's {count} shards"))
    elif count == 1 and listed:
        problems.append((key, f"field tags names shards ({listed[:120]!r}), while the crawl has one"))
    if sentinel is None and meta.get("sentinel") is not None:
        problems.append((f"df:{{{crawl}}}:sentinel", "is gone: Redis evicted keys of the crawl or something deleted "
                                                     "them"))
    elif sentinel is not None and sentinel != b"1" and named is None:
        problems.append((f"df:{{{crawl}}}:sentinel", f"is {sentinel[:60]!r}, not a sentinel diskfrontier made"))
    sealed = named is not None or count == 1
    return ShardLayout(count, tags, sealed, problems)


# ------------------------------------------------------------------ the seen set
def has_bit(bitmap: bytes, number: int) -> bool:
    """True if bit ``number`` of ``bitmap`` (a Redis string, as SETBIT numbers its bits) is set."""
    at = number >> 3
    return at < len(bitmap) and bool(bitmap[at] >> (7 - (number & 7)) & 1)


def bitmap_of(numbers: list[int]) -> bytes:
    """The Redis string with bits ``numbers`` set (as SETBIT would leave it)."""
    out = bytearray((max(numbers, default=-1) >> 3) + 1 if numbers else 0)
    for number in numbers:
        out[number >> 3] |= 1 << (7 - (number & 7))
    return bytes(out)


def bloom_parts(bits: int) -> int:
    """How many parts a Bloom filter of ``bits`` bits is split in."""
    return -(-bits // BLOOM_PART)


def bloom_filter_settings(rate: float, index: int) -> str:
    """The settings (``capacity bits hashes``) of filter ``index`` (from 1) of a Bloom seen set of error rate
    ``rate``, as the scripts' ``bloom_grow`` makes them (the same operations on the same doubles)."""
    capacity = 100000 * 2.0 ** (index - 1)
    p = rate * (1 - 0.8) * 0.8 ** (index - 1)
    bits = math.ceil(capacity * -math.log(p) / (math.log(2) ** 2))
    hashes = max(1, math.floor(-math.log(p) / math.log(2) + 0.5))
    return f"{int(capacity)} {bits} {hashes}"


def bloom_rate_of(settings: bytes) -> float:
    """The error rate a first filter's ``settings`` were made for, nearly (its bits per fingerprint give it
    back but for rounding): for a crawl whose ``bloom_rate`` was lost, the rate of its next filters."""
    capacity, bits, _ = (int(x) for x in settings.split())
    return math.exp(-bits * math.log(2) ** 2 / capacity) / (1 - 0.8)


def losses(meta: Mapping[str, bytes | None]) -> list[str]:
    """What a shard's meta records as lost for good (by ``verify --repair``), as sentences."""
    out = []
    shard = meta.get("lost_shard")
    if shard is not None:
        when = shard.decode(errors="replace")
        if shard.isdigit():
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(int(shard)))
        out.append(f"this shard was lost and made again empty by verify --repair (at {when}, the server's clock): "
                   f"the requests of its hosts are lost (how many is unknown: its counters went "
                   f"with it), and with its seen set the URLs of its hosts may be fetched again")
    for name, what in (("lost_requests", "requests (pending, leased or failed) counted by the crawl were not stored "
                                         "and are lost"),
                       ("lost_seen", "seen fingerprints are lost: the URLs they stand for may be fetched again")):
        value = meta.get(name)
        if value is not None:
            out.append(f"at least {value.decode(errors='replace')} {what}")
    return out
