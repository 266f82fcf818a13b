"""Shards of one Redis crawl: which hash tag holds which request, and which shards a pop looks at.

A crawl made with ``shards=N`` keeps its keys under N hash tags. Shard 0 is the crawl's own tag
(``df:{NAME}:``), so a crawl of one shard is laid out as before shards existed; shard i > 0 is
``df:{NAME/i.k}:``, where ``k`` is the first counter from 0 that puts the tag's cluster slot in
the i-th of N equal slot ranges counted on from shard 0's (``redis-cli --cluster create`` gives
its masters equal ranges, so N shards of a crawl land on N masters when there are N of them).
No crawl name holds ``/``, so a shard's tag is never a crawl's. A request lives on the shard its
slot (the politeness key) hashes to, with its host's state, its leases and its fingerprint, so
each step of a request still runs as one script on one slot. See docs/format.md, "Redis".
"""

from __future__ import annotations

import binascii
import functools
import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

CLUSTER_SLOTS = 16384
MAX_SHARDS = 1024


def key_slot(tag: str) -> int:
    """The Redis Cluster slot of a key whose hash tag is ``tag`` (CRC16/XMODEM of it, mod 16384)."""
    return binascii.crc_hqx(tag.encode(), 0) % CLUSTER_SLOTS


def check_shards(shards: object) -> int | None:
    """``shards`` if it is None or a valid number of shards, else ``ValueError``."""
    if shards is None:
        return None
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"shards must be a whole number from 1 to {MAX_SHARDS}, got {shards!r}")
    return shards


def shard_tags(crawl: str, count: int) -> list[str]:
    """The hash tags of the ``count`` shards of crawl ``crawl`` (shard 0's is ``crawl``)."""
    first = key_slot(crawl) * count // CLUSTER_SLOTS  # the slot range shard 0 fell in
    tags = [crawl]
    for index in range(1, count):
        wanted = (first + index) % count
        k = 0
        while key_slot(f"{crawl}/{index}.{k}") * count // CLUSTER_SLOTS != wanted:
            k += 1
        tags.append(f"{crawl}/{index}.{k}")
    return tags


@functools.lru_cache(maxsize=64)
def second_shard_tags(crawl: str) -> tuple[str, ...]:
    """Every tag shard 1 of ``crawl`` can have, whatever its number of shards (a few dozen at most, found as
    ``shard_tags`` finds each): where to look for the rest of a crawl whose shard 0 is gone entirely."""
    first = key_slot(crawl)
    slots: list[int] = []
    found: dict[int, None] = {}
    for count in range(2, MAX_SHARDS + 1):
        wanted = (first * count // CLUSTER_SLOTS + 1) % count
        k = 0
        while True:
            if k == len(slots):
                slots.append(key_slot(f"{crawl}/1.{k}"))
            if slots[k] * count // CLUSTER_SLOTS == wanted:
                break
            k += 1
        found[k] = None
    return tuple(f"{crawl}/1.{k}" for k in found)


def is_shard_tag(tag: str) -> bool:
    """True if ``tag`` is the hash tag of a crawl's shard i > 0 (not a crawl's own)."""
    return "/" in tag


@dataclass(frozen=True)
class Shard:
    """One shard of a crawl: its number, hash tag and key names."""

    index: int
    tag: str

    @property
    def prefix(self) -> str:
        """What every key of the shard begins with."""
        return f"df:{{{self.tag}}}:"

    @property
    def meta(self) -> str:
        """The shard's ``meta`` hash: the key each of its scripts is given (and routed by)."""
        return self.prefix + "meta"


class Router:
    """Which shard a request's slot lives on, and the order in which a pop of one client asks the shards.

    A slot's shard is the CRC32 of its UTF-8 bytes mod N: the same in every process and version.
    A pop reads the best ready request of every shard (one pipelined round trip) and asks the shards in
    the order of those requests (the crawl's order: priority, or with ``prefer="idle"`` the host's leases
    first); shards whose best are equal, or that have nothing ready, go in this client's rotation order,
    which starts one shard further at each pop (from a random shard). See ``fanout.py``.
    """

    def __init__(self, shards: Sequence[Shard], seed: int | None = None) -> None:
        self.shards = list(shards)
        self.count = len(self.shards)
        self._turn = random.Random(seed).randrange(self.count)  # noqa: S311 (spreads clients; nothing secret)

    def of_slot(self, slot: str) -> int:
        """The shard that holds the requests, state and leases of ``slot``."""
        if self.count == 1:
            return 0
        return zlib.crc32(slot.encode("utf-8", "surrogatepass")) % self.count

    def order(self, heads: Sequence[float | None]) -> list[int]:
        """The shards in the order the next pop asks them, from the score of each one's best ready request
        (lower first; None: nothing ready, last); ties go in rotation order, which then moves on by one."""
        start = self._turn
        self._turn = (start + 1) % self.count

        def rank(index: int) -> tuple[bool, float, int]:
            head = heads[index]
            return head is None, 0.0 if head is None else head, (index - start) % self.count

        return sorted(range(self.count), key=rank)
