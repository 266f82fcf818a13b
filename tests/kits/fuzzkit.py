"""Seeded damage to job directories, and the rules a damaged job directory must follow.

A fixture is a job directory built by a child process with the public API, in one of
two states: ``clean`` (closed with ``close()``) or ``crash`` (SIGKILLed while it had
the directory open, with requests pushed, popped, done and in flight since the open).
The child prints what it was told: the exact multiset of pending URLs (dont_filter
duplicates counted), those of them held back by a ``not_before`` still ahead, and the
URLs that were done. The ``requeue`` fixtures also ``retry`` requests (at once and an
hour later), ``done(refetch_after=)`` some (at once and an hour later) and change host
settings, before a compaction, before a clean close and after the last open, so that
their journals hold HOST, RETRY and REFETCH records on both sides of the floor.

A case copies a fixture, damages one file in one way (``random.Random`` seeded from
the case's name), opens it with ``Frontier``, pops everything (done-ing each) and
pushes every done URL again. "Everything" includes what time holds back (a request's
``not_before``, a host's block or delay): when ``pop`` gives nothing, the frontier's
clock is moved on to ``next_ready()`` (``FakeClock``), and no request may be handed out
before its ``not_before`` by that clock. The outcome is one of:

* ``exact``: the popped multiset is the expected pending multiset, the requests that
  came back with a ``not_before`` are exactly those expected held back, no done URL
  came back, every done URL is refused as a duplicate, and the directory reopens empty;
* ``refused``: a ``FrontierError`` naming a file of the directory, at open or at pop;
  then ``verify`` must report the directory not sound, ``verify(repair=True)`` must
  let it open again, and what it gives must be a subset of the expected pending
  multiset with no done URL in it (what is missing is counted as lost to repair),
  except one more copy of a request whose DONE, RETRY or REFETCH record (the record
  that finished it) was in the damage;
* ``manual``: refused with an error whose advice is not ``verify --repair`` (a
  damaged ``frontier.json`` is to be written anew by hand); verify must still see it;
* ``fail``: anything else: a raw exception, a hang, a huge allocation, wrong data.

Run as a script, this module is the fixture builder:
``fuzzkit.py JOBDIR ORDER SIZE STATE`` (SIZE ``small``, ``big`` or ``requeue``) prints
the expectations as one JSON line, then ``READY``; in the ``crash`` state it then waits
to be killed.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# ----------------------------------------------------------------------------- fixtures

SIZES = {"small": (200, 150), "big": (3300, 3000)}  # (first pushes, popped and done before a compaction)
HOST_LETTER = "h"  # the first letter of the workload's host names: a sibling fixture ("-sibling") uses "g"
LATER = 3600.0  # seconds: a retry or re-fetch held back this long is still held back when the cases run


def _workload(path: str, order: str, size: str, state: str) -> dict:
    """Build the job directory; return what a correct frontier must give back."""
    if size == "requeue":
        return _requeue_workload(path, order, state)
    from diskfrontier import Frontier, Request

    first, finished = SIZES[size]
    pending: Counter[str] = Counter()
    done: list[str] = []
    priorities = (0, 1, -1, 5)

    def request(url: str, i: int, dont_filter: bool = False) -> Request:
        meta = {"depth": i % 4, "tag": f"t{i % 3}", "ids": [i, i + 1]} if i % 7 == 0 else None
        return Request(url, priority=priorities[i % len(priorities)], meta=meta, dont_filter=dont_filter)

    def push_many(frontier: Frontier, batch: list[Request]) -> None:
        assert frontier.push_many(batch) == len(batch)
        pending.update(r.url for r in batch)

    def push(frontier: Frontier, r: Request) -> None:
        assert frontier.push(r)
        pending[r.url] += 1

    def pop_done(frontier: Frontier, count: int, finish: int) -> list:
        popped = [frontier.pop() for _ in range(count)]
        assert all(r is not None for r in popped)
        taken = [r for r in popped if r is not None]
        for r in taken[:finish]:
            frontier.done(r)
            done.append(r.url)
            pending[r.url] -= 1
        return taken

    # Run 1: many requests, most of them done and compacted away (their dedupe then
    # lives in requests.seen alone), then more, some in flight at a clean close.
    f = Frontier(path, order=order)
    urls = [f"https://{HOST_LETTER}{i % 5}.example/a/{i}" for i in range(first)]
    for start in range(0, first, 500):
        push_many(f, [request(u, start + j) for j, u in enumerate(urls[start:start + 500])])
    pop_done(f, finished, finished)
    f.compact()
    for i in range(60):
        push(f, request(f"https://{HOST_LETTER}{i % 3}.example/b/{i}", i))
    retried = done[:5] + [u for u in urls if pending[u]][:5]  # dont_filter re-pushes: of done and of pending URLs
    push_many(f, [request(u, i, dont_filter=True) for i, u in enumerate(retried)])
    pop_done(f, 20, 12)  # 8 in flight at the close: requeued
    f.close()

    # Run 2: more of everything after the open.
    f = Frontier(path)
    for i in range(40):
        push(f, request(f"https://{HOST_LETTER}{i % 4}.example/c/{i}", i))
    batch = [request(f"https://{HOST_LETTER}{i % 2}.example/d/{i}", i) for i in range(25)]
    batch += [request(f"https://h1.example/d/{i}", i, dont_filter=True) for i in range(1, 25, 5)]
    push_many(f, batch)
    pop_done(f, 25, 15)  # 10 in flight
    expected = {"pending": {u: n for u, n in pending.items() if n > 0}, "held": {}, "done": sorted(set(done))}
    if state == "clean":
        f.close()
    return expected


REQUEUE_ACTIONS = ("done", "retry", "done", "retry-later", "refetch-later", "done", "retry", "refetch", "keep",
                   "done", "refetch", "retry-later")  # cycled over the popped requests; "keep": left in flight


def _requeue_workload(path: str, order: str, state: str) -> dict:
    """A small crawl that retries and re-fetches requests and changes host settings (HOST, RETRY and REFETCH
    records before a compaction, below the floor and, for the crash state, after the last open).

    The host settings never hold a request back for good: blocks end within the hour (a case's clock moves on
    past them), and budgets are far above what a host ever has, or on hosts with no request.
    """
    from diskfrontier import Frontier, Request

    pending: Counter[str] = Counter()
    held: Counter[str] = Counter()  # pending requests whose not_before is still ahead (an hour on)
    done: list[str] = []
    inflight: list = []
    step = itertools.count()
    priorities = (0, 1, -1, 5)

    def request(url: str, i: int, dont_filter: bool = False) -> Request:
        meta = {"depth": i % 4, "tag": f"t{i % 3}"} if i % 5 == 0 else None
        return Request(url, priority=priorities[i % len(priorities)], meta=meta, dont_filter=dont_filter)

    def push_many(frontier: Frontier, batch: list[Request]) -> None:
        assert frontier.push_many(batch) == len(batch)
        pending.update(r.url for r in batch)

    def finish(frontier: Frontier, r, action: str) -> None:
        url = r.url
        if action == "done":
            frontier.done(r)
            pending[url] -= 1
            done.append(url)
        elif action == "retry":
            frontier.retry(r)  # a RETRY record, due at once: popped again by a later work()
        elif action == "retry-later":
            frontier.retry(r, delay=LATER)
            held[url] += 1
        elif action == "refetch":
            frontier.done(r, refetch_after=0)  # a REFETCH record, due at once
            done.append(url)
        elif action == "refetch-later":
            frontier.done(r, refetch_after=LATER)
            held[url] += 1
            done.append(url)
        else:
            inflight.append(r)

    def work(frontier: Frontier, count: int) -> None:
        for _ in range(count):
            r = frontier.pop()
            if r is None:  # the rest is held back (by time, a block or a delay)
                break
            finish(frontier, r, REQUEUE_ACTIONS[next(step) % len(REQUEUE_ACTIONS)])

    def settle(frontier: Frontier) -> None:
        """Finish what was left in flight (compact() takes nothing in flight): retry some, done the rest."""
        for i, r in enumerate(inflight):
            finish(frontier, r, ("retry", "done", "refetch")[i % 3])
        inflight.clear()

    # Run 1: host settings, work with retries and re-fetches, a compaction (the pending RETRY and REFETCH
    # records become PUSH records, held ones keep their not_before), more of it, a clean close.
    f = Frontier(path, order=order)
    f.set_delay(f"{HOST_LETTER}0.example", 0.0)
    f.set_budget(f"{HOST_LETTER}1.example", 10**6)
    f.block(f"{HOST_LETTER}3.example", time.time() + LATER / 2)
    f.block("never.example", math.inf)  # hosts with no request: their settings are kept all the same
    f.set_delay("slow.example", 30.0)
    f.set_budget("quota.example", 0)
    urls = [f"https://{HOST_LETTER}{i % 5}.example/a/{i}" for i in range(150)]
    for start in range(0, len(urls), 50):
        push_many(f, [request(u, start + j) for j, u in enumerate(urls[start:start + 50])])
    push_many(f, [request(u, i, dont_filter=True) for i, u in enumerate(urls[:150:15])])
    work(f, 90)
    f.unblock(f"{HOST_LETTER}3.example")
    work(f, 40)
    settle(f)
    f.compact()
    f.set_delay(f"{HOST_LETTER}0.example", None)
    f.set_budget(f"{HOST_LETTER}4.example", 10**6)
    push_many(f, [request(f"https://{HOST_LETTER}{i % 3}.example/b/{i}", i) for i in range(40)])
    work(f, 50)  # those left in flight are requeued by the close
    f.block(f"{HOST_LETTER}4.example", time.time() + LATER / 2)
    work(f, 10)
    f.close()
    inflight.clear()

    # Run 2: more of everything after the open: above the floor (the unclean tail of the crash state).
    f = Frontier(path)
    push_many(f, [request(f"https://{HOST_LETTER}{i % 4}.example/c/{i}", i) for i in range(30)])
    f.unblock(f"{HOST_LETTER}4.example")
    f.block(f"{HOST_LETTER}2.example", time.time() + LATER / 2)
    f.set_delay(f"{HOST_LETTER}1.example", 1.0)
    work(f, 40)
    f.set_budget(f"{HOST_LETTER}4.example", None)
    push_many(f, [request(u, i, dont_filter=True) for i, u in enumerate(sorted(held)[:6])])
    work(f, 25)
    expected = {"pending": {u: n for u, n in pending.items() if n > 0}, "held": {u: n for u, n in held.items() if n},
                "done": sorted(set(done))}
    if state == "clean":
        f.close()
    return expected


def _child_main(argv: list[str]) -> None:
    global HOST_LETTER
    path, order, size, state, HOST_LETTER = argv
    if order == "lifo":  # the LIFO fixtures have a saved seen index (requests.seen.index); the FIFO ones none
        from diskfrontier.jobdir import closing as closing_module

        closing_module.INDEX_MIN_NEW_KEYS = 1
    expected = _workload(path, order, size, state)
    sys.stdout.write(json.dumps(expected) + "\nREADY\n")
    sys.stdout.flush()
    if state == "crash":
        time.sleep(600)  # killed by the parent with SIGKILL while the frontier is open


@dataclass
class Fixture:
    """A job directory to damage copies of, and what it holds."""

    name: str
    path: str
    order: str
    state: str
    pending: Counter
    done: set[str]  # done URLs that must never come back (no copy of them is pending)
    refuse: list  # Request objects of every done URL (fingerprints computed once): all must be duplicates
    held: Counter = field(default_factory=Counter)  # the pending URLs whose not_before is still ahead
    records: list = field(default_factory=list)  # a Record for each journal record
    floor: int = 0  # the journal length below which a cut is damage, not a torn tail
    journal_size: int = 0
    sibling: str | None = None  # a job directory built by the same steps, with other host names of the same length


def build_fixture(root: str, order: str, size: str, state: str, letter: str = "h") -> Fixture:
    """Build one fixture in a child process (SIGKILLed for the crash state); ``letter``: see HOST_LETTER."""
    from diskfrontier import Request

    name = f"{order}-{state}-{size}" + ("" if letter == "h" else f"-{letter}")
    path = os.path.join(root, name)
    proc = subprocess.Popen([sys.executable, __file__, path, order, size, state, letter],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    ready = proc.stdout.readline()
    if ready.strip() != "READY":
        proc.kill()
        raise AssertionError(f"fixture builder failed: {proc.communicate()[1][-3000:]}")
    if state == "crash":
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stdout.close()
    proc.stderr.close()  # type: ignore[union-attr]
    expected = json.loads(line)
    pending = Counter(expected["pending"])
    done = set(expected["done"])
    fx = Fixture(name, path, order, state, pending, done - set(pending), [Request(u) for u in sorted(done)],
                 held=Counter(expected["held"]))
    fx.records = journal_map(os.path.join(path, "requests.urls"))
    fx.journal_size = os.path.getsize(os.path.join(path, "requests.urls"))
    from jobkit import dir_id

    saved = read_checkpoint(os.path.join(path, "requests.cursor"), dir_id(path))
    fx.floor = saved.floor
    assert saved.state == ("clean" if state == "clean" else "open"), saved
    assert replay(fx.records) == pending, "the journal does not hold what the builder was told"
    assert replay_held(fx.records) == fx.held, "the journal does not hold back what the builder was told"
    if size == "requeue":  # the record types this fixture is for, below the floor and (crash) above it
        from diskfrontier.jobdir.journal import HOST, REFETCH, RETRY

        for part, records in (("below", [r for r in fx.records if r.end <= fx.floor]),
                              ("above", [r for r in fx.records if r.offset >= fx.floor])):
            if part == "above" and state == "clean":
                continue
            kinds = Counter(r.kind for r in records)
            assert all(kinds[k] for k in (HOST, RETRY, REFETCH)), (name, part, fx.floor, kinds)
            assert any(r.held for r in records if r.kind != HOST), (name, part, "no record held back")
    return fx


class Record(NamedTuple):
    """One record of a fixture's journal."""

    offset: int
    end: int
    kind: int  # PUSH, DONE, HOST, RETRY or REFETCH
    url: str  # the request's URL (a DONE's: its target's); "" for a HOST record
    target: int | None = None  # the request a DONE, RETRY or REFETCH finishes
    held: bool = False  # a request record with a not_before (all of them still ahead when the cases run)


def journal_map(path: str) -> list[Record]:
    """A Record for every record of an intact journal."""
    from jobkit import dir_salt

    from diskfrontier.jobdir.journal import CARRIES_REQUEST, DONE, FRAME, HOST, JournalScan, done_target, parse_push
    from diskfrontier.request.codec import decode_request

    out: list[Record] = []
    urls: dict[int, str] = {}
    for offset, body in JournalScan(path, salt=dir_salt(os.path.dirname(path))):
        end = offset + FRAME.size + len(body)
        if body[0] == DONE:
            target = done_target(body)
            out.append(Record(offset, end, DONE, urls[target], target))
        elif body[0] == HOST:
            out.append(Record(offset, end, HOST, ""))  # host settings: no request in it
        else:
            assert body[0] in CARRIES_REQUEST, body[0]
            pushed = parse_push(body)
            url = decode_request(pushed.record, pushed.priority, pushed.dont_filter, pushed.fingerprint, offset).url
            assert pushed.target is None or urls[pushed.target] == url, "a RETRY or REFETCH of another URL"
            urls[offset] = url
            out.append(Record(offset, end, body[0], url, pushed.target, bool(pushed.not_before)))
    return out


def _alive(records: list[Record], upto: int | None = None, without: Record | None = None) -> list[Record]:
    """The pending request records of the records that end at or before ``upto``: every PUSH, RETRY and
    REFETCH record, less those a DONE, RETRY or REFETCH record finished. ``without``: as ``verify --repair``
    leaves the journal when that record is destroyed (what it finished is pending again; a record that
    finished it finishes nothing: a DONE is dropped, a RETRY or REFETCH becomes a PUSH)."""
    from diskfrontier.jobdir.journal import CARRIES_REQUEST

    alive: dict[int, Record] = {}
    for record in records:
        if upto is not None and record.end > upto:
            break
        if record is without:
            continue
        if record.target is not None and (without is None or record.target != without.offset):
            del alive[record.target]  # the journal of a fixture finishes each request once
        if record.kind in CARRIES_REQUEST:
            alive[record.offset] = record
    return list(alive.values())


def replay(records: list[Record], upto: int | None = None) -> Counter:
    """The pending multiset of the records that end at or before ``upto``."""
    return Counter(record.url for record in _alive(records, upto))


def replay_held(records: list[Record], upto: int | None = None) -> Counter:
    """The part of ``replay`` held back by a not_before."""
    return Counter(record.url for record in _alive(records, upto) if record.held)


def read_checkpoint(path: str, ident: str | None):
    from diskfrontier.jobdir.checkpoint import read_checkpoint as read

    return read(path, ident)


BASIC_SPECS = [("lifo", "big", "clean"), ("lifo", "big", "crash"), ("fifo", "small", "clean"),
               ("fifo", "small", "crash")]
REQUEUE_SPECS = [("lifo", "requeue", "crash"), ("fifo", "requeue", "crash"), ("lifo", "requeue", "clean"),
                 ("fifo", "requeue", "clean")]


def build_fixtures(root: str) -> list[Fixture]:
    """The four basic fixtures (LIFO/FIFO x clean/crash; the LIFO ones have a seen file of more than one
    block), then the four ``requeue`` ones (see ``requeue_fixtures``)."""
    specs = BASIC_SPECS + REQUEUE_SPECS
    out = []
    for order, size, state in specs:
        fx = build_fixture(root, order, size, state)
        fx.sibling = build_fixture(root, order, size, state, "g").path
        out.append(fx)
    for fx in out:
        if "big" in fx.name:
            assert os.path.getsize(os.path.join(fx.path, "requests.seen")) > 1 << 16
    return out


def basic_fixtures(fixtures: list[Fixture]) -> list[Fixture]:
    """The fixtures of PUSH and DONE records only."""
    return [fx for fx in fixtures if not fx.name.endswith("-requeue")]


def requeue_fixtures(fixtures: list[Fixture]) -> list[Fixture]:
    """The fixtures that also hold HOST, RETRY and REFETCH records and requests held back for an hour."""
    return [fx for fx in fixtures if fx.name.endswith("-requeue")]


# ----------------------------------------------------------------------------- damage

TARGETS = ("frontier.json", "requests.urls", "requests.seen", "requests.seen.sums", "requests.seen.index",
           "requests.cursor", "requests.hosts", "active.json", "queue", "lock")
KINDS = ("flip", "garbage", "truncate", "append", "zero", "len-ffff", "swap", "dup", "delete", "empty", "splice")
RECORD_KINDS = ("len-ffff", "swap", "dup")
# swap/dup of equal-sized records: where a file is made of them
RECORD_TARGETS = {"requests.urls": RECORD_KINDS, "requests.seen": ("swap", "dup"), "queue": ("swap", "dup")}


def applicable(target: str, kind: str) -> bool:
    return kind not in RECORD_KINDS or kind in RECORD_TARGETS.get(target, ())


def target_files(job: str, target: str) -> list[str]:
    """The files of ``job`` that ``target`` names (one, or every queue file)."""
    if target == "active.json":
        return [os.path.join(job, "requests.queue", "active.json")]
    if target == "queue":
        out = []
        for root, _dirs, files in os.walk(os.path.join(job, "requests.queue")):
            out += [os.path.join(root, name) for name in sorted(files) if name != "active.json"]
        return sorted(out)
    return [os.path.join(job, target)]


def journal_records(path: str) -> list[tuple[int, int]]:
    """(offset, body length) of every intact record of a journal."""
    from jobkit import dir_salt

    from diskfrontier.jobdir.journal import JournalScan

    return [(offset, len(body)) for offset, body in JournalScan(path, salt=dir_salt(os.path.dirname(path)),
                                                                repair=True)]


def _records(path: str, target: str) -> list[tuple[int, int]]:
    """(start, size) of each whole record of a file made of records, for swap and dup."""
    with open(path, "rb") as f:
        data = f.read()
    if target == "requests.urls":
        return [(offset, 10 + length) for offset, length in journal_records(path)]
    if target == "requests.seen":
        width = 2 + int.from_bytes(data[:2], "big")
        return [(i, width) for i in range(0, len(data) - width + 1, width)]
    if os.path.basename(path).startswith("q"):  # a FIFO chunk: a 4-byte length, then the entry
        out, pos = [], 0
        while pos + 4 <= len(data):
            n = int.from_bytes(data[pos:pos + 4], "big")
            out.append((pos, 4 + n))
            pos += 4 + n
        return out
    if os.path.basename(path).startswith("p"):  # a LIFO file: a 4-byte count, then entries of 8 + 4 bytes
        return [(i, 12) for i in range(4, len(data) - 11, 12)]
    return []


def damage(
    rng: random.Random, job: str, target: str, kind: str, sibling: str | None = None,
) -> tuple[str, list[tuple[int, int]]] | None:
    """Damage one file of ``job``: (what was done, the byte ranges changed), None if the damage does not apply.

    ``splice``: bytes of the same file of ``sibling`` (a directory built by the same steps), at the same offset,
    over ours: a whole record where the file is made of them, a whole 64 KiB block of ``requests.seen`` with its
    checksum from ``requests.seen.sums``, else a stretch where the two differ.
    """
    files = [p for p in target_files(job, target) if os.path.isfile(p)]
    if kind in ("swap", "dup") and target == "queue":
        files = [p for p in files if os.path.basename(p) != "info.json"]
    if not files:
        return None
    path = rng.choice(files)
    rel = os.path.relpath(path, job)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    size = len(data)
    if kind == "delete":
        os.unlink(path)
        return f"{rel}: deleted", [(0, size)]
    if kind == "empty":
        if not size:
            return None
        data = bytearray()
        what, spans = "emptied", [(0, size)]
    elif kind == "append":
        extra = rng.randbytes(rng.randrange(1, 300))
        data += extra
        what, spans = f"{len(extra)} bytes appended", [(size, size + len(extra))]
    elif not size:
        return None
    elif kind == "flip":
        at = rng.randrange(size)
        data[at] ^= rng.randrange(1, 256)
        what, spans = f"byte {at} flipped", [(at, at + 1)]
    elif kind == "garbage":
        at = rng.randrange(size)
        n = min(size - at, rng.randrange(2, 65))
        data[at:at + n] = rng.randbytes(n)
        what, spans = f"{n} garbage bytes at {at}", [(at, at + n)]
    elif kind == "truncate":
        way = rng.randrange(3)  # anywhere; in the last quarter (where a kill cuts); at a record boundary
        boundaries = [start for start, _ in _records(path, target)] if way == 2 else []
        at = rng.choice(boundaries) if boundaries else rng.randrange(size * 3 // 4 if way else 0, size)
        data = data[:at]
        what, spans = f"truncated from {size} to {at}", [(at, size)]
    elif kind == "zero":
        at = rng.randrange(size)
        n = min(size - at, rng.randrange(1, 4097))
        data[at:at + n] = bytes(n)
        what, spans = f"{n} bytes zeroed at {at}", [(at, at + n)]
    elif kind == "splice":
        spliced = _splice(rng, job, path, target, data, sibling)
        if spliced is None:
            return None
        what, spans = spliced
    elif kind == "len-ffff":
        records = _records(path, target)
        if not records:
            return None
        at, _ = rng.choice(records)
        data[at:at + 4] = b"\xff\xff\xff\xff"
        what, spans = f"length field of the record at {at} set to 0xFFFFFFFF", [(at, at + 4)]
    else:  # swap / dup: two different records of equal size
        records = _records(path, target)
        by_size: dict[int, list[int]] = {}
        for start, n in records:
            by_size.setdefault(n, []).append(start)
        groups = [(n, starts) for n, starts in sorted(by_size.items()) if len(starts) > 1]
        if not groups:
            return None
        n, starts = rng.choice(groups)
        a, b = rng.sample(starts, 2)
        ra, rb = bytes(data[a:a + n]), bytes(data[b:b + n])
        if ra == rb:
            return None
        if kind == "swap":
            data[a:a + n], data[b:b + n] = rb, ra
            what, spans = f"records at {a} and {b} ({n} bytes) swapped", [(a, a + n), (b, b + n)]
        else:
            data[b:b + n] = ra
            what, spans = f"record at {a} copied over the record at {b} ({n} bytes)", [(b, b + n)]
    with open(path, "wb") as f:
        f.write(data)
    return f"{rel}: {what}", spans


def _splice(rng: random.Random, job: str, path: str, target: str, data: bytearray,
            sibling: str | None) -> tuple[str, list[tuple[int, int]]] | None:
    """Copy a stretch of the sibling's file over ``data`` (changed in place): (what, spans), or None."""
    if sibling is None:
        return None
    rel = os.path.relpath(path, job)
    theirs_path = os.path.join(sibling, rel)
    if not os.path.isfile(theirs_path):
        return None
    with open(theirs_path, "rb") as f:
        theirs = f.read()
    common = min(len(data), len(theirs))
    block = 1 << 16
    if target == "requests.seen" and common >= block:
        blocks = [i for i in range(common // block)
                  if data[i * block:(i + 1) * block] != theirs[i * block:(i + 1) * block]]
        if blocks:
            i = rng.choice(blocks)
            data[i * block:(i + 1) * block] = theirs[i * block:(i + 1) * block]
            with open(os.path.join(sibling, "requests.seen.sums"), "rb") as f:
                their_sums = f.read()
            sums_path = os.path.join(job, "requests.seen.sums")
            if os.path.isfile(sums_path) and len(their_sums) >= 8 + 4 * (i + 1):
                with open(sums_path, "r+b") as f:
                    f.seek(8 + 4 * i)
                    f.write(their_sums[8 + 4 * i:8 + 4 * (i + 1)])
            return f"block {i} and its checksum from the sibling", [(i * block, (i + 1) * block)]
    spans = [(a, n) for a, n in _records(path, target) if a + n <= common and data[a:a + n] != theirs[a:a + n]]
    if spans:
        a, n = rng.choice(spans)
    else:
        differ = [i for i in range(common) if data[i] != theirs[i]]
        if not differ:
            return None
        a = rng.choice(differ)
        n = min(common - a, rng.randrange(1, 65))
    data[a:a + n] = theirs[a:a + n]
    return f"{n} bytes at {a} from the sibling", [(a, a + n)]


# ----------------------------------------------------------------------------- running a case


class CaseTimeout(BaseException):
    """A case ran past its time limit (a BaseException, so that no `except Exception` swallows it)."""


@contextlib.contextmanager
def guarded(seconds: int = 10, memory: int = 512 << 20):
    """Raise CaseTimeout after ``seconds``; make allocations past ``memory`` more than now fail."""

    def on_alarm(_signum, _frame):
        raise CaseTimeout(f"over {seconds} s")

    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[0])
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = pages * os.sysconf("SC_PAGE_SIZE") + memory
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@dataclass
class Outcome:
    kind: str  # exact / torn / refused / manual / fail / n/a
    detail: str = ""
    damage: str = ""
    lost_to_repair: int = 0
    resurrected_by_repair: int = 0  # done URLs back after repair because their DONE record was in the damage
    dedupe_lost_to_repair: int = 0
    at: str = ""  # where a refusal happened: open / pop


class Wrong(Exception):
    """Wrong data: a failure."""


@dataclass
class Expect:
    """What a case may give back."""

    pending: Counter
    done: set[str]
    torn: Expect | None = None  # also acceptable: what a kill just before the damaged bytes would leave
    exempt: set[str] = field(default_factory=set)  # done URLs never pushed in this alternative (no dedupe owed)
    allowance: Counter = field(default_factory=Counter)  # after repair: URLs whose DONE (RETRY, REFETCH) was destroyed
    full_dedupe: bool = False  # check every done URL (else a sample)
    held: Counter = field(default_factory=Counter)  # the part of ``pending`` that comes back with a not_before
    held_allowance: Counter = field(default_factory=Counter)  # the part of ``allowance`` that does
    repaired: tuple[Counter, Counter] | None = None  # exactly what verify --repair leaves (all, held), when known


class FakeClock:
    """``time`` as the frontier module sees it in a case: the real clock, moved on when a drain waits."""

    def __init__(self) -> None:
        self.real = time.time
        self.ahead = 0.0

    def time(self) -> float:
        return self.real() + self.ahead

    def move_to(self, when: float) -> None:
        self.ahead = max(self.ahead, when - self.real() + 0.001)

    def __getattr__(self, name: str):
        return getattr(time, name)


@contextlib.contextmanager
def fake_clock():
    """Give the job directory's frontier (its façade and parts) and ``diskfrontier.politeness.schedule`` a
    FakeClock for the length of a case."""
    from diskfrontier.jobdir import dispatch, hostrules, ledger, opening, swap, waiting
    from diskfrontier.politeness import schedule as hosts_module

    clock = FakeClock()
    modules: tuple[Any, ...] = (waiting, hostrules, ledger, dispatch, opening, swap, hosts_module)
    old = [module.time for module in modules]
    for module in modules:
        module.time = clock
    try:
        yield clock
    finally:
        for module, was in zip(modules, old, strict=True):
            module.time = was


@dataclass
class Popped:
    """What the drains of a case got: every URL, and those that came with a not_before."""

    clock: FakeClock
    urls: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)


def _drain(frontier, popped: Popped) -> None:
    """Pop and done everything: what time holds back too, by moving the clock on to ``next_ready()``."""
    clock = popped.clock
    tries = 0
    while True:
        request = frontier.pop()
        if request is None:
            wake = frontier.next_ready()
            if wake is None or tries >= 3 or wake == math.inf:
                return  # nothing can become ready by waiting (or next_ready says so and pop disagrees)
            clock.move_to(max(wake, clock.time()) + tries)
            tries += 1
            continue
        tries = 0
        if request.not_before is not None and request.not_before > clock.time():
            raise Wrong(f"{request.url} handed out at {clock.time():.3f}, before its not_before "
                        f"{request.not_before:.3f}")
        popped.urls.append(request.url)
        if request.not_before is not None:
            popped.held.append(request.url)
        frontier.done(request)


def _compare_held(expect: Expect, held: Counter, *, subset: bool) -> str | None:
    """The requests that came back with a not_before against those expected to."""
    extra = held - expect.held - expect.held_allowance
    if extra:
        return f"{sum(extra.values())} request(s) came back with a not_before they were not given: {sorted(extra)[:3]}"
    if not subset:
        missing = expect.held - held
        if missing:
            return f"{sum(missing.values())} request(s) held back came back without their not_before: " \
                   f"{sorted(missing)[:3]}"
    return None


def _compare(expect: Expect, popped: Counter, *, subset: bool) -> str | None:
    pending = expect.pending
    resurrected = sorted(u for u in popped if u in expect.done and popped[u] > expect.allowance[u])
    if resurrected:
        return f"done URL came back: {resurrected[:3]}"
    extra = popped - pending - expect.allowance
    if extra:
        return f"{sum(extra.values())} URL(s) came back more often than pushed: {sorted(extra)[:3]}"
    if not subset:
        missing = pending - popped
        if missing:
            return f"{sum(missing.values())} pending URL(s) lost silently: {sorted(missing)[:3]}"
    return None


def _dedupe_lost(frontier, fx: Fixture, seed: int, full: bool) -> tuple[list[str], list[str]]:
    """The done URLs the frontier would accept again: ``has_seen`` for each (or for a seeded
    tenth of them unless ``full``), and ``push`` for a few; and those the push took."""
    sample = fx.refuse if full else fx.refuse[seed % 10::10]
    lost = [r.url for r in sample if not frontier.has_seen(r.fingerprint)]
    pushed = [r.url for r in fx.refuse[seed % 97::97] if frontier.push(r)]
    return sorted(set(lost + pushed)), pushed  # pushed: queued again, they come back at the reopen


def _names_file(exc: BaseException, job: str) -> bool:
    return os.path.basename(job) in str(exc) or any(
        name in str(exc) for name in ("frontier.json", "requests.", "active.json", "lock"))


def _attempt(fx: Fixture, expect: Expect, job: str, seed: int, popped: Popped) -> tuple[str, BaseException | None]:
    """Open, drain, re-push done URLs, close, reopen: ("exact" or "torn", None), or (where, the refusal)."""
    from diskfrontier import Frontier, FrontierError

    try:
        frontier = Frontier(job)
    except FrontierError as exc:
        return "open", exc
    try:
        _drain(frontier, popped)
        accepted, pushed = _dedupe_lost(frontier, fx, seed, expect.full_dedupe)
    except FrontierError as exc:
        with contextlib.suppress(FrontierError):
            frontier.close()
        return "pop", exc
    frontier.close()
    got, held = Counter(popped.urls), Counter(popped.held)
    kind = "exact"
    wrong = _compare(expect, got, subset=False) or _compare_held(expect, held, subset=False)
    if wrong and expect.torn is not None and _compare(expect.torn, got, subset=False) is None \
            and _compare_held(expect.torn, held, subset=False) is None:
        kind, wrong = "torn", None
        accepted = [url for url in accepted if url not in expect.torn.exempt]
    if wrong is None and accepted:
        wrong = f"dedupe lost silently: {len(accepted)} done URL(s) accepted again, e.g. {accepted[:2]}"
    if wrong:
        raise Wrong(wrong)
    try:
        again = Frontier(job)
    except FrontierError as exc:
        raise Wrong(f"reopening after a clean drain is refused: {exc}") from None
    try:
        left = Popped(popped.clock)
        _drain(again, left)
    finally:
        again.close()
    if Counter(left.urls) != Counter(pushed):  # only what was pushed again (a done URL a torn tail took back)
        raise Wrong(f"{len(left.urls)} request(s) came back after everything was done: {left.urls[:3]}")
    return kind, None


def _after_refusal(fx: Fixture, expect: Expect, job: str, seed: int, exc: BaseException, popped: Popped,
                   outcome: Outcome) -> None:
    """The refusal's advice must work: verify sees the damage; repair (when advised) lets the directory open."""
    from diskfrontier import Frontier, FrontierError
    from diskfrontier.jobdir.maintenance.verify import verify

    if not _names_file(exc, job):
        raise Wrong(f"the error names no file: {exc}")
    try:
        report = verify(job)
        if report.sound:
            raise Wrong(f"verify reports sound a directory that open refused ({exc})")
    except FrontierError:
        pass  # verify may refuse as open did (a format it cannot read)
    if "verify --repair" not in str(exc):
        outcome.kind = "manual"
        return
    try:
        verify(job, repair=True)
    except FrontierError as err:
        raise Wrong(f"verify --repair, which the error advised, failed: {err}") from None
    try:
        frontier = Frontier(job)
    except FrontierError as err:
        raise Wrong(f"after verify --repair the directory is still refused: {err}") from None
    try:
        _drain(frontier, popped)
        outcome.dedupe_lost_to_repair = len(_dedupe_lost(frontier, fx, seed, True)[0])
    except FrontierError as err:
        raise Wrong(f"after verify --repair a pop is refused: {err}") from None
    finally:
        frontier.close()
    got = Counter(popped.urls)
    wrong = _compare(expect, got, subset=True) or _compare_held(expect, Counter(popped.held), subset=True)
    if wrong:
        raise Wrong(f"after repair: {wrong}")
    if expect.repaired is not None and (got, Counter(popped.held)) != expect.repaired:
        want, want_held = expect.repaired
        raise Wrong(f"after repair: not what the intact records hold: missing {sorted(want - got)[:3]}, extra "
                    f"{sorted(got - want)[:3]}, held missing {sorted(want_held - Counter(popped.held))[:3]}, "
                    f"held extra {sorted(Counter(popped.held) - want_held)[:3]}")
    outcome.lost_to_repair = sum((expect.pending - got).values())
    outcome.resurrected_by_repair = sum((got - expect.pending).values())


def expectations(fx: Fixture, target: str, kind: str, spans: list[tuple[int, int]]) -> Expect:
    """What the damaged copy of ``fx`` may give back."""
    from diskfrontier.jobdir.journal import CARRIES_REQUEST

    expect = Expect(fx.pending, fx.done, full_dedupe=target.startswith("requests.seen"), held=fx.held)
    if target != "requests.urls":
        return expect
    start = min(a for a, _ in spans)
    # A kill can leave a journal cut anywhere above the floor, or zeros to its end (a power cut).
    reaches_end = max(b for _, b in spans) >= fx.journal_size
    if fx.state == "crash" and kind in ("truncate", "zero") and reaches_end and start >= fx.floor:
        before = {r.url for r in fx.records if r.kind in CARRIES_REQUEST and r.end <= start}
        after = {r.url for r in fx.records if r.kind in CARRIES_REQUEST and r.end > start}
        torn = replay(fx.records, start)
        expect.torn = Expect(torn, {u for u in fx.done | after if not torn[u]}, exempt=after - before,
                             held=replay_held(fx.records, start))
    # Repair keeps intact records: a destroyed DONE, RETRY or REFETCH record brings the request it finished
    # back (a RETRY or REFETCH whose target is destroyed is kept as a PUSH: its URL is pending once still).
    by_offset = {r.offset: r for r in fx.records}
    for record in fx.records:
        if record.target is not None and any(record.offset < b and a < record.end for a, b in spans):
            finished = by_offset[record.target]
            expect.allowance[finished.url] += 1
            if finished.held:
                expect.held_allowance[finished.url] += 1
    return expect


@contextlib.contextmanager
def no_fsync():
    """fsync as a no-op: the cases are about bytes, not power cuts, and fsync is most of their time."""
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real


def run_case(fx: Fixture, work: str, target: str, kind: str, seed: int, *, seconds: int = 10) -> Outcome:
    """Copy ``fx``, damage it, open and drain it; classify the outcome (call it under ``no_fsync`` for speed)."""
    rng = random.Random(f"{fx.name}/{target}/{kind}/{seed}")
    job = os.path.join(work, f"{fx.name}-{target.replace('/', '_')}-{kind}-{seed}")
    shutil.copytree(fx.path, job, symlinks=True)
    try:
        done = damage(rng, job, target, kind, fx.sibling)
        if done is None:
            return Outcome("n/a")
        what, spans = done
        return _classify(fx, job, target, kind, what, spans, seed, seconds)
    finally:
        shutil.rmtree(job, ignore_errors=True)


def run_record_case(fx: Fixture, work: str, record: Record, *, seconds: int = 10) -> Outcome:
    """Like ``run_case``, with one byte of the body of the journal record ``record`` changed (its checksum then
    fails wherever the byte is): the record is destroyed, and nothing else, so that what ``verify --repair``
    leaves is known exactly (``_alive(without=record)``), and a refusal must lead to exactly that."""
    from diskfrontier.jobdir.journal import FRAME

    rng = random.Random(f"{fx.name}/record/{record.offset}")
    job = os.path.join(work, f"{fx.name}-record-{record.offset}")
    shutil.copytree(fx.path, job, symlinks=True)
    try:
        at = rng.randrange(record.offset + FRAME.size, record.end)
        with open(os.path.join(job, "requests.urls"), "r+b") as f:
            f.seek(at)
            byte = f.read(1)[0] ^ rng.randrange(1, 256)
            f.seek(at)
            f.write(bytes([byte]))
        what = f"requests.urls: byte {at} of the type-{record.kind} record at {record.offset} changed"
        alive = _alive(fx.records, without=record)
        repaired = Counter(r.url for r in alive), Counter(r.url for r in alive if r.held)
        return _classify(fx, job, "requests.urls", "flip", what, [(at, at + 1)], record.offset, seconds, repaired)
    finally:
        shutil.rmtree(job, ignore_errors=True)


def _classify(fx: Fixture, job: str, target: str, kind: str, what: str, spans: list[tuple[int, int]], seed: int,
              seconds: int, repaired: tuple[Counter, Counter] | None = None) -> Outcome:
    """Open and drain the damaged copy ``job`` of ``fx``; classify the outcome (``repaired``: see Expect)."""
    expect = expectations(fx, target, kind, spans)
    expect.repaired = repaired
    outcome = Outcome("exact", damage=what)
    try:
        with guarded(seconds), fake_clock() as clock:
            popped = Popped(clock)
            outcome.kind, exc = _attempt(fx, expect, job, seed, popped)
            if exc is not None:
                outcome.kind, outcome.detail = "refused", str(exc)
                _after_refusal(fx, expect, job, seed, exc, popped, outcome)
    except Wrong as wrong:
        outcome.kind, outcome.detail = "fail", f"WRONG: {wrong}"
    except CaseTimeout as timeout:
        outcome.kind, outcome.detail = "fail", f"HANG: {timeout}"
    except MemoryError:
        outcome.kind, outcome.detail = "fail", "MemoryError (over the allocation limit)"
    except Exception as raw:  # a raw exception is the failure being looked for
        outcome.kind, outcome.detail = "fail", f"RAW {type(raw).__name__}: {raw}"[:400]
    return outcome


def requeue_records(fx: Fixture, per_class: int = 2) -> list[Record]:
    """The records of ``fx`` that the requeue fixtures are about: HOST, RETRY and REFETCH records, and records
    a RETRY or REFETCH finished; ``per_class`` of each class (its type, its target's type, whether it is held
    back, whether a RETRY or REFETCH finished it, and on which side of the floor it is)."""
    from diskfrontier.jobdir.journal import HOST, REQUEUES

    by_offset = {r.offset: r for r in fx.records}
    requeued = {r.target: r.kind for r in fx.records if r.kind in REQUEUES}
    taken: Counter = Counter()
    out = []
    for r in fx.records:
        if r.kind != HOST and r.kind not in REQUEUES and r.offset not in requeued:
            continue
        key = (r.kind, None if r.target is None else by_offset[r.target].kind, r.held, requeued.get(r.offset),
               r.offset >= fx.floor)
        if taken[key] < per_class:
            taken[key] += 1
            out.append(r)
    return out


# ----------------------------------------------------------------------------- the table


@dataclass
class Tally:
    cases: int = 0
    counts: Counter = field(default_factory=Counter)  # (kind, state) -> n
    requeue: Counter = field(default_factory=Counter)  # kind -> n, of the cases on the requeue fixtures
    lost: list[int] = field(default_factory=list)
    resurrected: list[int] = field(default_factory=list)
    dedupe_lost: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def add(self, fx: Fixture, outcome: Outcome, seed: int) -> None:
        self.cases += 1
        self.counts[outcome.kind, fx.state] += 1
        if fx.name.endswith("-requeue"):
            self.requeue[outcome.kind] += 1
        if outcome.kind == "refused":
            self.lost.append(outcome.lost_to_repair)
            self.resurrected.append(outcome.resurrected_by_repair)
            self.dedupe_lost.append(outcome.dedupe_lost_to_repair)
        if outcome.kind == "fail":
            self.failures.append(f"{fx.name} seed {seed}: {outcome.damage}: {outcome.detail}")


def _stat(values: list[int]) -> str:
    return f"{sum(values) / len(values):.1f}/{max(values)}" if values else "-"


def table(tallies: dict[tuple[str, str], Tally]) -> str:
    """file x damage -> outcomes, as text."""
    head = (f"{'file':<18} {'damage':<8} {'cases':>5} {'exact':>11} {'torn':>5} {'refused':>11} {'manual':>6} "
            f"{'FAIL':>4} {'n/a':>4} | {'after repair, per refused case (mean/max):':<42}")
    sub = f"{'':<81}| {'lost':>9} {'resurrected':>13} {'dedupe lost':>13}"
    lines = [head, sub, "-" * len(sub)]

    def both(t: Tally, kind: str) -> int:
        return t.counts[kind, "clean"] + t.counts[kind, "crash"]

    def split(t: Tally, kind: str) -> str:
        return f"{both(t, kind)} ({t.counts[kind, 'clean']}/{t.counts[kind, 'crash']})" if both(t, kind) else "0"

    totals: Counter = Counter()
    for (target, kind), t in tallies.items():
        ran = t.cases - both(t, "n/a")
        for k in ("exact", "torn", "refused", "manual", "fail", "n/a"):
            totals[k] += both(t, k)
        totals["cases"] += ran
        lines.append(f"{target:<18} {kind:<8} {ran:>5} {split(t, 'exact'):>11} {both(t, 'torn'):>5} "
                     f"{split(t, 'refused'):>11} {both(t, 'manual'):>6} {both(t, 'fail'):>4} {both(t, 'n/a'):>4} | "
                     f"{_stat(t.lost):>9} {_stat(t.resurrected):>13} {_stat(t.dedupe_lost):>13}")
    lines.append("-" * len(sub))
    lines.append(f"{'total':<27} {totals['cases']:>5} {totals['exact']:>11} {totals['torn']:>5} "
                 f"{totals['refused']:>11} {totals['manual']:>6} {totals['fail']:>4} {totals['n/a']:>4}")
    requeue: Counter = sum((t.requeue for t in tallies.values()), Counter())
    ran = sum(requeue.values()) - requeue["n/a"]
    lines.append(f"{'of which requeue fixtures':<27} {ran:>5} {requeue['exact']:>11} {requeue['torn']:>5} "
                 f"{requeue['refused']:>11} {requeue['manual']:>6} {requeue['fail']:>4} {requeue['n/a']:>4}")
    lines.append("exact/refused: total (clean fixtures/crash fixtures). torn: a crash-state journal cut or zeroed to "
                 "its end above the checkpoint floor, read as a kill would leave it. manual: refused with advice other "
                 "than verify --repair. lost/resurrected/dedupe lost: pending requests missing, done requests back "
                 "(their DONE record was in the damage), done URLs no longer refused, after verify --repair.")
    return "\n".join(lines)


if __name__ == "__main__":
    _child_main(sys.argv[1:])
