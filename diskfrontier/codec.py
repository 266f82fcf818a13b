"""The one place requests become bytes and back: msgpack records, never pickle.

A request record is the msgpack array ``[url, method, headers, body, meta]`` with
trailing default fields left out (a plain GET is just ``[url]``). Priority, the
``dont_filter`` flag and the fingerprint travel in the journal record's fixed header
(see ``journal.py``), so recovery can route and dedupe without decoding msgpack.
"""

from __future__ import annotations

from typing import Any

import msgpack

from .request import Request

_packer = msgpack.Packer(use_bin_type=True, datetime=False)
_DEFAULTS = (None, "GET", {}, b"", {})


class Unencodable(Exception):
    """The request holds something msgpack cannot store; it will live in memory only."""


def encode_request(request: Request) -> bytes:
    """The msgpack record of ``request``; raises ``Unencodable`` with the reason."""
    fields: list[Any] = [request.url, request.method, request.headers, request.body, request.meta]
    while len(fields) > 1 and fields[-1] == _DEFAULTS[len(fields) - 1]:
        fields.pop()
    try:
        return _packer.pack(fields)
    except (TypeError, ValueError, OverflowError) as exc:
        _packer.reset()
        raise Unencodable(str(exc)) from None


def decode_request(
    data: bytes | memoryview, priority: int, dont_filter: bool, fingerprint: bytes, seq: int | None
) -> Request:
    """Rebuild a request from its record (raises ``ValueError`` on malformed bytes)."""
    try:
        fields = msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise ValueError(f"malformed request record: {exc}") from None
    if not isinstance(fields, list) or not 1 <= len(fields) <= 5 or not isinstance(fields[0], str):
        raise ValueError("malformed request record: not an array starting with a URL")
    n = len(fields)
    return Request._trusted(
        fields[0],
        fields[1] if n > 1 else "GET",
        fields[2] if n > 2 else {},
        fields[3] if n > 3 else b"",
        priority,
        fields[4] if n > 4 else {},
        dont_filter,
        fingerprint,
        seq,
    )
