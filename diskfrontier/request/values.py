"""Values of ``meta`` that msgpack has no type for, as msgpack extension types, checked on the way back.

Dates and times, ``Decimal``, ``UUID``, integers beyond 64 bits and the fields of an object
with its class path (``ObjectFields``) are each one extension type of the request record
(``docs/format.md``, "request-record"). ``pack`` turns a value into its extension type,
``unpack`` turns one back and raises ``ValueError`` for a payload that ``pack`` could not
have written: out of range, of the wrong shape, longer than the limits below. Nothing here
imports, calls or looks up anything a record names: a time zone is a key that ``zoneinfo``
looks up in its own database, and an object's class path is only carried along, for the
integration that made it (the Scrapy scheduler rebuilds ``scrapy.Item`` values from it).

A time zone is kept as what it is: a ``zoneinfo.ZoneInfo`` by its key (with the datetime's
offset at that moment, used if this machine has no such zone), any other ``tzinfo`` (a
``datetime.timezone``, pytz, dateutil) as the fixed UTC offset it gives the value. A
``timezone``'s own name is not kept.
"""

from __future__ import annotations

import datetime
import decimal
import logging
import re
import uuid
import zoneinfo
from collections.abc import Callable, Mapping
from typing import Any

import msgpack

logger = logging.getLogger("diskfrontier")

EXT_DATETIME, EXT_DATE, EXT_TIME, EXT_TIMEDELTA = 4, 5, 6, 7
EXT_DECIMAL, EXT_UUID, EXT_INT, EXT_OBJECT = 8, 9, 10, 11
CODES = frozenset(range(EXT_DATETIME, EXT_OBJECT + 1))
MAX_DECIMAL_CHARS = 4096
"""Characters of a ``Decimal`` as ``str()`` writes it; a longer one cannot be stored."""
MAX_INT_BYTES = 2048
"""Bytes of an integer beyond msgpack's 64 bits (two's complement): below 2**16383 in magnitude."""
MAX_CLASS_PATH = 1024
"""Characters of an ``ObjectFields`` class path."""

_INT_LOW, _INT_HIGH = -(2**63), 2**64  # msgpack stores the ints from _INT_LOW to below _INT_HIGH itself
_DAY_US = 86_400_000_000  # a UTC offset is less than a day, either way
_ZONE_KEY = re.compile(r"[A-Za-z0-9_+\-]{1,64}(?:/[A-Za-z0-9_+\-]{1,64}){0,3}\Z")
_CLASS_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+\Z")
_missing_zones: set[str] = set()  # zone keys already reported as missing on this machine


class ObjectFields(dict[str, Any]):
    """The fields of an object, as a dict, with the dotted path of the object's class.

    What a stored ``scrapy.Item`` is read back as outside Scrapy (or when its class cannot
    be found): a ``dict`` for every purpose, whose ``class_path`` says what it was. Stored
    again, it keeps its class path.
    """

    __slots__ = ("class_path",)

    def __init__(self, fields: Mapping[str, Any], class_path: str) -> None:
        super().__init__(fields)
        self.class_path = class_path

    def __repr__(self) -> str:
        return f"ObjectFields({dict.__repr__(self)}, {self.class_path!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ObjectFields, (dict(self), self.class_path))


class NotStorable(TypeError):
    """A value that no extension type holds; ``kind`` names its type (for counts and logs)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def kind_of(value: Any) -> str:
    """The name a value's type is counted under: ``datetime``, ``decimal.Decimal``, ``myproject.Thing``."""
    cls = type(value)
    module = getattr(cls, "__module__", None)
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module in (None, "builtins") else f"{module}.{name}"


def pack(value: Any, packb: Callable[[Any], bytes]) -> msgpack.ExtType | None:
    """The extension type of ``value``, or None if it is none of the types here.

    ``packb`` packs the nested values of an ``ObjectFields`` (the codec's own packer).
    Raises ``NotStorable`` for a value of these types beyond the limits.
    """
    if isinstance(value, datetime.datetime):
        zone = _zone(value.tzinfo, value.utcoffset() if value.tzinfo is not None else None)
        return msgpack.ExtType(EXT_DATETIME, msgpack.packb([
            value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond,
            value.fold, zone]))
    if isinstance(value, datetime.date):
        return msgpack.ExtType(EXT_DATE, msgpack.packb([value.year, value.month, value.day]))
    if isinstance(value, datetime.time):
        zone = _zone(value.tzinfo, value.utcoffset() if value.tzinfo is not None else None)
        return msgpack.ExtType(EXT_TIME, msgpack.packb([
            value.hour, value.minute, value.second, value.microsecond, value.fold, zone]))
    if isinstance(value, datetime.timedelta):
        return msgpack.ExtType(EXT_TIMEDELTA, msgpack.packb([value.days, value.seconds, value.microseconds]))
    if isinstance(value, decimal.Decimal):
        text = str(value).encode("ascii")
        if len(text) > MAX_DECIMAL_CHARS:
            raise NotStorable(f"a Decimal of {len(text):,} characters, more than the {MAX_DECIMAL_CHARS:,} "
                              f"(MAX_DECIMAL_CHARS) a record holds", kind_of(value))
        return msgpack.ExtType(EXT_DECIMAL, text)
    if isinstance(value, uuid.UUID):
        return msgpack.ExtType(EXT_UUID, value.bytes)
    # compared, not looked up in a range: a range searches an int subclass (an IntEnum) item by item
    if isinstance(value, int) and not isinstance(value, bool) and not _INT_LOW <= value < _INT_HIGH:
        size = _int_size(value)
        if size > MAX_INT_BYTES:
            raise NotStorable(f"an int of {size:,} bytes, more than the {MAX_INT_BYTES:,} (MAX_INT_BYTES, "
                              f"sign bit included) a record holds", kind_of(value))
        return msgpack.ExtType(EXT_INT, int(value).to_bytes(size, "big", signed=True))
    if isinstance(value, ObjectFields):
        if not isinstance(value.class_path, str) or not _CLASS_PATH.match(value.class_path) \
                or len(value.class_path) > MAX_CLASS_PATH:
            raise NotStorable(f"ObjectFields class path {value.class_path!r:.100} is not a dotted name",
                              kind_of(value))
        return msgpack.ExtType(EXT_OBJECT, packb([value.class_path, dict(value)]))
    return None


def unpack(code: int, data: bytes, unpackb: Callable[[bytes], Any]) -> Any:
    """The value of extension type ``code`` (one of ``CODES``); ``ValueError`` if ``data`` is not one
    that ``pack`` writes. ``unpackb`` reads the nested values of an ``ObjectFields`` (bounded by the caller)."""
    if code == EXT_DECIMAL:
        return _decimal(data)
    if code == EXT_UUID:
        if len(data) != 16:
            raise ValueError(f"a UUID of {len(data)} bytes, not 16")
        return uuid.UUID(bytes=bytes(data))
    if code == EXT_INT:
        return _big_int(data)
    if code == EXT_OBJECT:
        return _object_fields(unpackb(data))
    if len(data) > 320:  # the longest date or time is about 40 bytes, and a zone key at most 259 characters
        raise ValueError(f"a date or time of {len(data)} bytes")
    items = msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=True,
                            ext_hook=_no_ext, max_array_len=9, max_map_len=0, max_bin_len=0)
    if not isinstance(items, list):
        raise ValueError("a date or time that is not an array")
    if code == EXT_DATETIME:
        _ints(items[:8], 9, len(items), "datetime")
        year, month, day, hour, minute, second, microsecond, fold, zone = items
        return datetime.datetime(year, month, day, hour, minute, second, microsecond, tzinfo=_tzinfo(zone, True),
                                 fold=_fold(fold))
    if code == EXT_DATE:
        _ints(items, 3, len(items), "date")
        return datetime.date(*items)
    if code == EXT_TIME:
        _ints(items[:5], 6, len(items), "time")
        hour, minute, second, microsecond, fold, zone = items
        return datetime.time(hour, minute, second, microsecond, tzinfo=_tzinfo(zone, False), fold=_fold(fold))
    if code == EXT_TIMEDELTA:
        _ints(items, 3, len(items), "timedelta")
        days, seconds, microseconds = items
        if not (0 <= seconds < 86400 and 0 <= microseconds < 1_000_000):
            raise ValueError("a timedelta whose seconds or microseconds are out of range")
        return datetime.timedelta(days=days, seconds=seconds, microseconds=microseconds)
    raise ValueError(f"unknown msgpack extension type {code}")


# ------------------------------------------------------------------ encoding helpers
def _zone(tzinfo: datetime.tzinfo | None, offset: datetime.timedelta | None) -> Any:
    """A value's zone: nil (naive), a UTC offset in microseconds, or [zoneinfo key, offset or nil]."""
    if tzinfo is None:
        return None
    microseconds = None if offset is None else offset // datetime.timedelta(microseconds=1)
    key = tzinfo.key if isinstance(tzinfo, zoneinfo.ZoneInfo) else None
    if isinstance(key, str) and _ZONE_KEY.match(key):
        return [key, microseconds]
    return microseconds  # nil when the tzinfo gives no offset: naive, as Python counts it


def _int_size(value: int) -> int:
    """The fewest bytes that hold ``value`` in two's complement, sign bit included (what ``_big_int`` checks)."""
    return ((value if value >= 0 else ~value).bit_length() + 8) // 8


# ------------------------------------------------------------------ decoding helpers
def _no_ext(code: int, data: bytes) -> Any:
    raise ValueError("a date or time holding an extension type")


def _ints(items: list[Any], size: int, got: int, what: str) -> None:
    if got != size or any(type(item) is not int for item in items):
        raise ValueError(f"a {what} that is not {size} whole numbers")


def _fold(fold: int) -> int:
    if fold not in (0, 1):
        raise ValueError(f"a fold of {fold}, not 0 or 1")
    return fold


def _offset(microseconds: Any) -> datetime.timezone:
    if type(microseconds) is not int or not -_DAY_US < microseconds < _DAY_US:
        raise ValueError("a UTC offset that is not a whole number of microseconds within a day")
    return datetime.timezone(datetime.timedelta(microseconds=microseconds))


def _tzinfo(zone: Any, has_date: bool) -> datetime.tzinfo | None:
    if zone is None:
        return None
    if type(zone) is int:
        return _offset(zone)
    if not (isinstance(zone, list) and len(zone) == 2 and isinstance(zone[0], str) and _ZONE_KEY.match(zone[0])):
        raise ValueError("a time zone that is neither an offset nor a zone key with its offset")
    key, offset = zone
    fallback = None if offset is None else _offset(offset)
    try:
        return zoneinfo.ZoneInfo(key)
    except (KeyError, ValueError, OSError):  # not in this machine's time zone database
        if fallback is None or not has_date:
            raise ValueError(f"the time zone {key!r} is not known on this machine (install the tzdata "
                             f"package)") from None
        if key not in _missing_zones:
            _missing_zones.add(key)
            logger.warning("the time zone %r of a stored datetime is not known on this machine: the datetime "
                           "is read with its UTC offset instead (install the tzdata package to keep its zone)",
                           key)
        return fallback


def _decimal(data: bytes) -> decimal.Decimal:
    if not 0 < len(data) <= MAX_DECIMAL_CHARS:
        raise ValueError(f"a Decimal of {len(data)} characters")
    text = bytes(data).decode("ascii")
    value = decimal.Decimal(text)
    if str(value) != text:  # the form str() writes, and nothing else
        raise ValueError(f"a Decimal written as {text[:40]!r}, not as str() writes it")
    return value


def _big_int(data: bytes) -> int:
    if not 8 < len(data) <= MAX_INT_BYTES:
        raise ValueError(f"a large int of {len(data)} bytes")
    value = int.from_bytes(data, "big", signed=True)
    if _INT_LOW <= value < _INT_HIGH or _int_size(value) != len(data):
        raise ValueError("a large int that msgpack holds itself, or not in as few bytes as it fits")
    return value


def _object_fields(items: Any) -> ObjectFields:
    if not (isinstance(items, list) and len(items) == 2 and isinstance(items[0], str)
            and isinstance(items[1], dict)):
        raise ValueError("object fields that are not a class path and a map")
    path, fields = items
    if len(path) > MAX_CLASS_PATH or not _CLASS_PATH.match(path):
        raise ValueError(f"object fields whose class path {path[:100]!r} is not a dotted name")
    if any(type(name) is not str for name in fields):
        raise ValueError("object fields whose names are not all text")
    return ObjectFields(fields, path)


__all__ = ["CODES", "MAX_DECIMAL_CHARS", "MAX_INT_BYTES", "NotStorable", "ObjectFields", "kind_of", "pack",
           "unpack"]
