"""The limits of a request: what is refused at the door, and records beyond them never read.

A request whose URL, body, stored record or ``meta`` nesting is beyond the limits of
``diskfrontier.request.model`` raises ``RequestTooLarge`` (a ``ValueError``) before anything is
written; a record beyond them in a job directory is refused as damage, without crashing
the interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import msgpack
import pytest

import diskfrontier
from diskfrontier import Frontier, Request
from diskfrontier.core.errors import RequestTooLarge
from diskfrontier.jobdir.journal import MAX_BODY
from diskfrontier.request import codec
from diskfrontier.request.codec import Unencodable, decode_request, encode_request
from diskfrontier.request.model import MAX_BODY_BYTES, MAX_DEPTH, MAX_RECORD_BYTES, MAX_URL_LENGTH

FINGERPRINT = b"\x01" * 20
PACKAGE_ROOT = os.path.dirname(os.path.dirname(diskfrontier.__file__))


def nested(levels: int, kind: str) -> object:
    """A container ``levels`` deep of one kind ('list', 'dict', 'tuple', 'frozenset'), or 'mixed'."""
    kinds = ["list", "tuple", "dict", "set"] if kind == "mixed" else [kind]
    value: object = 0
    for level in range(levels):
        shape = kinds[level % len(kinds)]
        if shape == "set":  # a set can only hold hashable items: it is the innermost container
            value = {0} if level == 0 else [value]
        else:
            value = {"list": lambda v: [v], "tuple": lambda v: (v,), "dict": lambda v: {"k": v},
                     "frozenset": lambda v: frozenset([v])}[shape](value)
    return value


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that imports this diskfrontier (a crash there is only its own)."""
    env = {**os.environ, "PYTHONPATH": PACKAGE_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], check=False, env=env,
                          capture_output=True, text=True, timeout=120)


def hostile_record(levels: int) -> bytes:
    """A request record whose meta holds tuples (msgpack extension type 1) ``levels`` deep."""
    inner = msgpack.packb([])
    for _ in range(levels):
        inner = msgpack.packb([msgpack.ExtType(codec.EXT_TUPLE, inner)])
    return msgpack.packb(["https://a.com/", "GET", {}, b"", {"x": msgpack.ExtType(codec.EXT_TUPLE, inner)}])


def test_the_limits_fit_in_a_journal_record():
    assert MAX_BODY_BYTES + MAX_URL_LENGTH < MAX_RECORD_BYTES
    assert MAX_RECORD_BYTES + 512 < MAX_BODY  # plus the PUSH header: priority, flags, fingerprint


# ---------------------------------------------------------------- nesting depth

@pytest.mark.parametrize("kind", ["list", "dict", "tuple", "frozenset", "mixed"])
def test_meta_nested_to_the_limit_is_stored_and_one_more_level_is_refused(kind):
    deepest = {"x": nested(MAX_DEPTH - 1, kind)}  # meta itself is the first level
    request = Request("https://a.com/", meta=deepest)
    assert decode_request(encode_request(request), 0, False, FINGERPRINT, None).meta == deepest
    with pytest.raises(RequestTooLarge, match=r"Request.meta\['x'\] nests .* more than 64 levels deep"):
        encode_request(Request("https://a.com/", meta={"ok": 1, "x": nested(MAX_DEPTH, kind)}))


def test_a_deep_meta_is_refused_by_push_before_anything_is_written(tmp_path):
    deep = Request("https://a.com/deep", meta={"x": nested(200, "tuple")})
    good = Request("https://a.com/good")
    with Frontier(tmp_path / "job") as frontier:
        size = frontier.stats()["journal_bytes"]
        with pytest.raises(RequestTooLarge) as info:
            frontier.push(deep)
        assert isinstance(info.value, ValueError) and not isinstance(info.value, Unencodable)
        with pytest.raises(RequestTooLarge):
            frontier.push_many([good, deep])
        stats = frontier.stats()
        assert stats["journal_bytes"] == size and len(frontier) == 0 and stats["memory_only"] == 0
        assert not frontier.has_seen(deep.fingerprint) and not frontier.has_seen(good.fingerprint)
        assert frontier.push(good)  # not taken for a duplicate: the failed batch left nothing behind
    with Frontier(tmp_path / "job") as frontier:
        assert frontier.pop() == good and frontier.pop() is None


def test_meta_that_holds_itself_is_refused():
    loop: list = []
    loop.append(loop)
    through_a_tuple: tuple[list] = ([],)
    through_a_tuple[0].append(through_a_tuple)  # packing this once recursed until RecursionError
    for meta in ({"loop": loop}, {"t": through_a_tuple}):
        with pytest.raises(RequestTooLarge, match="or holds itself"):
            encode_request(Request("https://a.com/", meta=meta))


def test_a_record_nested_10000_deep_is_refused_without_a_crash():
    result = run_python("""
        import sys
        import msgpack
        from diskfrontier.request import codec
        inner = msgpack.packb([])
        for _ in range(10_000):
            inner = msgpack.packb([msgpack.ExtType(codec.EXT_TUPLE, inner)])
        record = msgpack.packb(["https://a.com/", "GET", {}, b"", {"x": msgpack.ExtType(1, inner)}])
        try:
            codec.decode_request(record, 0, False, b"f" * 20, None)
        except ValueError as exc:
            print("refused:", exc)
    """)
    assert result.returncode == 0, f"returncode {result.returncode} (-11 is a segfault): {result.stderr[-2000:]}"
    assert "refused: malformed request record" in result.stdout and "64 levels deep" in result.stdout


def plain_record(levels: int) -> bytes:
    """A record whose meta is ``{"x": [[...[None]...]]}``, ``levels`` arrays deep (built by hand)."""
    head = msgpack.packb(["https://a.com/", "GET", {}, b""])
    return b"\x95" + head[1:] + b"\x81\xa1x" + b"\x91" * levels + b"\xc0"


@pytest.mark.parametrize("levels", [MAX_DEPTH, 500, 2_000])
def test_a_record_of_plain_arrays_nested_too_deep_is_refused(levels):
    with pytest.raises(ValueError, match="malformed request record"):
        decode_request(plain_record(levels), 0, False, FINGERPRINT, None)


def test_a_record_of_plain_arrays_at_the_limit_is_read():
    meta = decode_request(plain_record(MAX_DEPTH - 1), 0, False, FINGERPRINT, None).meta
    depth, value = 0, meta["x"]
    while isinstance(value, list):
        depth, value = depth + 1, value[0]
    assert depth == MAX_DEPTH - 1 and value is None


def test_a_deep_record_in_a_job_directory_is_damage_not_a_crash(tmp_path):
    job = str(tmp_path / "job")
    write = run_python("""
        import sys
        from diskfrontier import Frontier, Request
        sys.path.insert(0, sys.argv[2])
        from test_limits import hostile_record
        with Frontier(sys.argv[1]) as frontier:  # a record stored as is: what a hostile job directory holds
            store = getattr(frontier, "push_record", None) or frontier._push_record
            store(Request("https://a.com/"), hostile_record(10_000))
    """, job, os.path.dirname(__file__))
    assert write.returncode == 0, write.stderr[-2000:]
    peek = run_python("from diskfrontier.cli import main; main()", "peek", job)
    assert peek.returncode > 0, f"returncode {peek.returncode} (-11 is a segfault): {peek.stderr[-2000:]}"
    assert "levels deep" in peek.stderr and "Traceback" not in peek.stderr
    pop = run_python("""
        import sys
        from diskfrontier import Frontier, JobDirCorrupt
        frontier = Frontier(sys.argv[1])
        try:
            frontier.pop()
        except JobDirCorrupt as exc:
            print("refused:", exc)
    """, job)
    assert pop.returncode == 0, f"returncode {pop.returncode} (-11 is a segfault): {pop.stderr[-2000:]}"
    assert "refused:" in pop.stdout and "levels deep" in pop.stdout


# ---------------------------------------------------------------- sizes

def test_a_body_over_the_limit_is_refused_at_construction():
    body = bytearray(MAX_BODY_BYTES)
    assert len(Request("https://a.com/", method="POST", body=body).body) == MAX_BODY_BYTES
    body.append(0)
    words = r"Request.body is 67,108,865 bytes, more than the limit of 67,108,864 \(MAX_BODY_BYTES, 64 MiB\)"
    for kind in (bytearray, memoryview, bytes):  # one 64 MiB buffer at a time
        with pytest.raises(RequestTooLarge, match=words):
            Request("https://a.com/", method="POST", body=kind(body) if kind is not bytearray else body)
    del body
    with pytest.raises(RequestTooLarge, match="67,108,866 bytes"):  # a str counts in UTF-8 bytes
        Request("https://a.com/", method="POST", body="\u00e9" * (MAX_BODY_BYTES // 2 + 1))


def test_an_absurdly_long_url_is_refused_quickly_with_a_short_message():
    url = ("https://a.com/" + "a" * 86) * 1_000_000  # 100 MB in one allocation
    started = time.monotonic()
    with pytest.raises(RequestTooLarge) as info:
        Request(url)
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert len(message) < 400 and "100,000,000 characters" in message and "MAX_URL_LENGTH" in message


def test_the_url_limit_is_counted_after_escaping():
    base = "https://a.com/"
    assert len(Request(base + "a" * (MAX_URL_LENGTH - len(base))).url) == MAX_URL_LENGTH
    with pytest.raises(RequestTooLarge, match="1,048,577 characters"):
        Request(base + "a" * (MAX_URL_LENGTH - len(base) + 1))
    with pytest.raises(RequestTooLarge, match="MAX_URL_LENGTH"):  # each é becomes %C3%A9
        Request(base + "\u00e9" * (MAX_URL_LENGTH // 5))


def test_a_record_over_the_limit_is_refused_by_push_before_anything_is_written(tmp_path):
    request = Request("https://a.com/", meta={"blob": bytes(MAX_RECORD_BYTES)})
    with Frontier(tmp_path / "job") as frontier:
        size = frontier.stats()["journal_bytes"]
        with pytest.raises(RequestTooLarge, match=r"more than the limit of 69,206,016 \(MAX_RECORD_BYTES\)"):
            frontier.push(request)
        assert frontier.stats()["journal_bytes"] == size and len(frontier) == 0


def test_decode_refuses_what_encode_never_writes(monkeypatch):
    too_long_url = msgpack.packb(["https://a.com/" + "a" * MAX_URL_LENGTH])
    with pytest.raises(ValueError, match="URL or body is longer"):
        decode_request(too_long_url, 0, False, FINGERPRINT, None)
    with pytest.raises(ValueError, match="its meta is a list"):
        decode_request(msgpack.packb(["https://a.com/", "GET", {}, b"", [1]]), 0, False, FINGERPRINT, None)
    record = encode_request(Request("https://a.com/", meta={"blob": b"x" * 100}))
    monkeypatch.setattr(codec, "MAX_RECORD_BYTES", 100)
    with pytest.raises(ValueError, match="more than the 100 a request record may hold"):
        decode_request(memoryview(record), 0, False, FINGERPRINT, None)
