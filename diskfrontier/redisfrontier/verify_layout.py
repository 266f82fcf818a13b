"""``verify`` of a Redis crawl as a whole (``verify.py`` checks each shard's keys): how many shards it has
and under which tags, as shard 0's meta and sentinel tell it (``wholeness.shard_layout``), and each shard
whose meta is gone: lost whole, or its meta alone. Shard 0's meta gone is named too (its settings cannot
be rebuilt).

Repair: a shard lost whole is made again, empty, and its loss recorded (``lost_shard``); a shard whose meta
alone went gets one with the crawl's settings, its seen set placed again by the buckets it has (the
indexes and counts are then rebuilt as for any shard); shard 0's ``shards``, ``tags`` and ``v`` are
written again from the evidence, and every shard is sealed (its sentinel of its place).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import CrawlDamaged, FrontierError
from . import lua
from .connection import node_client, shown_url, talking
from .opening import READABLE, format_of, shard_open_args
from .reading import glob_escape
from .shards import Shard
from .wholeness import ShardLayout, second_shard_tags, sentinel_value, shard_layout


@dataclass
class Said:
    """What the checks here found (key, problem) and what they note."""

    findings: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_layout(client: Any, url: str, crawl: str, said: Said, repair: bool) -> ShardLayout | None:
    """The shards of ``crawl`` as shard 0 names them, each disagreement a finding; None (with a finding) if
    shard 0's meta is gone while keys of the crawl are there. ``FrontierError`` if there is no crawl."""
    meta, sentinel_key = f"df:{{{crawl}}}:meta", f"df:{{{crawl}}}:sentinel"
    node = node_client(client, meta)
    with talking(url, "verify"):
        pipe = node.pipeline(transaction=True)
        pipe.type(meta)
        pipe.get(sentinel_key)
        kind, sentinel = pipe.execute()
        fields = node.hgetall(meta) if kind == b"hash" else {}
    if kind == b"none":
        _meta_gone(client, node, url, crawl, said, repair)
        return None
    if kind != b"hash":
        return ShardLayout(1, [crawl], True)  # the check of shard 0 names it (verify cannot rebuild it)
    found = shard_layout(crawl, {name.decode(errors="replace"): value for name, value in fields.items()}, sentinel)
    said.findings += found.problems
    return found


def _meta_gone(client: Any, node: Any, url: str, crawl: str, said: Said, repair: bool) -> None:
    """Shard 0's meta is gone: a finding if anything of the crawl is left, else there is no crawl."""
    meta = f"df:{{{crawl}}}:meta"
    with talking(url, "verify"):
        left = sum(1 for _ in node.scan_iter(match=glob_escape(f"df:{{{crawl}}}:") + "*", count=1000))
        pipe = client.pipeline(transaction=False)
        tags = second_shard_tags(crawl)
        for tag in tags:
            pipe.hget(f"df:{{{tag}}}:meta", "crawl")
        others = [tag for tag, owner in zip(tags, pipe.execute(), strict=True) if owner == crawl.encode()]
    if not left and not others:
        raise FrontierError(f"there is no crawl {crawl!r} in Redis at {shown_url(url)} (no key {meta})")
    where = f"{left} other keys of the crawl are there" if left else ""
    if others:
        where += (" and " if where else "") + f"its shard 1 (df:{{{others[0]}}}:) is there"
    problem = (f"is gone while {where}: the settings, counters and shards of crawl {crawl!r} were deleted or "
               f"evicted, and verify cannot rebuild them")
    if repair:
        raise CrawlDamaged(meta, problem, hint="copy out what is left by hand, or delete the crawl's keys")
    said.findings.append((meta, problem))


def shard_missing(client: Any, url: str, crawl: str, shard: Shard, layout: ShardLayout, said: Said,
                  repair: bool) -> bool:
    """Look at shard ``shard`` (i > 0) whose meta may be gone. Returns True if it is gone and nothing more is to
    be checked in it (lost whole, or not made yet), False to check its keys (its meta is there, or repair
    made one again for the keys it has)."""
    node = node_client(client, shard.meta)
    with talking(url, "verify"):
        if node.exists(shard.meta):
            return False
        left = list(node.scan_iter(match=glob_escape(shard.prefix) + "*", count=1000))
    if not layout.sealed and not left:
        said.notes.append(f"shard {shard.index} of crawl {crawl!r} ({shard.prefix}) is not made yet: the client that "
                          f"made the crawl stopped before it; the next open makes it")
        if repair:
            _make(client, url, crawl, shard, layout)
        return True
    if not left:
        said.findings.append((shard.meta, f"shard {shard.index} of crawl {crawl!r} is gone: its keys were deleted or "
                                          f"evicted, with the requests of its hosts (how many is unknown: its counters "
                                          f"went with it) and their seen fingerprints"))
        if repair:
            _make(client, url, crawl, shard, layout)
            with talking(url, "verify --repair"):
                node.hset(shard.meta, "lost_shard", str(int(time.time())))
            said.notes.append(f"{shard.meta}: cannot be rebuilt: shard {shard.index} was lost whole, with the requests "
                              f"of its hosts and their seen fingerprints (the URLs of its hosts may be fetched again); "
                              f"made again empty, the loss recorded in field lost_shard, named by every verify from "
                              f"now on")
        return True
    said.findings.append((shard.meta, f"is gone while {len(left)} other keys of shard {shard.index} are there: its "
                                      f"settings and counters were deleted or evicted"))
    if not repair:
        return True
    _make_for(client, url, crawl, shard, layout, left, said)
    return False


def _first_answer(client: Any, url: str, crawl: str) -> list[Any]:
    """Shard 0's OPEN answer (its settings), as a client's open reads them."""
    meta = f"df:{{{crawl}}}:meta"
    script = node_client(client, meta).register_script(lua.OPEN)
    with talking(url, "verify --repair"):
        answer = script(keys=[meta], args=[" ".join(READABLE), "", "", "", "", "", "open", "lifo", "", ""])
    if answer[0] != 1:
        raise FrontierError(f"verify --repair: the meta of crawl {crawl!r} at {shown_url(url)} cannot be read as this "
                            f"version's (OPEN answered {answer[:2]!r})")
    return list(answer)


def _make(client: Any, url: str, crawl: str, shard: Shard, layout: ShardLayout) -> list[Any]:
    """Make shard ``shard`` anew with the crawl's settings (the OPEN a client's open would send)."""
    first = _first_answer(client, url, crawl)
    script = node_client(client, shard.meta).register_script(lua.OPEN)
    with talking(url, "verify --repair"):
        return list(script(keys=[shard.meta], args=shard_open_args(crawl, shard, first, layout.count, create=True)))


def _make_for(client: Any, url: str, crawl: str, shard: Shard, layout: ShardLayout, left: list[bytes],
              said: Said) -> None:
    """A meta for shard ``shard``, whose other keys (``left``) are there: the crawl's settings, and the state of
    its seen set from the buckets it has (``set64``: as many as the highest one's number says; the filters
    of a Bloom seen set cannot be read without their settings: they are set aside, and their loss
    recorded). Its indexes and counts are then rebuilt by the check of its keys."""
    suffixes = [key[len(shard.prefix.encode()):] for key in left]
    node = node_client(client, shard.meta)
    with talking(url, "verify --repair"):
        node.delete(shard.prefix + "sentinel")  # made again with the meta (OPEN makes no crawl beside one)
        answer = _make(client, url, crawl, shard, layout)
        if answer[12] == b"set64":
            numbers = [int(s[2:], 16) for s in suffixes if s.startswith(b"k:") and _is_hex(s[2:])]
            buckets = max(numbers, default=0) + 1
            level = buckets.bit_length() - 1
            node.hset(shard.meta, mapping={"seen_level": level, "seen_split": buckets - 2 ** level})
        elif answer[12] == b"bloom":
            parts = [s for s in suffixes if s.startswith(b"b:")]
            bits = sum(node.bitcount(shard.prefix.encode() + s) for s in parts)
            for suffix in parts:
                node.rename(shard.prefix.encode() + suffix, shard.prefix.encode() + b"bad:" + suffix)
            if parts:
                node.hset(shard.meta, "lost_seen", max(1, bits // 64))  # an add sets at most 64 bits
                said.notes.append(f"{shard.meta}: cannot be rebuilt: the Bloom filters of shard {shard.index} (at "
                                  f"least {max(1, bits // 64)} seen fingerprints) cannot be read without their "
                                  f"settings: set aside as {shard.prefix}bad:b:*, the loss recorded in field "
                                  f"lost_seen")
    said.notes.append(f"{shard.meta}: made again with the crawl's settings; its counters of what is no longer stored "
                      f"(done, pushed, duplicates, ...) are lost")


def _is_hex(text: bytes) -> bool:
    return bool(text) and all(c in b"0123456789abcdef" for c in text)


def mend_layout(client: Any, url: str, crawl: str, layout: ShardLayout, said: Said) -> None:
    """Repair: write shard 0's ``shards``, ``tags`` and ``v`` again as the evidence says (``layout``), then
    seal every shard (shard 0 last), if any of it disagreed or the crawl was not sealed."""
    if not layout.problems and layout.sealed:
        return
    meta = f"df:{{{crawl}}}:meta"
    node = node_client(client, meta)
    with talking(url, "verify --repair"):
        seen_layout = node.hget(meta, "seen_layout")
        pipe = node.pipeline(transaction=True)
        pipe.hset(meta, "v", format_of((seen_layout or b"hash").decode(), layout.count))
        if layout.count > 1:
            pipe.hset(meta, mapping={"shards": layout.count, "tags": ",".join(layout.tags[1:])})
        else:
            pipe.hdel(meta, "shards", "tags")
        pipe.execute()
        for index in [*range(1, layout.count), 0]:
            shard = Shard(index, layout.tags[index])
            shard_node = node_client(client, shard.meta)
            value = sentinel_value(index, layout.count)
            shard_node.set(shard.prefix + "sentinel", value)
            shard_node.hset(shard.meta, "sentinel", 1)
    if layout.problems:
        said.notes.append(f"{meta}: its shard count, tags and format written again ({layout.count} shard"
                          f"{'s' if layout.count > 1 else ''}), every shard's sentinel made again")


__all__ = ["Said", "check_layout", "mend_layout", "shard_missing"]
