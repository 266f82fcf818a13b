"""The one place requests become bytes and back: msgpack records, never pickle.

A request record is the msgpack array ``[url, method, headers, body, meta]`` with
trailing default fields left out (a plain GET is just ``[url]``). Priority, the
``dont_filter`` flag and the fingerprint travel in the journal record's fixed header
(see ``journal.py``), so recovery can route and dedupe without decoding msgpack.

msgpack has no tuple or set: a tuple is stored as extension type 1, a set as 2 and a
frozenset as 3 (each holding the msgpack array of its items), so they come back as
they went in. Subclasses of the plain types (an ``OrderedDict``, a ``str`` enum) are
stored as their plain base type. Anything else is ``Unencodable``.
"""

from __future__ import annotations

from typing import Any

import msgpack

from .request import Request

EXT_TUPLE, EXT_SET, EXT_FROZENSET = 1, 2, 3
_DEFAULTS = (None, "GET", {}, b"", {})
_PLAIN = (dict, list, bytes, int, float)


def _pack_items(value: Any) -> bytes:
    # a fresh packer: this runs while the record's packer is in the middle of its work
    return msgpack.packb(list(value), use_bin_type=True, datetime=False, strict_types=True, default=_default)


def _default(value: Any) -> Any:
    if isinstance(value, tuple):
        return msgpack.ExtType(EXT_TUPLE, _pack_items(value))
    if isinstance(value, frozenset):
        return msgpack.ExtType(EXT_FROZENSET, _pack_items(value))
    if isinstance(value, set):
        return msgpack.ExtType(EXT_SET, _pack_items(value))
    if isinstance(value, str):
        return str.__str__(value)  # str() of a str enum member is its name, not its value
    for plain in _PLAIN:
        if isinstance(value, plain):
            return plain(value)
    raise TypeError(f"can not serialize {type(value).__name__!r} object")


def _ext_hook(code: int, data: bytes) -> Any:
    items = msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=_ext_hook)
    if code == EXT_TUPLE:
        return tuple(items)
    if code == EXT_SET:
        return set(items)
    if code == EXT_FROZENSET:
        return frozenset(items)
    raise ValueError(f"unknown msgpack extension type {code}")


_packer = msgpack.Packer(use_bin_type=True, datetime=False, strict_types=True, default=_default)


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
        fields = msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True, ext_hook=_ext_hook)
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
