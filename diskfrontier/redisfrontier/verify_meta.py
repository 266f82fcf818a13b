"""``verify --repair`` of a shard's ``meta``: the fields it derives again (format, order, settings, the
shard's place, the layout and state of its seen set) from the shard's keys and shard 0's meta, the
``seen_map`` made again from the buckets that are there, and the record of what cannot be brought back
(``lost_seen``, ``lost_requests``; see ``wholeness.losses``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .opening import format_of
from .seen import intset_fill
from .wholeness import bitmap_of, bloom_filter_settings, bloom_parts, bloom_rate_of

_LIFO_BASE = 2**48
_LAYOUTS = (b"set64", b"bloom")  # the seen layouts a meta names (a crawl of the earlier one names none)


@dataclass(frozen=True)
class Place:
    """Where the shard being checked is in its crawl: shard ``index`` of ``count`` of crawl ``crawl``;
    ``sealed``: shard 0's sentinel says every shard was made; ``first``: shard 0's meta (the crawl's
    settings, which every shard shares)."""

    crawl: str
    index: int = 0
    count: int = 1
    sealed: bool = True
    first: Mapping[bytes, bytes] = field(default_factory=dict)


class ShardView(Protocol):
    """What the repair of a shard's meta reads of the check of its keys (``verify._Crawl``)."""

    meta: dict[bytes, bytes]
    types: dict[bytes, bytes]
    place: Place
    bodies: dict[bytes, bytes]
    failed: dict[bytes, bytes]
    renamed: list[bytes]
    seen: int
    gone_buckets: list[tuple[bytes, float]]
    report: Any

    def key(self, suffix: bytes) -> bytes: ...


def _whole(value: bytes | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def mended(keys: ShardView) -> tuple[dict[bytes, Any], list[str]]:
    """The fields of the shard's meta to write again (missing, or not what the crawl says), and what each
    is, said for the report. ``keys.meta`` is updated with them."""
    meta, place = keys.meta, keys.place
    first = place.first if place.index else {}
    out: dict[bytes, Any] = {}
    if place.index:
        out.update({b"shard": str(place.index).encode(), b"crawl": place.crawl.encode()})
    for name, default in ((b"delay", b"0"), (b"per_host", b"0"), (b"prefer", b"priority")):
        if name not in meta:
            out[name] = first.get(name, default)
    if meta.get(b"order") not in (b"lifo", b"fifo"):
        out[b"order"] = order_of(keys)
    layout = next((x for x in (meta.get(b"seen_layout"), first.get(b"seen_layout")) if x in _LAYOUTS), None)
    layout = layout or _layout_of(keys)
    if layout is not None:
        out[b"seen_layout"] = layout
        out.update(_set64(keys, first) if layout == b"set64" else _bloom(keys, first))
    elif b"bits" not in meta and b"bits" in first:
        out[b"bits"] = first[b"bits"]
    out[b"v"] = format_of((layout or b"hash").decode(), place.count).encode()
    changed = {name: value for name, value in out.items() if meta.get(name) != _bytes(value)}
    meta.update({name: _bytes(value) for name, value in changed.items()})
    notes = [f"{keys.key(b'meta').decode(errors='replace')}: field {name.decode()} written again as "
             f"{_bytes(value).decode(errors='replace')!r}" for name, value in sorted(changed.items())]
    return changed, notes


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def order_of(keys: ShardView) -> bytes:
    """The shard's order: its meta's, else shard 0's, else the one its stored ids were made in (LIFO ids
    count down from 2**48, FIFO ids up from 1; LIFO if there are none, a new crawl's default)."""
    order = keys.meta.get(b"order")
    if order not in (b"lifo", b"fifo") and keys.place.index:
        order = keys.place.first.get(b"order")
    if order in (b"lifo", b"fifo"):
        return order
    return order_from_ids([*keys.bodies, *keys.failed])


def order_from_ids(ids: Iterable[bytes]) -> bytes:
    """The order request ids were made in: LIFO ids count down from 2**48, FIFO ids up from 1 (LIFO if there
    are none, a new crawl's default)."""
    numbers = [int(rid, 16) for rid in ids if len(rid) == 12 and _is_hex(rid)]
    return b"fifo" if numbers and max(numbers) < _LIFO_BASE // 2 else b"lifo"


def _is_hex(text: bytes) -> bool:
    return bool(text) and all(c in b"0123456789abcdef" for c in text)


def _layout_of(keys: ShardView) -> bytes | None:
    """The seen layout the shard's keys and fields show (None: the ``hash`` layout of crawls made before)."""
    meta = keys.meta
    if any(s.startswith(b"k:") for s in keys.types) or b"seen_level" in meta:
        return b"set64"
    if any(s.startswith(b"b:") for s in keys.types) or b"bloom_filters" in meta or b"bloom_rate" in meta:
        return b"bloom"
    if (meta.get(b"v") or b"").startswith(b"2"):
        return b"set64"
    return None


def _numbers(keys: ShardView, prefix: bytes) -> list[bytes]:
    return [s[len(prefix):] for s in keys.types if s.startswith(prefix)]


def _set64(keys: ShardView, first: Mapping[bytes, bytes]) -> dict[bytes, Any]:
    """A ``set64`` seen set's state: kept if it is one, else as many buckets as the highest there says."""
    meta: dict[bytes, bytes] = keys.meta
    out: dict[bytes, Any] = {}
    level, split, fill = (_whole(meta.get(name)) for name in (b"seen_level", b"seen_split", b"seen_fill"))
    if level is None or split is None or not 0 <= split < 2 ** level:
        numbers = [int(n, 16) for n in _numbers(keys, b"k:") if _is_hex(n)]
        buckets = max(numbers, default=0) + 1
        level = buckets.bit_length() - 1
        out.update({b"seen_level": level, b"seen_split": buckets - 2 ** level})
    if fill is None or fill < 1:
        out[b"seen_fill"] = first.get(b"seen_fill") or intset_fill(None)
    return out


def _bloom(keys: ShardView, first: Mapping[bytes, bytes]) -> dict[bytes, Any]:
    """A Bloom seen set's settings: the rate (shard 0's, or as the first filter's bits give it), every filter
    whose settings or parts are there (a filter's settings from the rate, as the scripts make them), and
    the last one's count (what ``seen`` says beyond the full ones, or full)."""
    meta: dict[bytes, bytes] = keys.meta
    out: dict[bytes, Any] = {}
    rate_text = meta.get(b"bloom_rate") or first.get(b"bloom_rate")
    if rate_text is None and b"bloom_1" in meta:
        rate_text = repr(bloom_rate_of(meta[b"bloom_1"])).encode()
    rate = float(rate_text or b"1e-07")
    out[b"bloom_rate"] = rate_text or b"1e-07"
    named = [int(name[6:]) for name in meta if name.startswith(b"bloom_") and name[6:].isdigit()]
    parted = [int(n.split(b":")[0]) for n in _numbers(keys, b"b:") if n.split(b":")[0].isdigit()]
    filters = max(_whole(meta.get(b"bloom_filters")) or 0, *named, *parted, 0)
    capacities = []
    for index in range(1, filters + 1):
        text = meta.get(b"bloom_%d" % index)
        if text is None or len(text.split()) != 3:
            text = bloom_filter_settings(rate, index).encode()
            out[b"bloom_%d" % index] = text
        capacities.append(int(text.split()[0]))
    out[b"bloom_filters"] = filters
    full = sum(capacities[:-1])
    seen, last = _whole(meta.get(b"seen")), _whole(meta.get(b"bloom_last"))
    if filters and (last is None or last > capacities[-1]):
        last = seen - full if seen is not None and 0 <= seen - full <= capacities[-1] else capacities[-1]
    out[b"bloom_last"] = last or 0
    out[b"seen"] = full + (last or 0) if filters else 0
    return out


def map_bits(keys: ShardView) -> list[int]:
    """The ``seen_map`` bits of the shard's buckets (or Bloom filter parts) that are there, by its meta."""
    meta = keys.meta
    if meta.get(b"seen_layout") == b"set64":
        return sorted(int(n, 16) for n in _numbers(keys, b"k:") if _is_hex(n) and keys.types.get(b"k:" + n) == b"set")
    offsets: dict[int, tuple[int, int]] = {}  # filter -> (the bit of its part 0, its parts)
    offset = 0
    for index in range(1, (_whole(meta.get(b"bloom_filters")) or 0) + 1):
        parts = bloom_parts(int(meta[b"bloom_%d" % index].split()[1]))
        offsets[index] = (offset, parts)
        offset += parts
    bits = []
    for n in _numbers(keys, b"b:"):
        number, _, part = n.partition(b":")
        if number.isdigit() and part.isdigit() and int(number) in offsets and int(part) < offsets[int(number)][1]:
            bits.append(offsets[int(number)][0] + int(part))
    return sorted(bits)


def losses(keys: ShardView, pipe: Any) -> dict[bytes, int]:
    """What the rebuild cannot bring back, added to the shard's record of it (``lost_seen``,
    ``lost_requests``), said in the report's notes; the ``seen_map`` made again from the buckets that are
    there (an add then makes one that went again). Queued on ``pipe``; returns the meta fields to write."""
    meta: dict[bytes, bytes] = keys.meta
    out: dict[bytes, int] = {}
    counted = [_whole(meta.get(name, b"0")) for name in (b"pending", b"inflight", b"failed")]
    missing = 0
    if None not in counted:  # (a hash of the wrong type is set aside whole, its requests kept there)
        pending, inflight, failed = (x or 0 for x in counted)
        if b"req" not in keys.renamed:
            missing += max(0, pending + inflight - len(keys.bodies))
        if b"failed" not in keys.renamed:
            missing += max(0, failed - len(keys.failed))
    layout = meta.get(b"seen_layout")
    if layout == b"bloom":
        gone = sum(about for _, about in keys.gone_buckets)
    else:
        gone = max(0.0, (_whole(meta.get(b"seen")) or 0) - keys.seen)
    if layout in (b"set64", b"bloom"):  # a map is there, if empty: a Bloom filter's count may have no part left
        pipe.set(keys.key(b"seen_map"), bitmap_of(map_bits(keys)))
        out[b"seen_map"] = 1
    for name, more, what in ((b"lost_requests", missing, "requests counted by the crawl are not stored (lost: "
                                                         "deleted or evicted)"),
                             (b"lost_seen", math.ceil(gone), "seen fingerprints are lost (their buckets were deleted "
                                                             "or evicted): the URLs they stand for may be fetched "
                                                             "again")):
        if more > 0:
            out[name] = (_whole(meta.get(name)) or 0) + int(more)
            keys.report.notes.append(f"{keys.key(b'meta').decode(errors='replace')}: cannot be rebuilt: at least "
                                     f"{int(more)} {what}; recorded in field {name.decode()}, named by every verify "
                                     f"from now on")
    return out
