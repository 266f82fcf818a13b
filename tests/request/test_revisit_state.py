"""A request's revisit state (``RevisitState``): checked at the door, stored as the request record's sixth
field, read back as it went in, and a record whose sixth field is not one refused as malformed."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskfrontier import Frontier, Request, RevisitState
from diskfrontier.request.codec import decode_request, encode_request
from diskfrontier.transfer.jsonlines import request_from_json, request_to_json

FINGERPRINT = b"\x05" * 20

states = st.builds(
    RevisitState,
    interval=st.floats(0, 10**10),
    fetched_at=st.floats(0, 10**11),
    etag=st.none() | st.text(max_size=40),
    last_modified=st.none() | st.text(max_size=40),
    signature=st.none() | st.binary(min_size=1, max_size=64),
    visits=st.integers(0, 2**32 - 1),
    changes=st.integers(0, 2**32 - 1),
    changed_at=st.none() | st.floats(0, 10**11),
    failures=st.integers(0, 2**32 - 1),
    not_modified=st.integers(0, 2**32 - 1),
    last_status=st.sampled_from([0, 200, 304, 999]),
)


@given(state=states, meta=st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))
def test_a_revisit_state_is_read_back_as_it_went_in(state, meta):
    request = Request("https://a.example/page", meta=meta, revisit=state)
    back = decode_request(encode_request(request), 0, False, FINGERPRINT, None)
    assert back.revisit == state
    assert back == request


def test_a_request_without_one_keeps_the_record_it_had():
    assert encode_request(Request("https://a.example/")) == msgpack.packb(["https://a.example/"])
    assert decode_request(encode_request(Request("https://a.example/")), 0, False, FINGERPRINT, None).revisit is None


@pytest.mark.parametrize("field, value", [
    ("interval", -1), ("interval", float("nan")), ("fetched_at", 10**12), ("etag", 5), ("etag", "x" * 1025),
    ("signature", b""), ("signature", "abc"), ("visits", -1), ("changes", 2**32), ("failures", True),
])
def test_a_bad_revisit_state_is_refused_naming_its_field(field, value):
    fields = {"interval": 60.0, "fetched_at": 1.7e9, field: value}
    with pytest.raises(ValueError, match=rf"RevisitState\.{field}"):
        RevisitState(**fields)


def test_a_request_refuses_a_revisit_that_is_not_a_state():
    with pytest.raises(TypeError, match=r"Request\.revisit must be a RevisitState"):
        Request("https://a.example/", revisit={"interval": 60})  # type: ignore[arg-type]


@pytest.mark.parametrize("sixth", [
    [60.0, 1.7e9], "state", [60.0, 1.7e9, None, None, None, 1, 0, None, 0, 0, "x"],
    [-5.0, 1.7e9, None, None, None, 1, 0, None, 0, 0, 0], [60.0, 1.7e9, None, None, b"", 1, 0, None, 0, 0, 0],
    [60.0, 1.7e9, None, None, None, 1, 0, None, 0, 0], [60.0, 1.7e9, None, None, None, 1, 0, None, 0, 0, 1000],
])
def test_a_record_whose_sixth_field_is_not_a_revisit_state_is_malformed(sixth):
    record = msgpack.packb(["https://a.example/", "GET", {}, b"", {}, sixth], use_bin_type=True)
    with pytest.raises(ValueError, match="malformed request record: its revisit state"):
        decode_request(record, 0, False, FINGERPRINT, None)


def test_a_revisit_state_goes_through_export_and_import_as_json():
    state = RevisitState(3600, 1.7e9, etag='W/"5"', last_modified="Tue, 01 Dec 2026 10:00:00 GMT",
                         signature=bytes(range(16)), visits=4, changes=1, changed_at=1.69e9)
    line = request_to_json(Request("https://a.example/", revisit=state))
    assert request_from_json(line).revisit == state


def test_a_job_directory_keeps_the_state_of_a_request_finished_with_its_next_visit(tmp_path):
    job = tmp_path / "job"
    state = RevisitState(0.0, 1.7e9, etag='"v1"', signature=b"\x01" * 16, visits=2, changes=1)
    with Frontier(job, maintenance=None) as f:
        f.push(Request("https://a.example/"))
        request = f.pop()
        assert request is not None and request.revisit is None
        request.revisit = state
        f.done(request, refetch_after=0)
    with Frontier(job, maintenance=None) as f:
        again = f.pop()
        assert again is not None and again.revisit == state
        f.compact()
        f.done(again, refetch_after=0)
    with Frontier(job, maintenance=None) as f:
        last = f.pop()
        assert last is not None and last.revisit == state
