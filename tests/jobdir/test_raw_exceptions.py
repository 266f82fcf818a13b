"""No raw RecursionError or OverflowError from what a job directory's files say (issue 19, defect 6).

Deeply nested JSON (100,000 levels) in ``frontier.json``, ``requests.cursor``,
``requests.queue/active.json`` or a FIFO queue's ``info.json`` is named as damage (or
distrusted and rebuilt), and every number read from those files is range-checked: a
cursor whose ``last_record`` is 2**63, with a valid checksum, made ``open`` raise
``OverflowError`` while ``verify`` said sound.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import pytest
from jobkit import dir_id

from diskfrontier import Frontier, Request
from diskfrontier.core.errors import FrontierError, JobDirCorrupt
from diskfrontier.jobdir.checkpoint import _crc, read_checkpoint
from diskfrontier.jobdir.maintenance.verify import verify
from diskfrontier.jobdir.queues import BatchedFifoQueue, queue_crc

DEEP = "[" * 100_000 + "]" * 100_000
BIG = 2**63
URLS = [f"https://h{i % 3}.example/{i}" for i in range(12)]


def _job(tmp_path, order: str = "lifo") -> str:
    path = str(tmp_path / "job")
    with Frontier(path, order=order) as frontier:
        for i, url in enumerate(URLS):
            frontier.push(Request(url, priority=i % 2))
    return path


def _drain(path: str) -> list[str]:
    with Frontier(path) as frontier:
        out = []
        while (request := frontier.pop()) is not None:
            out.append(request.url)
            frontier.done(request)
    return out


def _forge_cursor(path: str, **changes) -> None:
    """Change fields of the clean checkpoint and give it a matching checksum (as a forger could)."""
    cursor = os.path.join(path, "requests.cursor")
    with open(cursor) as f:
        value = json.load(f)
    value.pop("crc")
    value.update(changes)
    value["crc"] = _crc(value)
    with open(cursor, "w") as f:
        json.dump(value, f)


def _trust_queues(path: str) -> None:
    """Give the checkpoint the checksums of the queue files as they are now."""
    with open(os.path.join(path, "requests.cursor")) as f:
        queues = json.load(f)["queues"]
    directory = os.path.join(path, "requests.queue")
    _forge_cursor(path, queues={p: queue_crc(directory, int(p)) for p in queues})


def _named_or_rebuilt(path: str, file: str, words: str) -> None:
    """Opening ``path`` either names ``file`` as damaged, or distrusts it and hands out every request."""
    try:
        urls = _drain(path)
    except JobDirCorrupt as exc:
        assert exc.file == file and words in str(exc)
    else:
        assert sorted(urls) == sorted(URLS)


def _cli(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "diskfrontier", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("name", ["frontier.json", "requests.cursor", "requests.queue/active.json"])
def test_deeply_nested_json_is_named_not_a_recursion_error(tmp_path, name):
    path = _job(tmp_path)
    with open(os.path.join(path, name), "w") as f:
        f.write(DEEP)
    if name == "frontier.json":
        with pytest.raises(JobDirCorrupt) as raised:
            Frontier(path)
        assert raised.value.file.endswith("frontier.json") and "nest" in str(raised.value)
        assert not verify(path).sound
    else:  # a derived file: distrusted, the queues are rebuilt from the journal
        verify(path)
        assert sorted(_drain(path)) == sorted(URLS)
    for command in ("inspect", "peek", "hosts", "failed", "verify"):
        result = _cli(command, path)
        assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr, (command, result.stderr)


def test_deeply_nested_info_json_of_a_trusted_fifo_queue_is_named(tmp_path):
    path = _job(tmp_path, order="fifo")
    directory = os.path.join(path, "requests.queue")
    folder = next(os.path.join(directory, n) for n in os.listdir(directory) if n.startswith("p"))
    with open(os.path.join(folder, "info.json"), "w") as f:
        f.write(DEEP)
    _trust_queues(path)
    _named_or_rebuilt(path, os.path.join(folder, "info.json"), "nest")


@pytest.mark.parametrize("text", [DEEP, json.dumps({"chunksize": 10, "size": 1, "head": [BIG, 0], "tail": [0, 0, 0]})])
def test_the_fifo_queue_reads_its_info_json_bounded(tmp_path, text):
    folder = tmp_path / "p0"
    folder.mkdir()
    (folder / "info.json").write_text(text)
    with pytest.raises(JobDirCorrupt) as raised:
        BatchedFifoQueue(str(folder))
    assert raised.value.file == str(folder / "info.json")


@pytest.mark.parametrize("field", ["tail", "head", "size", "chunksize"])
def test_out_of_range_numbers_in_info_json_are_named(tmp_path, field):
    path = _job(tmp_path, order="fifo")
    directory = os.path.join(path, "requests.queue")
    folder = next(os.path.join(directory, n) for n in os.listdir(directory) if n.startswith("p"))
    info_path = os.path.join(folder, "info.json")
    with open(info_path) as f:
        info = json.load(f)
    info[field] = {"tail": [BIG, 0, 0], "head": [BIG, 0], "size": BIG, "chunksize": -1}[field]
    with open(info_path, "w") as f:
        json.dump(info, f)
    _trust_queues(path)
    _named_or_rebuilt(path, info_path, "outside")


@pytest.mark.parametrize("value", [BIG, 2**64, 10**30, -2])
def test_a_cursor_with_last_record_out_of_range_is_damage_verify_names(tmp_path, value):
    path = _job(tmp_path)
    _forge_cursor(path, last_record=value)
    saved = read_checkpoint(os.path.join(path, "requests.cursor"), dir_id(path))
    assert not saved.clean and saved.problem is not None and "last_record" in saved.problem
    report = verify(path)
    assert not report.sound
    assert any(f.file.endswith("requests.cursor") and "last_record" in f.problem for f in report.findings)
    assert sorted(_drain(path)) == sorted(URLS)  # opened: rebuilt from the journal, nothing lost


@pytest.mark.parametrize("field,value", [
    ("journal_bytes", BIG), ("seen_bytes", BIG), ("journal_pushes", BIG), ("journal_dones", BIG),
    ("live_bytes", 2**64), ("journal_crc", 2**32), ("seen_tail", [BIG, 1]), ("seen_tail", [0, 2**32]),
    ("pending", {str(BIG): 12}), ("queues", {"0": 2**40, "1": 1}), ("hosts_file", [BIG, 1]),
    ("seen_index", [0, 0, 2**33, 0]), ("pid", BIG),
])
def test_no_cursor_number_out_of_range_reaches_the_frontier(tmp_path, field, value):
    path = _job(tmp_path)
    _forge_cursor(path, **{field: value})
    try:
        verify(path)
        assert sorted(_drain(path)) == sorted(URLS)
    except FrontierError:
        pass  # named: fine
    result = _cli("inspect", path)
    assert "Traceback" not in result.stderr, result.stderr


def test_an_active_json_priority_out_of_range_is_distrusted(tmp_path):
    path = _job(tmp_path)
    with open(os.path.join(path, "requests.queue", "active.json"), "w") as f:
        json.dump([BIG, 0], f)
    _forge_cursor(path, queues={str(BIG): 1, "0": 1})
    verify(path)  # named or noted, never raised
    assert sorted(_drain(path)) == sorted(URLS)


def test_a_queue_entry_past_any_file_is_named_at_pop(tmp_path):
    path = _job(tmp_path)
    queue = os.path.join(path, "requests.queue", "p1")
    with open(queue, "r+b") as f:  # the newest entry: its 8-byte offset, then its 4-byte length
        f.seek(-12, os.SEEK_END)
        f.write(struct.pack(">Q", BIG + 5))
    _trust_queues(path)
    with Frontier(path) as frontier, pytest.raises(JobDirCorrupt) as raised:
        frontier.pop()
    assert raised.value.file == queue and str(BIG + 5) in str(raised.value)


def test_commands_reading_a_queue_entry_past_any_file_name_it(tmp_path):
    path = _job(tmp_path)
    with open(os.path.join(path, "requests.queue", "p1"), "r+b") as f:
        f.seek(-12, os.SEEK_END)
        f.write(struct.pack(">Q", BIG + 5))
    _trust_queues(path)
    for command in ("peek", "inspect", "verify", "export"):
        result = _cli(command, path)
        assert "Traceback" not in result.stderr, (command, result.stderr)
