"""Unit tests of the storage parts themselves: the journal scan, the queues (one contract
suite run against every queue class, in queuelib's style), the seen index and the seen
file's checksums."""

from __future__ import annotations

import hashlib
import os
import random
import struct
from pathlib import Path

import pytest
from queuelib import FifoDiskQueue

from diskfrontier.core.errors import JobDirCorrupt
from diskfrontier.jobdir import seenindex
from diskfrontier.jobdir.journal import (
    FRAME,
    MAGIC,
    JournalScan,
    JournalWriter,
    done_body,
    frame,
    frame_all,
    push_body,
    read_record,
)
from diskfrontier.jobdir.queues import BATCH, BatchedFifoQueue, BatchedLifoQueue
from diskfrontier.jobdir.replay import read_state
from diskfrontier.jobdir.seen import BLOCK, SeenFile, read_sums
from diskfrontier.jobdir.seenindex import IndexRecord, SeenIndex

SALT = 0x5EED1234  # the salt of the journals these tests write (a job directory's comes from its id)


def write_journal(path, bodies) -> list[int]:
    JournalWriter.create(str(path))
    writer = JournalWriter(str(path), len(MAGIC), salt=SALT, fsync=False)
    data, offsets = frame_all(writer.size, bodies, SALT)
    writer.write(data)
    writer.close()
    return offsets


def pushes(n: int, priority: int = 0) -> list[bytes]:
    return [push_body(priority, False, bytes([i % 256]) * 20, b"\x91\xa1x") for i in range(n)]


# ---------------------------------------------------------------- the journal scan
def test_scan_yields_every_record_at_its_offset(tmp_path):
    path = tmp_path / "j"
    offsets = write_journal(path, pushes(50))
    scan = JournalScan(str(path), salt=SALT)
    assert [offset for offset, _ in scan] == offsets
    assert scan.result.end == os.path.getsize(path) and scan.result.torn == 0


def test_frames_are_bound_to_their_offset(tmp_path):
    body = push_body(0, False, b"f" * 20, b"\x91\xa1x")
    assert frame(8, body, SALT) != frame(8 + len(body) + FRAME.size, body, SALT)
    assert frame(8, body, SALT) != frame(8, body, SALT ^ 1)  # and to their job directory
    path = tmp_path / "j"
    write_journal(path, pushes(3))
    data = path.read_bytes()
    first = data[8:8 + FRAME.size + len(pushes(1)[0])]
    path.write_bytes(data + first)  # an intact record copied to another place
    with pytest.raises(JobDirCorrupt) as info:
        list(JournalScan(str(path), salt=SALT))
    assert info.value.offset == len(data)


@pytest.mark.parametrize("cut", [1, 5, 9, 10, 20])
def test_a_write_cut_short_is_a_torn_tail(tmp_path, cut):
    path = tmp_path / "j"
    offsets = write_journal(path, pushes(5))
    size = os.path.getsize(path)
    os.truncate(path, size - cut)
    scan = JournalScan(str(path), salt=SALT)
    assert [o for o, _ in scan] == offsets[:4]
    assert scan.result.end == offsets[4] and scan.result.torn == size - cut - offsets[4]


def test_a_torn_tail_below_the_floor_is_damage(tmp_path):
    path = tmp_path / "j"
    offsets = write_journal(path, pushes(5))
    size = os.path.getsize(path)
    os.truncate(path, size - 3)
    with pytest.raises(JobDirCorrupt):
        list(JournalScan(str(path), salt=SALT, floor=size))
    with pytest.raises(JobDirCorrupt):
        list(JournalScan(str(path), salt=SALT, floor=offsets[4] + 1))
    assert len(list(JournalScan(str(path), salt=SALT, floor=offsets[4]))) == 4


def test_zeros_to_the_end_are_a_torn_tail(tmp_path):
    path = tmp_path / "j"
    write_journal(path, pushes(5))
    with open(path, "ab") as f:
        f.write(b"\0" * 5000)
    scan = JournalScan(str(path), salt=SALT)
    assert len(list(scan)) == 5 and scan.result.torn == 5000


def test_a_full_checksum_mismatch_at_the_end_is_damage_not_a_tear(tmp_path):
    path = tmp_path / "j"
    offsets = write_journal(path, pushes(5))
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # every byte of the last record is there: a kill cannot leave this
    path.write_bytes(bytes(data))
    with pytest.raises(JobDirCorrupt) as info:
        list(JournalScan(str(path), salt=SALT))
    assert info.value.offset == offsets[4]


def test_repair_scan_resynchronises_after_damage(tmp_path):
    path = tmp_path / "j"
    offsets = write_journal(path, pushes(20))
    data = bytearray(path.read_bytes())
    data[offsets[7] + 2] ^= 0xFF
    path.write_bytes(bytes(data))
    scan = JournalScan(str(path), salt=SALT, repair=True)
    assert [o for o, _ in scan] == offsets[:7] + offsets[8:]
    assert [(d.offset, d.length) for d in scan.result.damage] == [(offsets[7], offsets[8] - offsets[7])]


def test_read_record_checks_the_crc_and_the_kind(tmp_path):
    path = tmp_path / "j"
    offsets = write_journal(path, [*pushes(2), done_body(8)])
    fd = os.open(path, os.O_RDONLY)
    try:
        assert bytes(read_record(fd, offsets[1], str(path), SALT)) == pushes(2)[1]
        for bad in (offsets[2], offsets[1] + 1, 10_000_000, 3):
            with pytest.raises(JobDirCorrupt):
                read_record(fd, bad, str(path), SALT)
    finally:
        os.close(fd)


def test_writer_cuts_back_a_failed_write(tmp_path, monkeypatch):
    path = tmp_path / "j"
    write_journal(path, pushes(2))
    size = os.path.getsize(path)
    writer = JournalWriter(str(path), size, salt=SALT, fsync=False)
    import diskfrontier.jobdir.journal as journal

    def half_then_fail(fd, data):
        os.write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(journal, "write_all", half_then_fail)
    with pytest.raises(OSError):
        writer.write(frame(size, pushes(1)[0], SALT))
    monkeypatch.undo()
    assert os.path.getsize(path) == size and writer.size == size
    writer.write(frame(size, pushes(1)[0], SALT))
    writer.close()
    assert len(list(JournalScan(str(path), salt=SALT))) == 3


def test_state_counts_pending_per_priority_in_push_order(tmp_path):
    path = tmp_path / "j"
    bodies = pushes(6, 1) + pushes(4, -2)
    offsets = write_journal(path, bodies)
    JournalWriter(str(path), os.path.getsize(path), salt=SALT, fsync=False).write(
        frame_all(os.path.getsize(path), [done_body(offsets[0]), done_body(offsets[7])], SALT)[0])
    state = read_state(str(path), salt=SALT, sizes=True)
    assert list(state.pending[1]) == offsets[1:6] and list(state.pending[-2]) == [offsets[6], *offsets[8:]]
    assert (state.pushes, state.dones, state.pending_count) == (10, 2, 8)
    assert state.live_bytes == sum(FRAME.size + len(bodies[i]) for i in (1, 2, 3, 4, 5, 6, 8, 9))


# ---------------------------------------------------------------- the queues: one contract, every class
QUEUES = {
    "batched-lifo": (BatchedLifoQueue, "lifo"),
    "fifo": (FifoDiskQueue, "fifo"),
    "batched-fifo": (BatchedFifoQueue, "fifo"),
}


@pytest.fixture(params=list(QUEUES))
def queue_kind(request):
    return QUEUES[request.param]


def test_queue_contract_against_a_model(tmp_path, queue_kind):
    cls, order = queue_kind
    path = str(tmp_path / "q")
    rng = random.Random(3)
    model: list[bytes] = []
    q = cls(path)
    for step in range(6 * BATCH):
        roll = rng.random()
        if roll < 0.05:
            items = [struct.pack(">Q", step * 10_000 + i) for i in range(rng.randrange(1, 3 * BATCH))]
            if hasattr(q, "push_many"):
                q.push_many(items)
            else:  # queuelib's own queue, the reference
                for item in items:
                    q.push(item)
            model.extend(items)
        elif roll < 0.6:
            item = struct.pack(">Q", step)
            q.push(item)
            model.append(item)
        else:
            got = q.pop()
            want = (model.pop() if order == "lifo" else model.pop(0)) if model else None
            assert got == want
        assert len(q) == len(model)
        if step % 997 == 0:  # close and reopen: the queue file keeps its order
            q.close()
            q = cls(path)
    q.close()
    q = cls(path)
    rest = []
    while (item := q.pop()) is not None:
        rest.append(item)
    assert rest == (model[::-1] if order == "lifo" else model)
    q.close()


def test_batched_lifo_peek_and_refill_across_the_batch_boundary(tmp_path):
    q = BatchedLifoQueue(str(tmp_path / "q"))
    for i in range(3 * BATCH + 7):
        q.push(struct.pack(">Q", i))
    q.close()
    q = BatchedLifoQueue(str(tmp_path / "q"))
    for i in reversed(range(3 * BATCH + 7)):
        assert q.peek() == struct.pack(">Q", i)
        assert q.pop() == struct.pack(">Q", i)
    assert q.pop() is None and len(q) == 0
    q.close()


def test_batched_fifo_push_many_across_chunks(tmp_path):
    path = str(tmp_path / "q")
    q = BatchedFifoQueue(path, chunksize=100)
    items = [struct.pack(">Q", i) for i in range(1234)]
    q.push_many(items[:5])
    q.push_many(items[5:])
    q.close()
    plain = FifoDiskQueue(path, chunksize=100)
    assert [plain.pop() for _ in range(1234)] == items and plain.pop() is None
    plain.close()


def test_batched_fifo_across_chunks_reads_as_queuelib_writes_and_reads(tmp_path):
    path = str(tmp_path / "q")
    rng = random.Random(8)
    model: list[bytes] = []
    q: BatchedFifoQueue | FifoDiskQueue = BatchedFifoQueue(path, chunksize=100)
    for step in range(20 * BATCH):
        if rng.random() < 0.55:
            item = struct.pack(">Q", step)
            q.push(item)
            model.append(item)
        else:
            assert q.pop() == (model.pop(0) if model else None)
        if step % 1500 == 0:  # entries read ahead but not popped stay in the queue
            q.close()
            q = FifoDiskQueue(path, chunksize=100) if step % 3000 == 0 else BatchedFifoQueue(path, chunksize=100)
    q.close()
    plain = FifoDiskQueue(path, chunksize=100)  # queuelib itself reads what is left, in order
    rest = []
    while (left := plain.pop()) is not None:
        rest.append(left)
    assert rest == model and len(os.listdir(path)) <= 2
    plain.close()


def test_batched_lifo_refuses_a_header_that_does_not_match_the_file(tmp_path):
    q = BatchedLifoQueue(str(tmp_path / "q"))
    for i in range(10):
        q.push(struct.pack(">Q", i))
    q.close()
    os.truncate(tmp_path / "q", os.path.getsize(tmp_path / "q") - 12)
    with pytest.raises(JobDirCorrupt):
        BatchedLifoQueue(str(tmp_path / "q"))


# ---------------------------------------------------------------- the seen index and file
def test_seen_index_matches_a_set(tmp_path):
    rng = random.Random(5)
    order: list[int]
    index, model, order = SeenIndex(), set(), []
    for _ in range(50_000):
        key = (rng.getrandbits(64) or 1) if rng.random() < 0.7 or not order else rng.choice(order)
        assert index.add(key) == (key not in model)
        if key not in model:
            model.add(key)
            order.append(key)
    assert len(index) == len(model)
    assert all(k in index for k in order)  # across every growth of every shard
    assert sum(rng.getrandbits(64) in index for _ in range(10_000)) == 0
    assert index.nbytes < 24 * len(model) + (1 << 17)  # 8 bytes a slot, at most 3/4 full, plus empty shards


def test_seen_index_shards_grow_one_at_a_time():
    index = SeenIndex()
    keys = [(shard << 56) | n for shard in (0, 7, 255) for n in range(1, 2000)]  # three shards only
    for key in keys:
        assert index.add(key)
    assert all(key in index for key in keys) and len(index) == len(keys)
    assert ((1 << 56) | 5) not in index


def test_a_growing_shard_moves_a_bounded_step_with_each_add(tmp_path, monkeypatch):
    """No add pays for a whole shard: a growth moves MOVE_STEP old slots per add, and every key
    stays findable (and is refused as a duplicate) while it is between the two tables."""
    monkeypatch.setattr(seenindex, "MOVE_STEP", 16)
    index = SeenIndex()
    steps: list[int] = []
    real_move = SeenIndex._move

    def move(self, shard, step):
        steps.append(step)
        real_move(self, shard, step)

    monkeypatch.setattr(SeenIndex, "_move", move)
    rng = random.Random(7)
    keys: list[int] = []
    midway = 0
    for _ in range(6000):
        key = (3 << 56) | rng.getrandbits(56) | 1  # one shard, so it grows many times
        assert index.add(key)
        keys.append(key)
        if index._old[3] is not None:
            midway += 1
            assert all(k in index for k in keys[-300:]) and not index.add(keys[0]) and not index.add(key)
    assert midway > 100  # growths were seen under way, not finished in one add
    assert steps and set(steps) == {16}
    while index._old[3] is None:  # save in the middle of a growth
        keys.append((3 << 56) | rng.getrandbits(56) | 1)
        assert index.add(keys[-1])
    saved = index.save(str(tmp_path / "index"), 0)  # saving finishes the growth under way first
    assert index._old[3] is None and all(k in index for k in keys)
    loaded = SeenIndex.load(str(tmp_path / "index"), IndexRecord(*saved.to_json()))
    assert len(loaded) == len(keys) and all(k in loaded for k in keys)
    assert sum(rng.getrandbits(64) | 1 in loaded for _ in range(2000)) == 0


def test_seen_file_writes_a_sum_for_every_block(tmp_path):
    path = str(tmp_path / "requests.seen")
    seen = SeenFile(path, SALT)
    seen.open(require_sums=False)
    count = 3 * BLOCK // 22 + 100
    for i in range(count):
        seen.add(hashlib.sha1(str(i).encode(), usedforsecurity=False).digest())
    seen.sync()
    seen.close()
    sums = read_sums(path + ".sums", SALT)
    assert sums is not None and len(sums) == os.path.getsize(path) // BLOCK == 3
    again = SeenFile(path, SALT)
    again.open(require_sums=True)
    assert len(again) == count
    again.close()
    with open(path, "r+b") as f:
        f.seek(BLOCK + 100)
        value = f.read(1)[0]
        f.seek(BLOCK + 100)
        f.write(bytes([value ^ 4]))
    with pytest.raises(JobDirCorrupt) as info:
        SeenFile(path, SALT).open(require_sums=True)
    assert info.value.offset == BLOCK


def test_seen_file_of_a_format2_directory_needs_its_sums(tmp_path):
    path = str(tmp_path / "requests.seen")
    seen = SeenFile(path, SALT)
    seen.open(require_sums=False)
    seen.add(b"x" * 20)
    seen.close()
    os.unlink(path + ".sums")
    with pytest.raises(JobDirCorrupt, match="sums"):
        SeenFile(path, SALT).open(require_sums=True)


def test_a_lifo_queue_file_written_whole_is_queuelibs_own_format(tmp_path):
    from array import array

    from queuelib import LifoDiskQueue

    from diskfrontier.jobdir.queues import OFFSET, lifo_file

    offsets = [8, 300, 2**40 + 5, 77, 2**63 + 1]
    queue = LifoDiskQueue(str(tmp_path / "q"))
    for offset in offsets:
        queue.push(OFFSET.pack(offset))
    queue.close()
    assert (tmp_path / "q").read_bytes() == lifo_file(array("Q", offsets))


def test_the_chunked_seen_check_reads_across_chunk_boundaries_and_finds_damage_past_the_first(tmp_path):
    from diskfrontier.jobdir.seen import check_seen_file

    path = str(tmp_path / "requests.seen")
    seen = SeenFile(path, SALT)
    seen.open(require_sums=False)
    for i in range(200_000):  # 4.4 MB: two 4 MiB chunks, fingerprints cut by the boundary
        seen.add(hashlib.sha1(str(i).encode(), usedforsecurity=False).digest())
    seen.flush()
    tail = seen.tail()
    seen.close()
    sums = read_sums(path + ".sums", SALT)
    assert sums is not None
    clean = check_seen_file(path, sums, tail, SALT)
    assert clean.problem is None and clean.end == 200_000 * 22 and clean.torn == 0
    data = bytearray(Path(path).read_bytes())
    data[65 * BLOCK + 5] ^= 1
    Path(path).write_bytes(data)
    found = check_seen_file(path, sums, tail, SALT)
    assert found.problem is not None and found.problem.offset == 65 * BLOCK
    data[65 * BLOCK + 5] ^= 1
    data[-3] ^= 1  # in the partial last block: the checkpoint's tail crc
    Path(path).write_bytes(data)
    problem = check_seen_file(path, sums, tail, SALT).problem
    assert problem is not None and problem.offset == len(data) // BLOCK * BLOCK


def test_the_scan_after_damage_keeps_priorities_right_past_255_of_them(tmp_path):
    # The generic scan takes over at the damage; a new priority code widening its array
    # must not shift the codes of the records after it.
    path = tmp_path / "j"
    bodies = [push_body(p, False, bytes([p % 256, p // 256]) * 10, b"\x91\xa1x") for p in range(300)]
    offsets = write_journal(path, [pushes(1)[0], *bodies])
    JournalWriter(str(path), os.path.getsize(path), salt=SALT, fsync=False).write(
        frame_all(os.path.getsize(path), [done_body(offsets[1 + p]) for p in range(0, 300, 3)], SALT)[0])
    data = bytearray(path.read_bytes())
    data[offsets[0] + FRAME.size + 3] ^= 1  # the first record is damaged
    path.write_bytes(data)
    state = read_state(str(path), salt=SALT, repair=True)
    assert len(state.scan.damage) == 1
    want = {p: [offsets[1 + p]] for p in range(300) if p % 3}
    assert {p: list(o) for p, o in state.pending.items()} == want
    assert state.counts == dict.fromkeys(want, 1)


def test_a_record_longer_than_a_read_is_scanned_whole_at_the_start_of_a_read(tmp_path):
    path = tmp_path / "j"
    big = push_body(0, False, b"b" * 20, b"\xc6" + (9 << 20).to_bytes(4, "big") + b"x" * (9 << 20))
    offsets = write_journal(path, [big, *pushes(3)])
    assert [offset for offset, _ in JournalScan(str(path), salt=SALT)] == offsets
    assert [offset for offset, _ in JournalScan(str(path), salt=SALT, repair=True)] == offsets
    assert list(read_state(str(path), salt=SALT).pending[0]) == offsets
    state = read_state(str(path), salt=SALT, sizes=True)  # the big record's size is kept aside, not cut to 16 bits
    assert state.live_bytes == os.path.getsize(path) - len(MAGIC)


def test_a_push_record_too_short_for_its_head_is_damage_not_a_crash(tmp_path):
    path = tmp_path / "j"
    write_journal(path, [*pushes(2), b"\x01\x00\x00"])
    with pytest.raises(JobDirCorrupt, match="unknown type"):
        read_state(str(path), salt=SALT)
    state = read_state(str(path), salt=SALT, repair=True)
    assert len(state.scan.damage) == 1 and state.pushes == 2


def test_records_below_the_floor_are_checked_by_the_floor_crc_and_rescanned_if_it_fails(tmp_path):
    import zlib

    path = tmp_path / "j"
    offsets = write_journal(path, pushes(40, 1) + pushes(20, -1))
    floor = offsets[30]
    data = path.read_bytes()
    crc = zlib.crc32(data[:floor])
    plain = read_state(str(path), salt=SALT, floor=floor)
    trusted = read_state(str(path), salt=SALT, floor=floor, floor_crc=crc)
    assert {p: list(o) for p, o in trusted.pending.items()} == {p: list(o) for p, o in plain.pending.items()}
    assert trusted.end_crc == plain.end_crc == zlib.crc32(data)
    # a wrong crc, or damage below the floor, means every record is checked: the damage is named
    assert list(read_state(str(path), salt=SALT, floor=floor, floor_crc=crc ^ 1).pending[1]) == offsets[:40]
    damaged = bytearray(data)
    damaged[offsets[5] + FRAME.size + 3] ^= 1
    path.write_bytes(damaged)
    with pytest.raises(JobDirCorrupt) as info:
        read_state(str(path), salt=SALT, floor=floor, floor_crc=crc)
    assert info.value.offset == offsets[5]


def test_after_a_kill_the_open_checkpoint_holds_the_crc_of_the_journal_below_its_floor(tmp_path):
    """The trusted recovery path is taken: the crc the checkpoint keeps is that of the bytes below its floor."""
    import json
    import subprocess
    import sys
    import zlib

    from diskfrontier import Frontier, Request

    job = tmp_path / "job"
    with Frontier(job) as f:
        f.push_many(Request(f"https://a.example/{i}") for i in range(50))
    code = ("import os, signal, sys\nfrom diskfrontier import Frontier, Request\nf = Frontier(sys.argv[1])\n"
            "f.push(Request('https://b.example/'))\nf.done(f.pop())\nos.kill(os.getpid(), signal.SIGKILL)\n")
    result = subprocess.run([sys.executable, "-c", code, str(job)], capture_output=True, timeout=60)
    assert result.returncode == -9, result.stderr
    cursor = json.loads((job / "requests.cursor").read_text())
    journal = (job / "requests.urls").read_bytes()
    assert cursor["state"] == "open" and cursor["journal_floor"] < len(journal)
    assert cursor["journal_crc"] == zlib.crc32(journal[:cursor["journal_floor"]])
    with Frontier(job) as f:
        assert f.recovery == "rebuilt" and len(f) == 50


@pytest.mark.parametrize("order", ["lifo", "fifo"])
def test_an_emptied_queue_is_kept_open_for_its_next_push_and_removed_at_close(tmp_path, order):
    from diskfrontier.jobdir.queues import _SPARE, OffsetQueues, queue_path

    directory = str(tmp_path / "q")
    queues = OffsetQueues(directory, order)
    made = []
    real_factory = queues._factory

    def counted(key):
        made.append(key)
        return real_factory(key)

    queues.pq.qfactory = counted
    for offset in range(100):  # a frontier running near empty: one in, one out
        queues.push(8 + offset, 0)
        assert queues.pop() == 8 + offset and queues.pop() is None
    assert made == [0] and os.path.exists(queue_path(directory, 0))  # one queue made, never re-made
    for priority in range(1, _SPARE + 3):  # more emptied priorities than are kept: the oldest are closed
        queues.push(1000 + priority, priority)
        assert queues.pop() == 1000 + priority
    kept = sorted(p for p in range(_SPARE + 3) if os.path.exists(queue_path(directory, p)))
    assert len(kept) == _SPARE and kept == list(range(3, _SPARE + 3))
    queues.push_many([5000, 5001], 4)  # a kept queue taken back by push_many, in order
    assert [queues.pop(), queues.pop()] == ([5001, 5000] if order == "lifo" else [5000, 5001])
    queues.push(6000, 5)
    assert queues.close() == [5]  # the kept empty queues are closed: their files removed
    assert sorted(os.listdir(directory)) == ["p5"]
