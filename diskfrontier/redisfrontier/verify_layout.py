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

from dataclasses import dataclass, field
from typing import Any

from ..core.errors import CrawlDamaged, FrontierError
from . import lua
from .connection import node_client, shown_url, talking
from .opening import READABLE, format_of, shard_open_args
from .reading import glob_escape
from .shards import Shard, second_shard_tags
from .verify_meta import order_from_ids
from .wholeness import ShardLayout, parse_sentinel, sentinel_value, shard_layout, tags_of

_LOST_WHOLE = ("{meta}: cannot be rebuilt: shard {index} was lost whole, with the requests of its hosts and their "
               "seen fingerprints (the URLs of its hosts may be fetched again); made again empty, the loss recorded "
               "in field lost_shard, named by every verify from now on")


@dataclass
class Said:
    """What the checks here found (key, problem) and what they note."""

    findings: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_layout(client: Any, url: str, crawl: str, said: Said, repair: bool) -> ShardLayout | None:
    """The shards of ``crawl`` as shard 0 names them, each disagreement a finding; None (with a finding) if
    shard 0's meta is gone while keys of the crawl are there (repair makes it again where it can: then
    the layout it made). ``FrontierError`` if there is no crawl."""
    meta, sentinel_key = f"df:{{{crawl}}}:meta", f"df:{{{crawl}}}:sentinel"
    node = node_client(client, meta)
    with talking(url, "verify"):
        pipe = node.pipeline(transaction=True)
        pipe.type(meta)
        pipe.get(sentinel_key)
        kind, sentinel = pipe.execute()
        fields = node.hgetall(meta) if kind == b"hash" else {}
    if kind == b"none":
        if not _meta_gone(client, node, url, crawl, said, repair):
            return None
        return check_layout(client, url, crawl, Said(), False)
    if kind != b"hash":
        return ShardLayout(1, [crawl], True)  # the check of shard 0 names it (verify cannot rebuild it)
    found = shard_layout(crawl, {name.decode(errors="replace"): value for name, value in fields.items()}, sentinel)
    said.findings += found.problems
    return found


def _meta_gone(client: Any, node: Any, url: str, crawl: str, said: Said, repair: bool) -> bool:
    """Shard 0's meta is gone: a finding if anything of the crawl is left, else there is no crawl. With
    ``repair``, the meta is made again (True) if what is left says how: shard 1's settings and sentinel
    (the number of shards), or shard 0's own keys (its seen set's layout); ``CrawlDamaged`` if not."""
    meta = f"df:{{{crawl}}}:meta"
    prefix = f"df:{{{crawl}}}:"
    with talking(url, "verify"):
        left = [key[len(prefix):] for key in node.scan_iter(match=glob_escape(prefix) + "*", count=1000)]
        pipe = client.pipeline(transaction=False)
        tags = second_shard_tags(crawl)
        for tag in tags:
            pipe.hget(f"df:{{{tag}}}:meta", "crawl")
        others = [tag for tag, owner in zip(tags, pipe.execute(), strict=True) if owner == crawl.encode()]
    if not left and not others:
        raise FrontierError(f"there is no crawl {crawl!r} in Redis at {shown_url(url)} (no key {meta})")
    where = f"{len(left)} other keys of the crawl are there" if left else ""
    if others:
        where += (" and " if where else "") + f"its shard 1 (df:{{{others[0]}}}:) is there"
    problem = f"is gone while {where}: the settings, counters and shards of crawl {crawl!r} were deleted or evicted"
    said.findings.append((meta, problem))
    if not repair:
        return False
    _remake_first(client, node, url, crawl, left, others[0] if others else None, said)
    return True


def _remake_first(client: Any, node: Any, url: str, crawl: str, left: list[bytes], second: str | None,
                  said: Said) -> None:
    """Make shard 0's meta again: the settings and seen layout of shard 1 (``second``: its tag) if the crawl has
    one, with the number of shards its sentinel says; else the defaults, the order its stored ids were made
    in and the layout its seen keys show (the state of the seen set, the counts and the indexes are then
    derived from the keys by the repair of its keys, and the crawl sealed by ``mend_layout``)."""
    other: dict[bytes, bytes] = {}
    count = 1
    if second is not None:
        second_node = node_client(client, f"df:{{{second}}}:meta")
        with talking(url, "verify --repair"):
            other = second_node.hgetall(f"df:{{{second}}}:meta")
            named = parse_sentinel(second_node.get(f"df:{{{second}}}:sentinel"))
        if named is None:
            raise CrawlDamaged(f"df:{{{crawl}}}:meta", "is gone, and the sentinel of shard 1 does not say how many "
                                                       "shards the crawl has: verify cannot make it again",
                               hint="copy out what is left by hand, or delete the crawl's keys")
        count = named[1]
    layout = other.get(b"seen_layout") or _layout_in(left)
    if layout is None and b"bits" not in other:
        raise CrawlDamaged(f"df:{{{crawl}}}:meta", "is gone, and the bucket count of its seen set (field bits of a "
                                                   "crawl made before format 2) went with it: verify cannot make it "
                                                   "again", hint="copy out what is left by hand, or delete the "
                                                                 "crawl's keys")
    with talking(url, "verify --repair"):
        ids = [*node.hkeys(f"df:{{{crawl}}}:req"), *node.hkeys(f"df:{{{crawl}}}:failed")]
    pairs = ["v", format_of((layout or b"hash").decode(), count)]
    if count > 1:
        pairs += ["shards", str(count), "tags", ",".join(tags_of(crawl, count)[1:])]
    if layout == b"set64":
        pairs += ["seen_layout", "set64", "seen_fill", (other.get(b"seen_fill") or b"128").decode(), "seen_map", "1"]
    elif layout == b"bloom":
        pairs += ["seen_layout", "bloom", "bloom_rate", (other.get(b"bloom_rate") or b"1e-07").decode(),
                  "seen_map", "1"]
    meta = f"df:{{{crawl}}}:meta"
    script = node.register_script(lua.OPEN)

    def text(name: bytes, default: str) -> str:
        return (other.get(name) or default.encode()).decode()

    with talking(url, "verify --repair"):
        node.delete(f"df:{{{crawl}}}:sentinel")  # made again with the meta (OPEN makes no crawl beside one)
        script(keys=[meta], args=[" ".join(READABLE), text(b"order", order_from_ids(ids).decode()),
                                  text(b"delay", "0"), text(b"per_host", "0"), text(b"prefer", "priority"),
                                  text(b"bits", "17"), "create", "lifo", "", "1" if count == 1 else "", *pairs])
        state = [name for name in node.hkeys(meta) if name in (b"seen_level", b"seen_split", b"bloom_filters",
                                                                b"bloom_last", b"seen")]
        if state:
            node.hdel(meta, *state)
        if not left:
            node.hset(meta, "lost_shard", node.time()[0])
    if not left:
        said.notes.append(_LOST_WHOLE.format(meta=meta, index=0))
    source = "shard 1's" if second else "the defaults (delay 0, no per-host limit, prefer priority)"
    said.notes.append(f"{meta}: made again, with {source} settings, {count} shard{'s' if count > 1 else ''}; its "
                      f"counters of what is no longer stored (done, pushed, duplicates, ...) and a copy mark it may "
                      f"have had are lost")


def _layout_in(suffixes: list[bytes]) -> bytes | None:
    """The seen layout shard 0's keys show: ``set64`` buckets, Bloom filter parts, or neither."""
    if any(s.startswith(b"k:") for s in suffixes):
        return b"set64"
    if any(s.startswith(b"b:") for s in suffixes):
        return b"bloom"
    return None if any(s.startswith((b"s:", b"x:")) for s in suffixes) else b"set64"


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
                node.hset(shard.meta, "lost_shard", node.time()[0])
            said.notes.append(_LOST_WHOLE.format(meta=shard.meta, index=shard.index))
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
    """A meta for shard ``shard``, whose other keys (``left``) are there: the crawl's settings, and no state of
    its seen set (the repair of its keys then derives it from the buckets or filters it has, and rebuilds
    its indexes and counts)."""
    node = node_client(client, shard.meta)
    with talking(url, "verify --repair"):
        node.delete(shard.prefix + "sentinel")  # made again with the meta (OPEN makes no crawl beside one)
        _make(client, url, crawl, shard, layout)
        state = [name for name in node.hkeys(shard.meta)
                 if name in (b"seen_level", b"seen_split", b"bloom_filters", b"bloom_last")]
        if state:
            node.hdel(shard.meta, *state)
    said.notes.append(f"{shard.meta}: made again with the crawl's settings; its counters of what is no longer stored "
                      f"(done, pushed, duplicates, ...) are lost")


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
