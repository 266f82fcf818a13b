"""verify decodes every pending request; repair sets aside what cannot be served (issue 19, defect 7).

The records here have valid checksums (framed by the journal's own ``frame``) but hold
requests that no frontier may hand out: bytes that are not msgpack, a URL with no host, a
header value that would inject a header line. Before, ``verify`` said sound, ``--repair``
changed nothing, and ``pop`` either named the record with advice to run ``verify --repair``
(forever) or handed the request out as it was.
"""

from __future__ import annotations

import base64
import json
import os

import msgpack
import pytest
from click.testing import CliRunner
from jobkit import dir_salt

from diskfrontier import Frontier, Request
from diskfrontier.cli import main
from diskfrontier.core.errors import JobDirCorrupt
from diskfrontier.jobdir.journal import REFETCH, RETRY, frame, push_body
from diskfrontier.jobdir.maintenance.verify import verify

GOOD = ["https://a.example/1", "https://a.example/2", "https://b.example/3"]
BAD = {
    "not msgpack": b"\xc1\xc1\xc1",
    "no host": msgpack.packb(["https:///nohost"]),
    "no scheme": msgpack.packb(["a.example/path"]),
    "CRLF header": msgpack.packb(["https://c.example/", "GET", {"X-A": "1\r\nInjected: yes"}]),
    "bad method": msgpack.packb(["https://c.example/", "GET /evil HTTP/1.1\r\nHost"]),
    "header name": msgpack.packb(["https://c.example/", "GET", {"Bad Name:": "v"}]),
}


def _append(journal: str, body: bytes) -> int:
    """Append one record framed for where it lands (valid checksums); return its offset."""
    offset = os.path.getsize(journal)
    with open(journal, "ab") as f:
        f.write(frame(offset, body, dir_salt(os.path.dirname(journal))))
    return offset


def _bad_body(record: bytes, n: int, **kwargs) -> bytes:
    return push_body(0, False, n.to_bytes(20, "big"), record, slot=b"c.example", **kwargs)


def _drain(job: str) -> list[str]:
    urls = []
    with Frontier(job) as frontier:
        while (request := frontier.pop()) is not None:
            urls.append(request.url)
            frontier.done(request)
    return urls


@pytest.fixture
def job(tmp_path):
    """A closed job directory: the GOOD requests pending, then one record of each BAD kind, then one more good."""
    path = str(tmp_path / "job")
    with Frontier(path) as frontier:
        for url in GOOD:
            frontier.push(Request(url))
    journal = os.path.join(path, "requests.urls")
    offsets = {name: _append(journal, _bad_body(record, n)) for n, (name, record) in enumerate(BAD.items())}
    with Frontier(path) as frontier:
        frontier.push(Request("https://d.example/4"))
    return path, offsets


@pytest.mark.parametrize("kind", list(BAD))
def test_pop_refuses_a_stored_request_that_fails_validation(tmp_path, kind):
    path = str(tmp_path / "job")
    Frontier(path).close()
    offset = _append(os.path.join(path, "requests.urls"), _bad_body(BAD[kind], 1))
    with Frontier(path) as frontier, pytest.raises(JobDirCorrupt) as raised:
        frontier.pop()
    assert raised.value.offset == offset and "verify --repair" in str(raised.value)


def test_verify_names_every_request_that_cannot_be_served(job):
    path, offsets = job
    report = verify(path)
    assert not report.sound
    named = {f.offset: f.problem for f in report.findings}
    assert set(named) == set(offsets.values())
    assert all("cannot be served" in problem for problem in named.values())
    assert "CR, LF or NUL" in named[offsets["CRLF header"]]
    assert "has no host" in named[offsets["no host"]]


def test_repair_sets_them_aside_and_a_drain_serves_every_good_request(job):
    path, offsets = job
    report = verify(path, repair=True)
    assert report.repaired and len(report.set_aside) == 1
    side = report.set_aside[0]
    assert os.path.dirname(side) == path and os.path.basename(side).startswith("requests.urls.rejected-")
    assert any(side in note for note in report.notes)
    with open(side, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert sorted(row["offset"] for row in rows) == sorted(offsets.values())
    by_offset = {row["offset"]: row for row in rows}
    assert base64.b64decode(by_offset[offsets["not msgpack"]]["record"]).endswith(BAD["not msgpack"])
    assert by_offset[offsets["CRLF header"]]["url"] is None or by_offset[offsets["CRLF header"]]["url"].startswith(
        "https://c.example")
    assert verify(path).sound
    assert sorted(_drain(path)) == sorted([*GOOD, "https://d.example/4"])
    assert verify(path).sound


@pytest.mark.parametrize("kind", [RETRY, REFETCH])
def test_a_bad_retry_set_aside_leaves_the_request_it_replaced_finished(tmp_path, kind):
    path = str(tmp_path / "job")
    with Frontier(path) as frontier:
        frontier.push(Request("https://a.example/old"))
        frontier.push(Request("https://a.example/kept"))
    journal = os.path.join(path, "requests.urls")
    frontier = Frontier(path)
    first = frontier.pop()
    assert first is not None
    target, old_url = first._seq, first.url  # its journal offset
    frontier._closing.release_files()  # stopped without a close: the request is still pending at target
    frontier._lock.release()
    _append(journal, _bad_body(BAD["no host"], kind, kind=kind, target=target))
    report = verify(path, repair=True)
    assert report.repaired and verify(path).sound
    left = sorted({"https://a.example/old", "https://a.example/kept"} - {old_url})
    assert _drain(path) == left


def test_the_cli_lists_the_side_file(job):
    path, offsets = job
    runner = CliRunner()
    result = runner.invoke(main, ["verify", path])
    assert result.exit_code == 1
    assert sum("cannot be served" in line for line in result.output.splitlines()) == len(offsets)
    result = runner.invoke(main, ["verify", path, "--repair", "--json"])
    data = json.loads(result.output)
    assert data["repaired"] and len(data["set_aside"]) == 1 and os.path.exists(data["set_aside"][0])
    assert runner.invoke(main, ["verify", path]).exit_code == 0
