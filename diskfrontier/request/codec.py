"""The one place requests become bytes and back: msgpack records, never pickle.

A request record is the msgpack array ``[url, method, headers, body, meta]`` with
trailing default fields left out (a plain GET is just ``[url]``), and a sixth field, the
page's revisit state (``revisit.py``), when it has one. Priority, the
``dont_filter`` flag and the fingerprint travel in the journal record's fixed header
(see ``jobdir/records.py``), so recovery can route and dedupe without decoding msgpack.

msgpack has no tuple or set: a tuple is stored as extension type 1, a set as 2 and a
frozenset as 3 (each holding the msgpack array of its items), so they come back as
they went in. Dates and times, ``Decimal``, ``UUID``, integers beyond 64 bits and
``ObjectFields`` are extension types 4 to 11 (``values.py``). Subclasses of the plain
types (an ``OrderedDict``, a ``str`` enum) are stored as their plain base type. Anything
else is ``Unencodable``, which names the type (``kind``).

A record holding an extension type above 11 was written by a later version: it is refused
with a ``ValueError`` that says so (``NEWER``), as any record this version cannot read.

Limits (``request/model.py``): a record is at most ``MAX_RECORD_BYTES`` and ``meta`` nests
containers at most ``MAX_DEPTH`` levels deep. ``encode_request`` refuses a request
beyond them with ``RequestTooLarge`` (a ``ValueError``, not ``Unencodable``: the frontier
raises it instead of keeping the request in memory), and ``decode_request`` refuses such
a record with ``ValueError`` without recursing more than ``MAX_DEPTH`` levels, so a
damaged or hostile job directory cannot exhaust the C stack.
"""

from __future__ import annotations

import threading
from typing import Any

import msgpack

from ..core.errors import RequestTooLarge
from . import values
from .canonical import is_plain as _is_plain
from .model import MAX_BODY_BYTES, MAX_DEPTH, MAX_RECORD_BYTES, MAX_URL_LENGTH, Request, check_stored
from .revisit import RevisitState
from .values import NotStorable, kind_of

EXT_TUPLE, EXT_SET, EXT_FROZENSET = 1, 2, 3
EXT_LAST = max(values.CODES)  # the highest extension type this version reads
NEWER = "written by a later version of diskfrontier"  # in the message for an extension type above the known ones
_DEFAULTS: tuple[Any, ...] = (None, "GET", {}, b"", {})
_PLAIN = (dict, list, bytes, int, float)
_CONTAINERS = (dict, list, tuple, set, frozenset)
_SCALARS = frozenset({str, bytes, int, float, bool, type(None)})  # a quick way past most values
_RECORD_DEPTH = MAX_DEPTH + 1  # the record's own array, then meta's levels
# methods a stored request mostly has: each is one that ``check_stored`` accepts
_COMMON_METHODS = frozenset({"GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"})
# the first byte of every msgpack array, map and extension type (and of nothing else in a header)
_OPENERS = bytes([*range(0x80, 0xA0), *range(0xC7, 0xCA), *range(0xD4, 0xD9), *range(0xDC, 0xE0)])


def _pack_items(value: Any) -> bytes:
    # a fresh packer: this runs while the record's packer is in the middle of its work
    return msgpack.packb(list(value), use_bin_type=True, datetime=False, strict_types=True, default=_default)


def _pack_value(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True, datetime=False, strict_types=True, default=_default)


def _default(value: Any) -> Any:
    if isinstance(value, tuple):
        return msgpack.ExtType(EXT_TUPLE, _pack_items(value))
    if isinstance(value, frozenset):
        return msgpack.ExtType(EXT_FROZENSET, _pack_items(value))
    if isinstance(value, set):
        return msgpack.ExtType(EXT_SET, _pack_items(value))
    ext = values.pack(value, _pack_value)
    if ext is not None:
        return ext
    if isinstance(value, str):
        return str.__str__(value)  # str() of a str enum member is its name, not its value
    for plain in _PLAIN:
        if isinstance(value, plain):
            return plain(value)  # type: ignore[arg-type]
    raise NotStorable(f"can not serialize {type(value).__name__!r} object", kind_of(value))


def _fits(value: Any, levels: int) -> bool:
    """True if the container ``value`` nests containers at most ``levels`` deep (itself included).

    Recursion stops at ``levels``, so this also ends on a structure that holds itself.
    """
    if levels <= 0:
        return False
    if isinstance(value, dict):
        for key in value:  # a key can be a tuple or a frozenset
            if type(key) is not str and isinstance(key, _CONTAINERS) and not _fits(key, levels - 1):
                return False
        value = value.values()
    for item in value:
        if type(item) not in _SCALARS and isinstance(item, _CONTAINERS) and not _fits(item, levels - 1):
            return False
    return True


def _may_nest_deeper(record: bytes, levels: int) -> bool:
    """False if the msgpack ``record`` cannot nest containers more than ``levels`` deep.

    Every array, map and extension type starts with a byte of ``_OPENERS``; a record with
    no more such bytes than ``levels`` has no longer chain of containers. A quick test
    that spares most records the walk of ``_fits``.
    """
    return len(record) - len(record.translate(None, _OPENERS)) > levels


def _deep_field(fields: list[Any]) -> str:
    """The name of the first field of a too-deep record, for the error message."""
    meta = fields[4] if len(fields) > 4 else {}
    for key, value in meta.items() if isinstance(meta, dict) else ():
        if isinstance(value, _CONTAINERS) and not _fits(value, MAX_DEPTH - 1):
            return f"Request.meta[{key!r}]"
    return "Request.headers" if not _fits(fields[2], MAX_DEPTH) else "Request.meta"


class _BoundedExtHook(threading.local):
    """An ``ext_hook`` that decodes at most ``MAX_DEPTH`` extension types inside one another.

    Each one is a nested ``unpackb`` call (C stack), so this bounds the recursion. One
    instance per thread keeps the depth of the decode under way.
    """

    depth = 0

    def __call__(self, code: int, data: bytes) -> Any:
        if self.depth >= MAX_DEPTH:
            raise ValueError(f"tuples, sets or object fields nested more than {MAX_DEPTH} levels deep")
        if code in values.CODES:
            self.depth += 1
            try:
                return values.unpack(code, data, self._unpack)
            except ValueError:
                raise
            except Exception as exc:  # out of range for datetime, Decimal's own errors...
                raise ValueError(f"{type(exc).__name__}: {exc}") from None
            finally:
                self.depth -= 1
        if code > EXT_LAST:
            raise _Newer(code)
        if code not in (EXT_TUPLE, EXT_SET, EXT_FROZENSET):
            raise ValueError(f"unknown msgpack extension type {code}")
        self.depth += 1
        try:
            items = self._unpack(data)
        finally:
            self.depth -= 1
        if code == EXT_TUPLE:
            return tuple(items)
        if code == EXT_SET:
            return set(items)
        return frozenset(items)

    def _unpack(self, data: bytes) -> Any:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=self)


class _Newer(ValueError):
    """An extension type that a later version writes."""

    def __init__(self, code: int) -> None:
        super().__init__(
            f"it holds a value of a type this version cannot read (msgpack extension type {code}), {NEWER}: "
            f"upgrade diskfrontier to read it")


_ext_hook = _BoundedExtHook()
_unpackb = msgpack.unpackb


_packer = msgpack.Packer(use_bin_type=True, datetime=False, strict_types=True, default=_default)


class Unencodable(Exception):
    """The request holds something msgpack cannot store; it will live in memory only.

    ``kind`` names the type of the value (``object``, ``myproject.Thing``; see
    ``values.kind_of``), or is None when msgpack did not say which value it was.
    """

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind


def encode_request(request: Request) -> bytes:
    """The msgpack record of ``request``.

    Raises ``Unencodable`` with the reason if msgpack cannot hold a value (the frontier
    then keeps the request in memory), and ``RequestTooLarge`` if the request is beyond
    the limits (nested more than ``MAX_DEPTH`` levels, or a record over ``MAX_RECORD_BYTES``).
    """
    revisit = request.revisit
    if not request.meta and not request.body and not request.headers and revisit is None:  # the usual request
        try:
            return _packer.pack([request.url] if request.method == "GET" else [request.url, request.method])
        except (TypeError, ValueError, OverflowError) as exc:  # a URL msgpack cannot encode (a lone surrogate)
            _packer.reset()
            raise Unencodable(str(exc)) from None
    fields: list[Any] = [request.url, request.method, request.headers, request.body, request.meta]
    if revisit is not None:
        fields.append(revisit.to_list())
    else:
        while len(fields) > 1 and fields[-1] == _DEFAULTS[len(fields) - 1]:
            fields.pop()
    if len(fields) > 2 and not _fits(fields, _RECORD_DEPTH):
        raise RequestTooLarge(
            f"{_deep_field(fields)} nests lists, dicts, tuples or sets more than {MAX_DEPTH} levels deep "
            f"(MAX_DEPTH, counting meta itself), or holds itself: flatten it"
        )
    try:
        record = _packer.pack(fields)
    except (TypeError, ValueError, OverflowError) as exc:
        _packer.reset()
        raise Unencodable(str(exc), getattr(exc, "kind", None)) from None
    if len(record) > MAX_RECORD_BYTES:
        raise RequestTooLarge(
            f"request {request.url[:80]!r} takes {len(record):,} bytes stored, more than the limit of "
            f"{MAX_RECORD_BYTES:,} (MAX_RECORD_BYTES) for its URL, headers, body and meta together: "
            f"keep large data outside the request (for example a file path in meta)"
        )
    return record


def _check_fields(fields: Any) -> None:
    """Raise ``ValueError`` unless ``fields`` is a request record ``encode_request`` could have written."""
    if not isinstance(fields, list) or not 1 <= len(fields) <= 6 or not isinstance(fields[0], str):
        raise ValueError("malformed request record: not an array starting with a URL")
    types = (str, str, dict, bytes, dict)
    names = ("URL", "method", "headers", "body", "meta")
    for value, kind, name in zip(fields, types, names, strict=False):  # fields may be fewer
        if not isinstance(value, kind):
            raise ValueError(f"malformed request record: its {name} is a {type(value).__name__}")
    if len(fields[0]) > MAX_URL_LENGTH or (len(fields) > 3 and len(fields[3]) > MAX_BODY_BYTES):
        raise ValueError("malformed request record: its URL or body is longer than a request may hold")


def _plain_url(data: bytes | memoryview) -> str | None:
    """The URL of a record that is just ``[url]`` (a msgpack array of one str), else None."""
    if len(data) < 2 or data[0] != 0x91:
        return None
    kind = data[1]
    if 0xA0 <= kind <= 0xBF:
        start, size = 2, kind - 0xA0
    elif kind == 0xD9 and len(data) > 2:
        start, size = 3, data[2]
    elif kind == 0xDA and len(data) > 3:
        start, size = 4, data[2] << 8 | data[3]
    else:
        return None
    if start + size != len(data) or size > MAX_URL_LENGTH:
        return None  # left to msgpack, which names what is wrong
    try:
        return str(data[start:], "utf-8")
    except UnicodeDecodeError:
        return None


def _check_stored(url: str, method: str, headers: Any, meta: Any) -> None:
    """``check_stored``, its message saying that the record is what is wrong."""
    try:
        check_stored(url, method, headers, meta)
    except ValueError as exc:
        raise ValueError(f"the stored request is not one a frontier accepts: {exc}") from None


def decode_request(
    data: bytes | memoryview, priority: int, dont_filter: bool, fingerprint: bytes, seq: int | None,
    slot: str | None = None,
) -> Request:
    """Rebuild a request from its record; ``priority``, ``dont_filter``, ``fingerprint``, ``seq`` and
    ``slot`` (None: its URL's host) are what the backend keeps beside the record (``Request.unchecked``).

    Raises ``ValueError`` on malformed bytes, on a record beyond the limits that
    ``encode_request`` keeps (size, nesting depth), which it never wrote, and on fields
    that ``Request`` refuses at the door (``request.check_stored``: URL, method, headers).
    """
    if len(data) > MAX_RECORD_BYTES:
        raise ValueError(f"malformed request record: {len(data):,} bytes, more than the {MAX_RECORD_BYTES:,} "
                         f"a request record may hold")
    url = _plain_url(data)
    if url is not None:  # the usual record, [url], read without msgpack's general machinery
        if not _is_plain(url):  # a URL of the fast-path shape is valid: what push stores, mostly
            _check_stored(url, "GET", None, None)
        return Request.unchecked(url, "GET", {}, b"", priority, {}, dont_filter, fingerprint, seq, slot)
    try:
        # msgpack bounds every string, array and map by the record's length: no limit to add
        fields = _unpackb(data, raw=False, strict_map_key=False, use_list=True, ext_hook=_ext_hook)
    except _Newer as exc:
        raise ValueError(f"unreadable request record: {exc}") from None
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise ValueError(f"malformed request record: {type(exc).__name__}: {exc}") from None
    if type(fields) is list and len(fields) == 5:  # a request with meta (a Scrapy scheduler's): checked inline
        url, method, headers, body, meta = fields
        if (type(url) is str and type(method) is str and type(headers) is dict and not headers
                and type(body) is bytes and type(meta) is dict and len(url) <= MAX_URL_LENGTH
                and len(body) <= MAX_BODY_BYTES and method in _COMMON_METHODS and _is_plain(url)
                and all(type(key) is str for key in meta)
                and not (_may_nest_deeper(bytes(data), _RECORD_DEPTH) and not _fits(fields, _RECORD_DEPTH))):
            return Request.unchecked(url, method, headers, body, priority, meta, dont_filter, fingerprint, seq, slot)
    if type(fields) is not list or len(fields) != 1 or type(fields[0]) is not str or len(fields[0]) > MAX_URL_LENGTH:
        _check_fields(fields)  # anything but a plain GET of a URL within the limit
    if len(fields) > 2 and _may_nest_deeper(bytes(data), _RECORD_DEPTH) and not _fits(fields, _RECORD_DEPTH):
        raise ValueError(f"malformed request record: its meta is nested more than {MAX_DEPTH} levels deep")
    n = len(fields)
    _check_stored(fields[0], fields[1] if n > 1 else "GET", fields[2] if n > 2 else None, fields[4] if n > 4 else None)
    revisit = RevisitState.from_list(fields[5]) if n > 5 else None
    return Request.unchecked(
        fields[0],
        fields[1] if n > 1 else "GET",
        fields[2] if n > 2 else {},
        fields[3] if n > 3 else b"",
        priority,
        fields[4] if n > 4 else {},
        dont_filter,
        fingerprint,
        seq,
        slot,
        revisit,
    )
