"""The layouts of a Redis crawl's seen set, as a client sees them (see docs/format.md, "Redis", "Seen set").

A layout turns a fingerprint into the two values the scripts take for it (``of``) and, where it can,
turns what Redis holds back into fingerprints (``fingerprints_of``). Three layouts exist:

* ``hash`` (``SeenKeys`` in ``records.py``): crawls made before the seen layout was versioned;
  listpack hash buckets of fingerprint remainders, a bucket count fixed when the crawl is made.
* ``set64`` (``SeenSets``, every new exact crawl): the fingerprint's 64-bit key (the job directory's
  seen index keys by the same 64 bits) as a signed decimal integer in a Redis set, which Redis keeps
  as an intset (8 bytes an entry) while it is small; the bucket count grows with the crawl by linear
  hashing inside the scripts.
* ``bloom`` (``SeenBloom``, ``dedupe="bloom"``): a scalable series of Bloom filters in bitmaps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, Protocol

from ..core.errors import FrontierError
from .records import FP_SIZE, SeenKeys

LAYOUTS = ("hash", "set64", "bloom")
DEDUPES = ("exact", "bloom", "hash")  # what RedisFrontier(dedupe=...) takes: the layout of a new crawl
_LAYOUT_OF = {"exact": "set64", "bloom": "bloom", "hash": "hash"}
_MASK64 = (1 << 64) - 1
_MASK32 = (1 << 32) - 1
_MASK48 = (1 << 48) - 1
DEFAULT_ERROR_RATE = 1e-7
INTSET_ENTRIES = 512  # Redis's default set-max-intset-entries, when the server does not say


class SeenLayout(Protocol):
    """What a client needs of a seen layout."""

    name: str
    exact: bool  # False: a fingerprint found may be a false positive

    def of(self, fingerprint: bytes) -> tuple[str, Any]:
        """The two script arguments of ``fingerprint``."""


def key64(fingerprint: bytes) -> int:
    """The 64-bit key of ``fingerprint``, signed: a 20-byte one's first 8 bytes (SHA-1 output is
    uniform), any other's 8-byte blake2b. The job directory's seen index keys by these same bytes."""
    lead = fingerprint[:8] if len(fingerprint) == FP_SIZE else hashlib.blake2b(fingerprint, digest_size=8).digest()
    return int.from_bytes(lead, "big", signed=True)


def reduced_fingerprint(key: int) -> bytes:
    """The 20-byte fingerprint a ``set64`` member stands for: its 8 bytes and 12 zero bytes. Both
    backends key it exactly as they key the fingerprint it came from."""
    return (key & _MASK64).to_bytes(8, "big") + bytes(FP_SIZE - 8)


class SeenSets:
    """The ``set64`` layout: a fingerprint is its 64-bit key, kept in the set ``k:BUCKET``; the
    scripts pick the bucket from the key's low 32 bits and the crawl's linear-hashing level."""

    name = "set64"
    exact = True

    def of(self, fingerprint: bytes) -> tuple[str, Any]:
        key = key64(fingerprint)
        return str(key), str(key & _MASK32)

    @staticmethod
    def fingerprints_of(members: Iterable[bytes]) -> Iterable[bytes]:
        """The (reduced) fingerprints of a bucket's members (``ValueError`` for one that is not an integer)."""
        for member in members:
            yield reduced_fingerprint(int(member))


class SeenBloom:
    """The ``bloom`` layout: two 48-bit hashes of the fingerprint, from which the scripts derive
    each filter's bit positions (enhanced double hashing)."""

    name = "bloom"
    exact = False

    def of(self, fingerprint: bytes) -> tuple[str, Any]:
        digest = fingerprint if len(fingerprint) == FP_SIZE else hashlib.blake2b(fingerprint, digest_size=12).digest()
        return str(int.from_bytes(digest[:6], "big") & _MASK48), str(int.from_bytes(digest[6:12], "big") & _MASK48)


def layout_of(name: str, bits: int | None) -> SeenLayout | SeenKeys:
    """The client side of the layout ``name`` (``bits``: the bucket bits of a ``hash`` crawl)."""
    if name == "set64":
        return SeenSets()
    if name == "bloom":
        return SeenBloom()
    if name == "hash" and bits is not None:
        return SeenKeys(bits)
    raise FrontierError(f"the crawl's seen set has the layout {name!r}, which this version of diskfrontier does not "
                        f"know: upgrade diskfrontier")


def new_layout(dedupe: str) -> str:
    """The layout of a crawl made with ``dedupe``."""
    return _LAYOUT_OF[dedupe]


def check_dedupe(dedupe: str | None, error_rate: float) -> None:
    """``ValueError`` for a ``dedupe`` or ``error_rate`` RedisFrontier does not take."""
    if dedupe is not None and dedupe not in DEDUPES:
        raise ValueError(f"dedupe must be 'exact' or 'bloom', got {dedupe!r}")
    if isinstance(error_rate, bool) or not isinstance(error_rate, (int, float)) or not 1e-15 <= error_rate <= 0.1:
        raise ValueError(f"error_rate must be a number from 1e-15 to 0.1, got {error_rate!r}")


def intset_fill(entries: int | None) -> int:
    """The average bucket size past which a ``set64`` crawl splits a bucket: a quarter of Redis's
    ``set-max-intset-entries``, so that the fullest buckets (an unsplit bucket holds up to twice the
    average, plus chance) stay intsets."""
    return max(8, (INTSET_ENTRIES if entries is None or entries < 32 else entries) // 4)


__all__ = ["DEDUPES", "DEFAULT_ERROR_RATE", "LAYOUTS", "SeenBloom", "SeenLayout", "SeenSets", "check_dedupe",
           "intset_fill", "key64", "layout_of", "new_layout", "reduced_fingerprint"]
