"""Opening a Redis crawl: the settings checked, the server checked, the scripts registered, the crawl
made or found (one ``OPEN`` script), and its hosts placed again when its settings changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import FrontierError, IncompleteCopy
from . import lua
from .connection import check_server, log, shown_url, talking
from .records import SeenKeys, bucket_bits
from .seen import SeenLayout, intset_fill, layout_of, new_layout
from .settings import Settings
from .shards import Shard, second_shard_tags
from .values import Values
from .wholeness import LOSS_FIELDS, ShardLayout, sentinel_value, shard_layout, tags_of

FORMAT = "1"  # a crawl of one shard whose seen set is hash buckets: what every version reads
SHARDED = FORMAT + "s"  # the meta field v of every shard of a crawl of several shards: refused by older clients
# The meta field v of a crawl whose seen set is kept another way (64-bit keys or a Bloom filter), one shard or
# several: a version from before these layouts refuses it (it would look for the seen set under other keys).
NEW_SEEN, NEW_SEEN_SHARDED = "2", "2s"
# An 'r' after the digit: a crawl whose request records may hold a revisit state (a sixth field, which a version
# from before revisits would take for a damaged record): every crawl this version opens is marked so (OPEN),
# and a version from before refuses it.
READABLE = ("1r", "1rs", "2r", "2rs", FORMAT, SHARDED, NEW_SEEN, NEW_SEEN_SHARDED)


def format_of(seen_layout: str, shards: int) -> str:
    """The meta field v of a new crawl with this seen layout and number of shards."""
    base = FORMAT if seen_layout == "hash" else NEW_SEEN
    return base + "r" + ("s" if shards > 1 else "")


def without_revisits(version: str) -> str:
    """The meta field v that a crawl of format ``version`` had before this version opened it (no 'r')."""
    return version.replace("r", "")


COPY_MARK = "copying"  # the meta field that marks a crawl being made by 'copy' (its source), removed at the end
SCRIPTS = ("OPEN", "PUSH", "POP", "FINISH", "SET_HOST", "LOOK", "MARK_SEEN", "SET_DONE", "REQUEUE_FAILED", "REPLACE",
           "RECORD_FAILED", "SET_PAUSE", "DROP_HOST", "DROP_IDS", "BEAT", "LEAVE", "HOST_FAILED", "HAS_SEEN", "SEAL",
           "SEEN_CHECK", "OUTCOMES")
BATCH = 500  # hosts per REPLACE call
SEEN_BATCH = 1000  # seen buckets a SEEN_CHECK call looks at


@dataclass(frozen=True)
class Opened:
    """A crawl as an open found it: its settings, its seen-bucket layout, its shards and the registered scripts."""

    scripts: dict[str, Any]
    order: str
    delay: float
    per_host: int | None
    prefer: str
    seen_keys: SeenLayout | SeenKeys  # the seen set's layout (seen.py)
    made: bool  # this open made the crawl
    copy_mark: str | None  # the source of the copy that is making it, if one is
    shards: list[Shard]


def open_crawl(redis: Any, url: str, crawl: str, values: Values, asked: Settings,
               shards: int | None = None) -> Opened:
    """Open (or make) the crawl ``crawl`` on the server ``redis`` with the settings ``asked``; a crawl made
    here gets ``shards`` shards (None: 1), an existing one must have that many (None: any). Every shard
    is checked to be there and whole (``wholeness.py``), and so is the seen set of each."""
    meta = f"df:{{{crawl}}}:meta"
    check_server(redis, url, crawl)
    with talking(url, "open"):
        pipe = redis.pipeline(transaction=False)
        pipe.hget(meta, COPY_MARK)
        pipe.exists(meta)
        mark, there = pipe.execute()
    copy_mark: str | None = None if mark is None else mark.decode("utf-8", "replace")
    if copy_mark is not None and asked.copy_of is None:
        raise IncompleteCopy(f"crawl {crawl!r} in Redis at {shown_url(url)} is an unfinished copy of "
                             f"{copy_mark} (the copy was stopped before its end, or is still running): "
                             f"run the same 'diskfrontier copy' again to redo it, or drop the crawl")
    scripts = {name: redis.register_script(getattr(lua, name)) for name in SCRIPTS}
    if not there:
        _refuse_leftovers(redis, url, crawl, values)
    count = shards or 1
    seen_pairs = _new_seen(asked, redis)
    layout = ["v", format_of(_layout_in(seen_pairs), count)]
    if count > 1:
        layout += ["shards", str(count), "tags", ",".join(tags_of(crawl, count)[1:])]
    with talking(url, "open"):
        answer = scripts["OPEN"](keys=[meta], args=[
            " ".join(READABLE), asked.order or "", "" if asked.delay is None else repr(asked.delay),
            "" if asked.per_host is None else str(asked.per_host), asked.prefer or "",
            str(bucket_bits(asked.expected_urls)), "create" if asked.create else "open", asked.new_order,
            asked.copy_of or "", sentinel_value(0, 1) if count == 1 else "", *layout, *seen_pairs])
    if answer[0] == 0:
        raise FrontierError(f"there is no crawl {crawl!r} in Redis at {shown_url(url)}")
    _check_version(answer, meta, crawl, url, values)
    order = values.text(answer[1], f"{meta} field order")
    if order not in ("lifo", "fifo"):
        raise values.bad(f"{meta} field order", f"is {order!r}, not 'lifo' or 'fifo'")
    if asked.order is not None and asked.order != order:
        raise FrontierError(f"crawl {crawl!r} is {order.upper()}; its order is fixed when it is made "
                            f"(open it with order=None or order={order!r})")
    made = bool(answer[7])
    if answer[12] is None and not answer[15].startswith(b"1"):
        raise values.bad(f"{meta} field seen_layout", f"is missing (a crawl of format {answer[15].decode()} names the "
                                                      f"layout of its seen set)")
    seen_layout = values.text(answer[12], f"{meta} field seen_layout") if answer[12] is not None else "hash"
    bits = values.whole(answer[5], f"{meta} field bits") if seen_layout == "hash" else None
    seen = layout_of(seen_layout, bits)
    if asked.dedupe is not None and asked.dedupe != ("bloom" if seen_layout == "bloom" else "exact") and not (
            asked.dedupe == "hash" and seen_layout == "hash"):
        have = "a Bloom filter" if seen_layout == "bloom" else "exact"
        raise FrontierError(f"crawl {crawl!r} dedupes with {have}; its dedupe is fixed when it is made (open it "
                            f"with dedupe=None)")
    if made and asked.copy_of is not None:
        copy_mark = asked.copy_of
    found = _shards_of(answer, crawl, url, values, shards)
    shard_list = [Shard(index, tag) for index, tag in enumerate(found.tags)]
    opened = Opened(
        scripts, order, values.real(answer[2], f"{meta} field delay", 0.0),
        values.whole(answer[3], f"{meta} field per_host", 0) or None,
        values.text(answer[4], f"{meta} field prefer") if answer[4] is not None else "priority",
        seen, made, copy_mark, shard_list)
    if answer[6]:
        _place_hosts_again(redis, url, shard_list[0], scripts)
    answers = [answer]
    for shard in shard_list[1:]:
        answers.append(_open_shard(redis, url, crawl, shard, scripts, values, answer, found))
    if not found.sealed:
        _seal(url, crawl, shard_list, answers, scripts, values)
    for shard in shard_list:
        _check_seen(url, shard, scripts, values)
    _warn_of_losses(url, crawl, shard_list, answers)
    return opened


def mark_copy(redis: Any, url: str, crawl: str, source: str | None) -> None:
    """Mark crawl ``crawl`` as being made by a copy of ``source`` (None: remove the mark, the copy's last step)."""
    meta = f"df:{{{crawl}}}:meta"
    with talking(url, "copy mark"):
        if source is None:
            redis.hdel(meta, COPY_MARK)
        else:
            redis.hset(meta, COPY_MARK, source)


def _check_version(answer: list[Any], meta: str, name: str, url: str, values: Values) -> None:
    if answer[0] == -1:
        if not answer[1]:
            raise values.bad(f"{meta} field v", "is missing (the format of the crawl)")
        raise FrontierError(f"crawl {name!r} in Redis at {shown_url(url)} is of format "
                            f"{answer[1].decode(errors='replace')}; this version of diskfrontier reads "
                            f"formats {', '.join(READABLE)}")


def _refuse_leftovers(redis: Any, url: str, crawl: str, values: Values) -> None:
    """A crawl whose meta was not there: ``CrawlDamaged`` if its sentinel, or shard 1 of a crawl of that name
    (under any of the tags it can have), is there: its meta, or its shard 0 whole, was deleted or evicted.
    (The OPEN script makes no crawl beside a sentinel either.) Unless the meta is there when read again after
    them: another client made the crawl meanwhile (its OPEN makes the meta and the sentinel in one step, and
    shard 1 only after them)."""
    pipe = redis.pipeline(transaction=False)
    tags = second_shard_tags(crawl)
    pipe.exists(f"df:{{{crawl}}}:sentinel")
    for tag in tags:
        pipe.hget(f"df:{{{tag}}}:meta", "crawl")
    with talking(url, "open"):
        sentinel, *named = pipe.execute()
    if not sentinel and crawl.encode() not in named:
        return
    with talking(url, "open"):
        if redis.exists(f"df:{{{crawl}}}:meta"):
            return
    if sentinel:
        raise values.bad(f"df:{{{crawl}}}:meta", f"is gone while df:{{{crawl}}}:sentinel is there: the settings, "
                                                 f"counters and shards of the crawl were deleted or evicted")
    for tag, owner in zip(tags, named, strict=True):
        if owner == crawl.encode():
            raise values.bad(f"df:{{{crawl}}}:meta", f"is gone while shard 1 of the crawl is there (df:{{{tag}}}:): "
                                                     f"shard 0 of crawl {crawl!r} (its settings, counters and the "
                                                     f"requests of its hosts) was deleted or evicted")


def _shards_of(answer: list[Any], crawl: str, url: str, values: Values, asked: int | None) -> ShardLayout:
    """The shards shard 0's meta (its OPEN ``answer``) names, checked against its sentinel; ``FrontierError``
    if ``asked`` is another count."""
    meta = f"df:{{{crawl}}}:meta"
    if (answer[10] is not None and answer[10] != b"0") or answer[11] is not None:
        raise values.bad(meta, "is the meta of a shard of another crawl, not of a crawl")
    fields = {"shards": answer[8], "tags": answer[9], "v": answer[15], "sentinel": answer[16]}
    found = shard_layout(crawl, fields, answer[17])
    if found.problems:
        key, problem = found.problems[0]
        raise values.bad(key, problem)
    if asked is not None and asked != found.count:
        raise FrontierError(f"crawl {crawl!r} in Redis at {shown_url(url)} has {found.count} shard"
                            f"{'s' if found.count > 1 else ''}; the number of shards is fixed when a crawl is made "
                            f"(open it with shards=None or shards={found.count})")
    return found


def _open_shard(redis: Any, url: str, crawl: str, shard: Shard, scripts: dict[str, Any], values: Values,
                first: list[Any], layout: ShardLayout) -> list[Any]:
    """Open shard ``shard`` of ``crawl`` with the settings shard 0's OPEN answered (``first``), and return its
    OPEN answer. In a crawl whose shards are not all made yet (``layout.sealed`` False: its maker stopped
    before the end, or it was made before shard 0's sentinel said so) a shard missing is made here; in
    any other, a shard missing was lost; one of another crawl is damage."""
    expected = sentinel_value(shard.index, layout.count)
    with talking(url, "open"):
        answer = scripts["OPEN"](keys=[shard.meta], args=shard_open_args(crawl, shard, first, layout.count,
                                                                         create=not layout.sealed))
    if answer[0] == 0:
        raise values.bad(shard.meta, f"shard {shard.index} of crawl {crawl!r} is gone: its keys were deleted or "
                                     f"evicted, with the requests of its hosts and their seen fingerprints (the "
                                     f"sentinel of shard 0 says all {layout.count} shards were made)")
    _check_version(answer, shard.meta, shard.tag, url, values)
    if answer[11] != crawl.encode() or answer[10] != str(shard.index).encode():
        raise values.bad(shard.meta, f"is not the meta of shard {shard.index} of crawl {crawl!r} (it names shard "
                                     f"{answer[10]!r} of crawl {answer[11]!r})")
    if answer[1] != first[1]:
        raise values.bad(f"{shard.meta} field order", f"is {answer[1]!r}, not the crawl's {first[1]!r}")
    if answer[12] != first[12]:
        raise values.bad(f"{shard.meta} field seen_layout", f"is {answer[12]!r}, not the crawl's {first[12]!r}")
    have = answer[17]
    if have != expected.encode() and (layout.sealed or have not in (None, b"1") or (have is None and answer[16])):
        where = shard.prefix + "sentinel"
        if have is None:
            raise values.bad(where, "is gone: Redis evicted keys of the crawl or something deleted them")
        raise values.bad(where, f"is {have[:60]!r}, not {expected!r}: not the sentinel of shard {shard.index} of the "
                                f"crawl's {layout.count} (the shard was made again after it was lost, or its keys "
                                f"are another crawl's)")
    if answer[6]:
        _place_hosts_again(redis, url, shard, scripts)
    return answer


def shard_open_args(crawl: str, shard: Shard, first: list[Any], count: int, *, create: bool) -> list[str]:
    """The OPEN arguments of shard ``shard`` (i > 0) of a crawl of ``count`` shards, with the settings shard 0's
    OPEN answered (``first``); ``create``: make it if it is missing."""
    def text(value: Any) -> str:
        return "" if value is None else value.decode()

    return [" ".join(READABLE), text(first[1]), text(first[2]), text(first[3]), text(first[4]), text(first[5]),
            "create" if create else "open", "lifo", "", sentinel_value(shard.index, count), "v",
            format_of(text(first[12]) or "hash", 2), "shard", str(shard.index), "crawl", crawl, *_shard_seen(first)]


def _seal(url: str, crawl: str, shards: list[Shard], answers: list[list[Any]], scripts: dict[str, Any],
          values: Values) -> None:
    """Every shard of a crawl not sealed yet is there: each gets the sentinel of its place (in place of the
    ``1`` of a crawl made before sentinels named their shard), shard 0's last, which then says so."""
    count = len(shards)
    for shard, answer in [*zip(shards[1:], answers[1:], strict=True), (shards[0], answers[0])]:
        value = sentinel_value(shard.index, count)
        if answer[17] == value.encode() and shard.index:
            continue
        with talking(url, "open"):
            sealed = scripts["SEAL"](keys=[shard.meta], args=[value])
        if not sealed:
            raise values.bad(shard.meta, f"shard {shard.index} of crawl {crawl!r} is gone: its keys were deleted or "
                                         f"evicted while the crawl was opened")


def _check_seen(url: str, shard: Shard, scripts: dict[str, Any], values: Values) -> None:
    """Check the seen set of ``shard`` (``SEEN_CHECK``, ``SEEN_BATCH`` buckets a call): every bucket that must
    be there is, and, when nothing was added while it was read, the buckets hold what the count says."""
    stamps: set[bytes] = set()
    held, first = 0, "0"
    while first:
        with talking(url, "open"):
            stamp, got, after = scripts["SEEN_CHECK"](keys=[shard.meta], args=[first, SEEN_BATCH])
        stamps.add(stamp)
        held += int(got)
        first = after.decode()
    if len(stamps) == 1:
        counted = int(stamps.pop().partition(b":")[0])
        if held != counted:
            lost = " (they were deleted or evicted: the URLs they stand for would be accepted again)"
            raise values.bad(f"{shard.meta} field seen", f"counts {counted} fingerprints; the seen buckets hold "
                                                         f"{held}{lost if held < counted else ''}")


def _warn_of_losses(url: str, crawl: str, shards: list[Shard], answers: list[list[Any]]) -> None:
    """Log what ``verify --repair`` recorded as lost for good in any shard (OPEN answers it last)."""
    for shard, answer in zip(shards, answers, strict=True):
        recorded = {name: value for name, value in zip(LOSS_FIELDS, answer[18:21], strict=True) if value is not None}
        if recorded:
            shown = ", ".join(f"{name} {value.decode(errors='replace')}" for name, value in recorded.items())
            log.warning("crawl %r at %s: shard %d records what verify --repair could not bring back (%s); "
                        "'diskfrontier verify' lists it", crawl, shown_url(url), shard.index, shown)


def _place_hosts_again(redis: Any, url: str, shard: Shard, scripts: dict[str, Any]) -> None:
    """Place every host of a shard of the crawl again under its changed settings, ``BATCH`` hosts a script
    call (a lowered delay wakes a host at once, a raised ``per_host`` frees a held one, a changed ``prefer``
    re-keys the ready hosts). If this client dies half-way, the hosts not reached are placed again when
    anything touches them."""
    batch: list[bytes] = []
    with talking(url, "open"):
        for host in redis.sscan_iter(f"{shard.prefix}hosts", count=BATCH):
            batch.append(host)
            if len(batch) == BATCH:
                scripts["REPLACE"](keys=[shard.meta], args=batch)
                batch = []
        if batch:
            scripts["REPLACE"](keys=[shard.meta], args=batch)


def _intset_entries(client: Any) -> int | None:
    """The server's ``set-max-intset-entries`` (None where ``CONFIG`` is refused, as on some managed servers)."""
    import redis.exceptions as rx

    try:
        got = client.config_get("set-max-intset-entries")
    except rx.ResponseError:
        return None
    value = next(iter(got.values()), None) if got else None
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _new_seen(asked: Settings, client: Any) -> list[str]:
    """The OPEN pairs of a new crawl's seen layout (docs/format.md, "Seen set")."""
    layout = new_layout(asked.dedupe or "exact")
    if layout == "set64":
        return ["seen_layout", layout, "seen_level", "0", "seen_split", "0",
                "seen_fill", str(intset_fill(_intset_entries(client))), "seen_map", "1"]
    if layout == "bloom":
        return ["seen_layout", layout, "bloom_rate", repr(asked.error_rate), "bloom_filters", "0", "bloom_last", "0",
                "seen_map", "1"]
    return []


def _layout_in(pairs: list[str]) -> str:
    """The seen layout the OPEN ``pairs`` of a new crawl give it ('hash' when they name none)."""
    for at in range(0, len(pairs) - 1, 2):
        if pairs[at] == "seen_layout":
            return pairs[at + 1]
    return "hash"


def _shard_seen(first: list[Any]) -> list[str]:
    """The OPEN pairs of the seen layout of a shard made after shard 0 (whose OPEN answer is ``first``): the
    same layout, each shard with a seen set of its own."""
    layout = first[12]
    if layout == b"set64":
        fill = (first[13] or b"128").decode()
        return ["seen_layout", "set64", "seen_level", "0", "seen_split", "0", "seen_fill", fill, "seen_map", "1"]
    if layout == b"bloom":
        return ["seen_layout", "bloom", "bloom_rate", (first[14] or b"1e-07").decode(), "bloom_filters", "0",
                "bloom_last", "0", "seen_map", "1"]
    return []
