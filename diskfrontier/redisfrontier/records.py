"""How a request and a fingerprint are laid out in Redis (see docs/format.md, "Redis")."""

from __future__ import annotations

import hashlib
import math
import struct
from typing import Any

from ..contract.checks import check_attempts, check_time
from ..core.errors import CrawlDamaged, FrontierError
from ..request.codec import decode_request, encode_request
from ..request.model import PRIORITY_MAX, PRIORITY_MIN, Request, check_priority

_HEAD = struct.Struct(">iBHd")  # priority, flags (1: dont_filter), attempts, not_before
_DONT_FILTER = 1
FP_SIZE = 20  # Scrapy's sha1 fingerprints: split into a bucket and a field, and rebuilt on copy


def pack_body(request: Request, record: bytes, attempts: int, not_before: float) -> bytes:
    """The body of ``request`` in the crawl's ``req`` hash."""
    check_priority(request.priority)  # a plain attribute: it may have been changed since the Request was made
    slot = request.slot.encode()
    fingerprint = request.fingerprint
    return b"".join((
        _HEAD.pack(request.priority, _DONT_FILTER if request.dont_filter else 0, attempts, not_before),
        bytes((len(slot),)), slot, bytes((len(fingerprint),)), fingerprint, record))


def push_args(request: Request, seen_keys: Any, not_before: float | None,
              record: bytes | None = None) -> list[Any]:
    """The PUSH script's arguments for ``request``: the two seen values of its fingerprint in the crawl's
    seen layout ``seen_keys`` (none if ``dont_filter``),
    slot, priority, body and ``not_before`` (None: the request's own). Its own ``attempts`` are kept
    too, as a request read back from an export or another crawl carries them. ``record``: its msgpack
    record if it is already encoded."""
    if request.dont_filter:
        key, field = "", b""
    else:
        key, field = seen_keys.of(request.fingerprint)
    if not_before is None:
        not_before = 0.0 if request.not_before is None else check_time("Request.not_before", request.not_before)
    body = pack_body(request, encode(request) if record is None else record, check_attempts(request.attempts),
                     not_before)
    return [key, field, request.slot, request.priority, body, repr(not_before)]


_CHANGED = "the crawl's keys were changed by something else"


def unpack_body(body: Any, where: str, *, hint: str = _CHANGED) -> Request:
    """The request a body holds; ``CrawlDamaged`` naming ``where`` (its key and field) if it is not
    one we wrote, with ``hint`` saying what to do."""
    key, _, part = where.partition(" ")  # "KEY field ID"
    part = f"{part} " if part else ""
    if not isinstance(body, bytes):
        raise CrawlDamaged(key, f"{part}is missing (an index names a request that is not stored)", hint=hint)
    try:
        priority, flags, attempts, not_before = _HEAD.unpack_from(body)
        at = _HEAD.size
        slot_end = at + 1 + body[at]
        slot = body[at + 1:slot_end].decode()
        fp_end = slot_end + 1 + body[slot_end]
        fingerprint = body[slot_end + 1:fp_end]
        if fp_end > len(body) or not fingerprint or not slot:
            raise IndexError
        if not PRIORITY_MIN <= priority <= PRIORITY_MAX or not (not_before == 0 or 0 < not_before < math.inf):
            raise ValueError(f"priority {priority} or not_before {not_before} out of range")
        request = decode_request(body[fp_end:], priority, bool(flags & _DONT_FILTER), fingerprint, None, slot)
    except (struct.error, IndexError) as exc:
        raise CrawlDamaged(key, f"{part}does not hold a request diskfrontier stored (cut short)", hint=hint) from exc
    except UnicodeDecodeError as exc:
        raise CrawlDamaged(key, f"{part}does not hold a request diskfrontier stored (its slot is not UTF-8)",
                           hint=hint) from exc
    except (ValueError, TypeError) as exc:
        raise CrawlDamaged(key, f"{part}does not hold a request diskfrontier stored ({exc})", hint=hint) from None
    request.attempts = attempts
    request.not_before = not_before or None
    return request


def encode(request: Request) -> bytes:
    """The msgpack record of ``request`` (``FrontierError`` if it cannot be stored: Redis keeps no
    requests in memory of one process, so there is nowhere else for it)."""
    from ..request.codec import Unencodable

    try:
        return encode_request(request)
    except Unencodable as exc:
        raise FrontierError(f"{request!r} cannot be stored in Redis ({exc}): keep only msgpack types "
                            f"(str, bytes, int, float, bool, None, list, dict) in its meta") from None


class SeenKeys:
    """Where a fingerprint is kept: a bucket (a small hash) and a field in it.

    A 20-byte fingerprint's first ``bits`` bits pick its bucket; the field is the
    fingerprint without its whole leading bytes, so the bucket and field give it back.
    Other fingerprints (another fingerprinter's) go to ``x:`` buckets picked by a hash of
    them, whole. This is the ``hash`` layout of crawls made before the seen layout was versioned
    (``seen.py`` has the others).
    """

    name = "hash"
    exact = True

    def __init__(self, bits: int) -> None:
        if not 4 <= bits <= 32:
            raise FrontierError(f"the crawl's seen buckets are 2**{bits}; diskfrontier keeps 2**4 to 2**32")
        self.bits = bits
        self.skip = bits // 8  # leading bytes the bucket holds whole
        self.width = (bits + 3) // 4

    def of(self, fingerprint: bytes) -> tuple[str, bytes]:
        """(bucket key suffix, field) of ``fingerprint``."""
        if len(fingerprint) == FP_SIZE:
            bucket = int.from_bytes(fingerprint[:4], "big") >> (32 - self.bits)
            return f"s:{bucket:0{self.width}x}", fingerprint[self.skip:]
        digest = hashlib.blake2b(fingerprint, digest_size=4).digest()
        bucket = int.from_bytes(digest, "big") >> (32 - self.bits)
        return f"x:{bucket:0{self.width}x}", fingerprint

    def fingerprint(self, key: str, field: bytes) -> bytes:
        """The fingerprint kept under bucket ``key`` (its suffix) as ``field``."""
        kind, _, bucket = key.partition(":")
        if kind == "x":
            return field
        lead = int(bucket, 16) >> (self.bits - 8 * self.skip)
        return lead.to_bytes(self.skip, "big") + field if self.skip else field


def bucket_bits(expected_urls: int) -> int:
    """Bits of bucket number for a crawl expected to see ``expected_urls``: about 100 a bucket,
    under Redis's default of 128 fields for a hash kept small (listpack)."""
    buckets = max(1, -(-expected_urls // 100))
    return min(32, max(8, (buckets - 1).bit_length()))
