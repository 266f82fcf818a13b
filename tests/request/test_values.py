"""Values of meta beyond msgpack's own types (dates and times, Decimal, UUID, big ints, object fields):
stored as extension types 4 to 11, read back as they went in, refused when a record holds one
``pack`` could not have written, and named when a later version wrote a type this one does not know.

Before, each of these made a request ``Unencodable``: the frontier kept it in memory, and it was
gone after a restart.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import logging
import uuid
import zoneinfo

import msgpack
import pytest
from popkit import take

from diskfrontier import Frontier, Request
from diskfrontier.core.errors import JobDirCorrupt
from diskfrontier.jobdir.maintenance.verify import verify
from diskfrontier.request import values
from diskfrontier.request.codec import Unencodable, decode_request, encode_request
from diskfrontier.request.model import MAX_DEPTH
from diskfrontier.request.values import MAX_DECIMAL_CHARS, MAX_INT_BYTES, ObjectFields
from diskfrontier.transfer.jsonlines import request_to_json

FINGERPRINT = b"\x02" * 20
PARIS = zoneinfo.ZoneInfo("Europe/Paris")


class FixedZone(datetime.tzinfo):
    """A tzinfo that is neither ``timezone`` nor ``ZoneInfo`` (as pytz's and dateutil's are)."""

    def utcoffset(self, dt):
        return datetime.timedelta(hours=5, minutes=30)

    def dst(self, dt):
        return datetime.timedelta(0)

    def tzname(self, dt):
        return "IST"


class Thing:
    """A value of a type no extension type holds."""


VALUES = {
    "naive": datetime.datetime(2020, 1, 2, 3, 4, 5, 678901),
    "utc": datetime.datetime(2020, 1, 2, tzinfo=datetime.timezone.utc),
    "offset": datetime.datetime(1999, 12, 31, 23, 59, tzinfo=datetime.timezone(-datetime.timedelta(hours=3,
                                                                                                   microseconds=7))),
    "zone, second 2:30": datetime.datetime(2021, 10, 31, 2, 30, fold=1, tzinfo=PARIS),
    "min": datetime.datetime.min,
    "max": datetime.datetime.max,
    "date": datetime.date(2020, 2, 29),
    "time": datetime.time(23, 59, 59, 999999),
    "time with offset": datetime.time(1, 2, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
    "time with zone": datetime.time(1, 2, tzinfo=PARIS),
    "timedelta": datetime.timedelta(days=-3, seconds=5, microseconds=7),
    "timedelta max": datetime.timedelta.max,
    "decimal": decimal.Decimal("-12.3400"),
    "decimal exponent": decimal.Decimal("1.5E+3"),
    "decimal -0": decimal.Decimal("-0"),
    "decimal infinity": decimal.Decimal("-Infinity"),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "2**64": 2**64,
    "-2**63-1": -(2**63) - 1,
    "big": -(3**5000),
    "set of dates": {datetime.date(2020, 1, 1), datetime.date(2021, 1, 1)},
    "frozenset": frozenset({decimal.Decimal("1.1")}),
    "tuple": (datetime.timedelta(1), uuid.UUID(int=1)),
    "keyed by date": {datetime.date(2020, 1, 1): "new year", uuid.UUID(int=2): 2},
    "bytes keys": {b"k": {b"nested": 1}},
    "object fields": ObjectFields({"sku": "A-7", "added": datetime.date(2020, 1, 1),
                                   "parts": [ObjectFields({"n": 2**70}, "shop.items.Part")]}, "shop.items.Product"),
}


def _same(got, want) -> None:
    """Equal, of the same type, with the same zone and fold, all the way down."""
    assert type(got) is type(want), (got, want)
    if isinstance(want, decimal.Decimal):
        assert str(got) == str(want)  # NaN is not equal to itself
        return
    assert got == want
    if isinstance(want, (datetime.datetime, datetime.time)):
        assert got.tzinfo == want.tzinfo and got.fold == want.fold and type(got.tzinfo) is type(want.tzinfo)
        assert got.utcoffset() == want.utcoffset()
    if isinstance(want, ObjectFields):
        assert got.class_path == want.class_path
    if isinstance(want, dict):
        for key in want:
            _same(got[key], want[key])
    elif isinstance(want, (list, tuple)):
        for a, b in zip(got, want, strict=True):
            _same(a, b)


def _round_trip(meta: dict) -> dict:
    return decode_request(encode_request(Request("https://a.example/", meta=meta)), 0, False, FINGERPRINT, None).meta


@pytest.mark.parametrize("name", list(VALUES))
def test_each_value_comes_back_as_it_went_in(name):
    _same(_round_trip({"x": VALUES[name]})["x"], VALUES[name])


def test_a_zoneinfo_datetime_keeps_its_zone_and_fold():
    first, second = (datetime.datetime(2021, 10, 31, 2, 30, fold=f, tzinfo=PARIS) for f in (0, 1))
    got = _round_trip({"a": first, "b": second})
    assert got["a"].tzinfo.key == "Europe/Paris" and got["a"].utcoffset() == datetime.timedelta(hours=2)
    assert got["b"].utcoffset() == datetime.timedelta(hours=1)  # the second 2:30 of that night, after the change


class Level(enum.IntEnum):
    HIGH = 2**70
    LOW = 3


def test_int_subclasses_are_stored_as_ints_in_range_or_not():
    assert _round_trip({"low": Level.LOW, "high": Level.HIGH}) == {"low": 3, "high": 2**70}


def test_another_tzinfo_is_kept_as_its_utc_offset():
    value = datetime.datetime(2020, 5, 1, 12, tzinfo=FixedZone())
    got = _round_trip({"x": value})["x"]
    assert got == value and got.utcoffset() == datetime.timedelta(hours=5, minutes=30)
    assert got.tzinfo == datetime.timezone(datetime.timedelta(hours=5, minutes=30))


def test_every_value_survives_a_restart_of_the_frontier(tmp_path):
    with Frontier(tmp_path / "job") as frontier:
        assert frontier.push(Request("https://a.example/values", meta=dict(VALUES)))
        assert frontier.stats()["memory_only"] == 0
    with Frontier(tmp_path / "job") as frontier:
        request = frontier.pop()
        assert request is not None
    _same(request.meta, dict(VALUES))


def test_every_value_survives_in_redis(redis_url, crawl_name):
    from diskfrontier import RedisFrontier

    with RedisFrontier(redis_url, crawl=crawl_name) as frontier:
        assert frontier.push(Request("https://a.example/values", meta=dict(VALUES)))
    with RedisFrontier(redis_url, crawl=crawl_name) as frontier:
        request = frontier.pop()
        assert request is not None
        frontier.done(request)
    _same(request.meta, dict(VALUES))


@pytest.mark.parametrize("value,kind", [
    (object(), "object"),
    (1j, "complex"),
    (Thing(), f"{__name__}.Thing"),
    (2 ** (MAX_INT_BYTES * 8), "int"),
    (decimal.Decimal("1" * (MAX_DECIMAL_CHARS + 1)), "decimal.Decimal"),
], ids=["object", "complex", "class", "int", "decimal"])
def test_what_has_no_stored_form_is_unencodable_and_names_its_type(value, kind):
    with pytest.raises(Unencodable) as raised:
        encode_request(Request("https://a.example/", meta={"x": [value]}))
    assert raised.value.kind == kind


def test_the_largest_int_and_decimal_that_fit_are_stored():
    largest = 2 ** (MAX_INT_BYTES * 8 - 1) - 1
    long_decimal = decimal.Decimal("9" * MAX_DECIMAL_CHARS)
    got = _round_trip({"int": largest, "neg": -largest - 1, "decimal": long_decimal})
    assert got == {"int": largest, "neg": -largest - 1, "decimal": long_decimal}


def _ext(code: int, payload) -> bytes:
    data = payload if isinstance(payload, bytes) else msgpack.packb(payload)
    return msgpack.packb(["https://a.example/", "GET", {}, b"", {"x": msgpack.ExtType(code, data)}])


HOSTILE = {
    "month 13": _ext(values.EXT_DATETIME, [2020, 13, 1, 0, 0, 0, 0, 0, None]),
    "year 2**70": _ext(values.EXT_DATETIME, [2**63, 1, 1, 0, 0, 0, 0, 0, None]),
    "fold 2": _ext(values.EXT_DATETIME, [2020, 1, 1, 0, 0, 0, 0, 2, None]),
    "a field that is text": _ext(values.EXT_DATETIME, [2020, "1", 1, 0, 0, 0, 0, 0, None]),
    "too few fields": _ext(values.EXT_DATETIME, [2020, 1, 1]),
    "an offset of a day": _ext(values.EXT_DATETIME, [2020, 1, 1, 0, 0, 0, 0, 0, 86_400_000_000]),
    "a zone key that is a path": _ext(values.EXT_DATETIME, [2020, 1, 1, 0, 0, 0, 0, 0, ["../../etc/passwd", 0]]),
    "a zone that is a map": _ext(values.EXT_DATETIME, [2020, 1, 1, 0, 0, 0, 0, 0, {"k": 1}]),
    "a date holding a tuple": _ext(values.EXT_DATE, msgpack.packb([msgpack.ExtType(1, msgpack.packb([]))])),
    "a long date": _ext(values.EXT_DATE, msgpack.packb(["x" * 400])),
    "february 30": _ext(values.EXT_DATE, [2021, 2, 30]),
    "hour 24": _ext(values.EXT_TIME, [24, 0, 0, 0, 0, None]),
    "seconds of a day": _ext(values.EXT_TIMEDELTA, [0, 86400, 0]),
    "a billion days": _ext(values.EXT_TIMEDELTA, [10**9, 0, 0]),
    "decimal not as str() writes it": _ext(values.EXT_DECIMAL, b" 1_000 "),
    "decimal that is not a number": _ext(values.EXT_DECIMAL, b"abc"),
    "decimal of 4097 characters": _ext(values.EXT_DECIMAL, b"1" * (MAX_DECIMAL_CHARS + 1)),
    "uuid of 15 bytes": _ext(values.EXT_UUID, b"\x01" * 15),
    "an int msgpack holds": _ext(values.EXT_INT, (5).to_bytes(9, "big")),
    "an int longer than the limit": _ext(values.EXT_INT, b"\x01" + b"\x00" * MAX_INT_BYTES),
    "object fields without a class path": _ext(values.EXT_OBJECT, [{"a": 1}]),
    "a class path that is code": _ext(values.EXT_OBJECT, ["__import__('os').system", {}]),
    "field names that are numbers": _ext(values.EXT_OBJECT, ["shop.Item", {1: 2}]),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_payload_pack_could_not_have_written_is_refused(name):
    with pytest.raises(ValueError, match="malformed request record"):
        decode_request(HOSTILE[name], 0, False, FINGERPRINT, None)


def test_object_fields_nested_beyond_the_limit_are_refused_without_recursing():
    payload = msgpack.packb(["a.B", {}])
    for _ in range(MAX_DEPTH + 5):
        payload = msgpack.packb(["a.B", {"f": msgpack.ExtType(values.EXT_OBJECT, payload)}])
    with pytest.raises(ValueError, match="nested more than 64 levels"):
        decode_request(_ext(values.EXT_OBJECT, payload), 0, False, FINGERPRINT, None)
    deep: object = 1
    for _ in range(MAX_DEPTH):
        deep = ObjectFields({"f": deep}, "a.B")
    with pytest.raises(ValueError, match="more than 64 levels deep"):
        encode_request(Request("https://a.example/", meta={"x": deep}))


def test_a_zone_unknown_here_is_read_with_its_offset_and_said_once(caplog):
    record = _ext(values.EXT_DATETIME, [2020, 6, 1, 12, 0, 0, 0, 0, ["Nowhere/Atlantis", 3_600_000_000]])
    with caplog.at_level(logging.WARNING, logger="diskfrontier"):
        first = decode_request(record, 0, False, FINGERPRINT, None).meta["x"]
        decode_request(record, 0, False, FINGERPRINT, None)
    assert first == datetime.datetime(2020, 6, 1, 11, tzinfo=datetime.timezone.utc)
    assert first.utcoffset() == datetime.timedelta(hours=1)
    said = [r.getMessage() for r in caplog.records if "Nowhere/Atlantis" in r.getMessage()]
    assert len(said) == 1 and "tzdata" in said[0]


def test_a_type_of_a_later_version_is_named_by_pop_and_by_verify(tmp_path):
    job = str(tmp_path / "job")
    later = _ext(values.EXT_OBJECT + 1, b"\x00")
    with Frontier(job) as frontier:
        frontier.push(Request("https://a.example/1"))
        stored = Request("https://b.example/later")
        assert frontier.push_record(stored, later)
    with Frontier(job) as frontier, pytest.raises(JobDirCorrupt) as raised:
        while frontier.pop() is not None:
            pass
    message = str(raised.value)
    assert "msgpack extension type 12" in message and "written by a later version of diskfrontier" in message
    assert "upgrade diskfrontier" in message
    report = verify(job)
    assert any("extension type 12" in str(finding) for finding in report.findings), report.findings


def test_export_writes_these_values_as_text(tmp_path):
    with Frontier(tmp_path / "job") as frontier:
        frontier.push(Request("https://a.example/", meta={"when": datetime.datetime(2020, 1, 2, tzinfo=PARIS),
                                                          "price": decimal.Decimal("9.90"), "id": uuid.UUID(int=3),
                                                          "wait": datetime.timedelta(minutes=2), "big": 2**70}))
    with Frontier(tmp_path / "job") as frontier:
        line = request_to_json(take(frontier))
    assert ('"when": "2020-01-02T00:00:00+01:00"' in line and '"price": "9.90"' in line
            and '"id": "00000000-0000-0000-0000-000000000003"' in line and '"wait": 120.0' in line
            and f'"big": {2**70}' in line), line
