"""Request fingerprints byte-identical to Scrapy's default ``RequestFingerprinter``.

The published algorithm: sha1 over the JSON document
``{"body": body.hex(), "headers": {}, "method": METHOD, "url": canonical_url}``
serialised by ``json.dumps(..., sort_keys=True)``. The document is assembled here as a
string in that exact key order and spacing, which saves building and sorting a dict.
"""

from __future__ import annotations

import hashlib
import json

from .canonical import canonical_and_host, canonicalize

_encode_str = json.encoder.encode_basestring_ascii  # what json.dumps uses (ensure_ascii)


def request_fingerprint(method: str, url: str, body: bytes) -> bytes:
    """The 20-byte sha1 fingerprint Scrapy's default fingerprinter gives this request."""
    document = (
        '{"body": "' + body.hex() + '", "headers": {}, "method": '
        + _encode_str(method) + ', "url": ' + _encode_str(canonicalize(url)) + "}"
    )
    return hashlib.sha1(document.encode()).digest()  # noqa: S324 - Scrapy's choice


def fingerprint_and_host(method: str, url: str, body: bytes) -> tuple[bytes, str | None]:
    """``request_fingerprint``, and the URL's host when canonicalising it read it on the way (else None)."""
    canonical, host = canonical_and_host(url)
    document = (
        '{"body": "' + body.hex() + '", "headers": {}, "method": '
        + _encode_str(method) + ', "url": ' + _encode_str(canonical) + "}"
    )
    return hashlib.sha1(document.encode()).digest(), host  # noqa: S324 - Scrapy's choice
