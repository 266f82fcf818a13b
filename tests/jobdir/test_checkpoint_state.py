"""A saved state (requests.state.*) and the journal after it read as one: the same as the whole journal read.

Random workloads of every verb write real journals; at random points the state up to there is
made, written, read back, and then the scan that starts from it must agree, field by field, with
the scan from the journal's first record, up to any later point. A state that does not describe the
journal (another directory's, an older journal's, a damaged one) is refused, never used.
"""

from __future__ import annotations

import os
import random
import shutil
from typing import Any

import pytest
from jobkit import dir_id, dir_salt
from popkit import take

from diskfrontier import Frontier, Request
from diskfrontier.jobdir.replay import JournalState, read_state
from diskfrontier.jobdir.statefile import (
    StateRecord,
    StateUnusable,
    encode_state,
    read_state_file,
    state_name,
    write_state,
)


def _summary(state: JournalState) -> dict[str, Any]:
    names = state.host_names
    return {
        "counts": state.counts,
        "pending": {p: list(offsets) for p, offsets in state.pending.items()},
        "delayed": sorted(state.delayed),
        "pushes": state.pushes,
        "dones": state.dones,
        "live_bytes": state.live_bytes,
        "failed": list(state.failed.items()),
        "failed_bytes": state.failed_bytes,
        "paused_since": state.paused_since,
        "dropped": state.dropped,
        "last_record": state.last_record,
        "end_crc": state.end_crc,
        "host_pending": {names[h]: n for h, n in state.host_pending.items() if n},
        "host_done": {names[h]: n for h, n in enumerate(state.host_done) if n},
        "settings": {names[h]: (r.delay if r.delay == r.delay else None, r.blocked_until, r.budget, r.done)
                     for h, r in state.host_settings.items()},
        "applied": dict(state.applied),
    }


def _scan(job: str, **kwargs: Any) -> JournalState:
    return read_state(os.path.join(job, "requests.urls"), salt=dir_salt(job), sizes=True, hosts=True,
                      hold_after=1e12, **kwargs)


class _Workload:
    """Random calls of every kind that writes the journal, on one open frontier."""

    def __init__(self, frontier: Frontier, rng: random.Random) -> None:
        self.f, self.rng = frontier, rng
        self.inflight: list[Request] = []
        self.n = 0

    def step(self) -> None:
        f, rng = self.f, self.rng
        roll = rng.random()
        if roll < 0.35 or not len(f):
            batch = [Request(f"https://h{rng.randrange(6)}.example/{self.n + i}", priority=rng.choice((0, 0, 1, -3)))
                     for i in range(rng.choice((1, 1, 5)))]
            self.n += len(batch)
            if len(batch) == 1 and rng.random() < 0.3:
                f.push(batch[0], not_before=rng.choice((1e10, 1.0)))
            else:
                f.push_many(batch)
        elif roll < 0.6:
            request = f.pop()
            if request is not None:
                self.inflight.append(request)
        elif roll < 0.93 and self.inflight:
            request = self.inflight.pop(rng.randrange(len(self.inflight)))
            kind = rng.random()
            if kind < 0.6:
                f.done(request)
            elif kind < 0.7:
                f.retry(request, delay=rng.choice((0, 1e9)))
            elif kind < 0.8:
                f.done(request, refetch_after=rng.choice((0.0, 1e9)))
            else:
                f.fail(request, "x" * rng.randrange(40))
        elif roll < 0.95:
            f.requeue_failed(limit=rng.choice((1, None)))
        elif roll < 0.97:
            f.set_delay(f"h{rng.randrange(6)}.example", rng.choice((0.5, None)))
        elif roll < 0.98:
            f.set_budget(f"h{rng.randrange(6)}.example", rng.choice((100, None)))
        elif roll < 0.99:
            (f.pause if rng.random() < 0.5 else f.resume)()
        else:
            f.drop(host=f"h{rng.randrange(6)}.example")


@pytest.mark.parametrize("seed", range(12))
def test_a_saved_state_and_the_rest_of_the_journal_read_as_the_whole_journal(tmp_path, seed):
    rng = random.Random(seed)
    job = str(tmp_path / "job")
    ident, checked = None, 0
    with Frontier(job, per_host=rng.choice((None, 2)), watch=False) as f:
        ident, salt = dir_id(job), dir_salt(job)
        work = _Workload(f, rng)
        saved: list[StateRecord] = []
        for _ in range(rng.randrange(150, 400)):
            work.step()
            if rng.random() < 0.04:
                f._state.seen.flush()
                at = f._state.journal.size
                made = _scan(job, until=at, save=ident).saved
                assert made is not None and made.at == at
                assert made.journal_crc == f._state.journal.crc  # the writer's running crc agrees
                saved.append(write_state(job, state_name(at, rng.getrandbits(32)), made, salt, durable=False))
        full = _scan(job)
        whole = _summary(full)
        # what the frontier keeps as it goes agrees with what a scan finds
        assert (f._state.live_bytes, f._state.failed_bytes) == (full.live_bytes, full.failed_bytes)
        assert (f._state.pushes, f._state.dones) == (full.pushes, full.dones)
        for record in saved:
            start = read_state_file(job, record, ident, salt)
            assert _summary(_scan(job, start=start)) == whole
            checked += 1
            again = _scan(job, start=start, until=f._state.journal.size, save=ident).saved
            direct = _scan(job, until=f._state.journal.size, save=ident).saved
            assert again is not None and direct is not None
            assert encode_state(again, salt) == encode_state(direct, salt)  # made either way, byte for byte
    assert checked or seed % 3 == 2  # most seeds checkpoint at least once


def _one_state(tmp_path, name="job") -> tuple[str, StateRecord]:
    job = str(tmp_path / name)
    with Frontier(job, watch=False) as f:
        f.push_many(Request(f"https://a.example/{i}") for i in range(50))
        for _ in range(20):
            f.done(take(f))
        at = f._state.journal.size
        made = _scan(job, until=at, save=dir_id(job)).saved
        assert made is not None
        record = write_state(job, state_name(at, 1), made, dir_salt(job), durable=False)
    return job, record


def test_a_state_of_another_directory_is_refused(tmp_path):
    job, record = _one_state(tmp_path)
    other, _ = _one_state(tmp_path, "other")
    shutil.copy(os.path.join(job, record.name), os.path.join(other, record.name))
    with pytest.raises(StateUnusable, match="checksum"):
        read_state_file(other, record, dir_id(other), dir_salt(other))
    # the same bytes under a new crc: the id it holds is still the other directory's
    state = read_state_file(job, record, dir_id(job), dir_salt(job))
    state.ident = dir_id(other)
    with pytest.raises(StateUnusable, match=r"first .* bytes are not those it describes"):
        _scan(other, start=state)


def test_a_state_of_the_journal_before_a_compaction_is_refused(tmp_path):
    job, record = _one_state(tmp_path)
    state = read_state_file(job, record, dir_id(job), dir_salt(job))
    with Frontier(job, watch=False) as f:
        f.compact()
    assert not os.path.exists(os.path.join(job, record.name))  # named by no checkpoint: removed at the open
    with pytest.raises(StateUnusable):
        _scan(job, start=state)


@pytest.mark.parametrize("where", ["head", "array", "crc"])
def test_a_damaged_state_file_is_refused(tmp_path, where):
    job, record = _one_state(tmp_path)
    path = os.path.join(job, record.name)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    at = {"head": 20, "array": len(data) // 2, "crc": len(data) - 2}[where]
    data[at] ^= 0x40
    with open(path, "wb") as out:
        out.write(data)
    with pytest.raises(StateUnusable, match="size or crc32 differs"):
        read_state_file(job, record, dir_id(job), dir_salt(job))
    fixed = StateRecord(record.name, record.size, __import__("zlib").crc32(bytes(data)), record.at,
                        record.journal_crc)  # as if the checkpoint named the damaged bytes
    with pytest.raises(StateUnusable):
        read_state_file(job, fixed, dir_id(job), dir_salt(job))
