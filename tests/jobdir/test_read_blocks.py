"""A pop reads the journal a block at a time (``JournalWriter.read_body``): every request comes back whole
and in order whatever its size and wherever it lies against a block's edges, and a record damaged on disk
before its block is read is still refused."""

from __future__ import annotations

import os
import random

import pytest

from diskfrontier import Frontier, Request
from diskfrontier.core.errors import JobDirCorrupt
from diskfrontier.jobdir.journal import READ_BLOCK


def _requests(rng: random.Random, n: int) -> list[Request]:
    """Requests whose records run from a few dozen bytes to several blocks, most of them small."""
    out = []
    for i in range(n):
        size = rng.choice([0, 0, 0, 10, 400, 3000, READ_BLOCK - 100, READ_BLOCK + 700, 3 * READ_BLOCK])
        out.append(Request(f"https://b{i % 7}.example/{i}", method="POST", body=bytes([i % 251]) * size,
                           priority=rng.randrange(-2, 3)))
    return out


@pytest.mark.parametrize("order", ["lifo", "fifo"])
def test_every_request_comes_back_whole_in_its_order(tmp_path, order):
    rng = random.Random(order)
    pushed = _requests(rng, 600)
    with Frontier(tmp_path / "job", order=order) as frontier:
        for request in pushed:
            assert frontier.push(request)
        assert os.path.getsize(tmp_path / "job" / "requests.urls") > 20 * READ_BLOCK  # many blocks to cross
        got = []
        while (popped := frontier.pop()) is not None:
            got.append((popped.url, popped.body, popped.priority))
            frontier.done(popped)
    by_priority: dict[int, list[tuple[str, bytes, int]]] = {}
    for request in pushed:
        by_priority.setdefault(request.priority, []).append((request.url, request.body, request.priority))
    want = []
    for priority in sorted(by_priority, reverse=True):
        entries = by_priority[priority]
        want += entries if order == "fifo" else entries[::-1]
    assert got == want


def test_a_record_damaged_before_its_block_is_read_is_refused(tmp_path):
    job = tmp_path / "job"
    with Frontier(job, order="fifo") as frontier:
        for i in range(3000):
            frontier.push(Request(f"https://d.example/{i}"))
    journal = job / "requests.urls"
    size = os.path.getsize(journal)
    assert size > 2 * READ_BLOCK
    with open(journal, "r+b") as f:  # a byte of a URL in the second block of the file, flipped
        f.seek(READ_BLOCK + READ_BLOCK // 2)
        byte = f.read(1)
        f.seek(READ_BLOCK + READ_BLOCK // 2)
        f.write(bytes([byte[0] ^ 0x20]))
    with Frontier(job) as frontier, pytest.raises(JobDirCorrupt):
        while (request := frontier.pop()) is not None:
            frontier.done(request)
