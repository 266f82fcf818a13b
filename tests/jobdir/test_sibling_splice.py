"""A record taken from a sibling job directory is damage, not data (guarantee 6, integrity model).

Two job directories built by the same steps used to hold the same records byte for byte
(each record's checksums held its offset only), so a record of one, spliced into the
other at the same offset, passed every check: a killed directory handed out the other
directory's URL. Each directory now has a random id (``frontier.json`` and every
checkpoint), folded into the checksums of every journal record and seen-file block.
The siblings here differ in their URLs' host letter only, so every record has the same
size and offset in both.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from jobkit import dir_id

from diskfrontier import Frontier, Request
from diskfrontier.core.errors import JobDirCorrupt
from diskfrontier.jobdir.journal import DONE, FRAME, MAGIC, PUSH, JournalScan
from diskfrontier.jobdir.layout import Layout, read_meta, salt_of
from diskfrontier.jobdir.maintenance.verify import verify
from diskfrontier.jobdir.seen import BLOCK


def build(path: str, letter: str, *, kill: bool) -> None:
    """The same steps in every directory: 3,300 pushes (more than one seen-file block), 1,000 pops, 900 dones."""
    frontier = Frontier(path)
    frontier.push_many([Request(f"https://{letter}{i % 4}.example/p/{i:05d}", priority=i % 3) for i in range(3300)])
    popped = [frontier.pop() for _ in range(1000)]
    for request in popped[:900]:
        assert request is not None
        frontier.done(request)
    if kill:
        frontier._state.journal.close()  # what a kill leaves: no clean checkpoint (the lock goes with the object)
        frontier._state.seen.flush()
        frontier._lock.release()
    else:
        frontier.close()


@pytest.fixture(params=["killed", "clean"])
def siblings(request, tmp_path):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    build(ours, "a", kill=request.param == "killed")
    build(theirs, "b", kill=request.param == "killed")
    return ours, theirs


def records(job: str) -> list[tuple[int, int, int]]:
    """(offset, end, type) of every record of the job directory's journal."""
    salt = salt_of(read_meta(Layout(job)))
    return [(offset, offset + FRAME.size + len(body), body[0]) for offset, body in
            JournalScan(Layout(job).journal, salt=salt)]


def splice(ours: str, theirs: str, name: str, start: int, end: int) -> None:
    with open(os.path.join(theirs, name), "rb") as f:
        f.seek(start)
        piece = f.read(end - start)
    with open(os.path.join(ours, name), "r+b") as f:
        f.seek(start)
        f.write(piece)


def drain(job: str, urls: list[str] | None = None) -> list[str]:
    urls = [] if urls is None else urls
    with Frontier(job) as frontier:
        while (request := frontier.pop()) is not None:
            urls.append(request.url)
            frontier.done(request)
    return urls


def test_siblings_have_their_own_ids_and_share_no_record(siblings):
    ours, theirs = siblings
    assert dir_id(ours) != dir_id(theirs)
    mine, other = records(ours), records(theirs)
    assert [(a, b) for a, b, _ in mine] == [(a, b) for a, b, _ in other]  # the same layout ...
    with open(Layout(ours).journal, "rb") as f:
        a = f.read()
    with open(Layout(theirs).journal, "rb") as f:
        b = f.read()
    same = [offset for offset, end, kind in mine if kind == DONE and a[offset:end] == b[offset:end]]
    assert not same  # ... and not one record in common, not even a DONE of the same offset


@pytest.mark.parametrize("which", ["first", "push", "done", "last"])
def test_a_record_spliced_from_a_sibling_is_named_at_its_offset(siblings, which):
    ours, theirs = siblings
    mine = records(ours)
    pushes = [r for r in mine if r[2] == PUSH]
    dones = [r for r in mine if r[2] == DONE]
    start, end, _ = {"first": mine[0], "push": pushes[len(pushes) // 2], "done": dones[len(dones) // 2],
                     "last": mine[-1]}[which]
    splice(ours, theirs, "requests.urls", start, end)
    report = verify(ours)
    assert not report.sound
    named = [f.offset for f in report.findings if f.file == Layout(ours).journal]
    assert named[0] == start and set(named) <= {start, 0}, report.findings  # (0: the checkpoint's size, after)
    want = drain_copy(theirs)
    urls: list[str] = []
    try:
        drain(ours, urls)
    except JobDirCorrupt as exc:
        assert exc.file == Layout(ours).journal and exc.offset == start
    assert verify(ours, repair=True).repaired
    drain(ours, urls)
    assert not [url for url in urls if "://b" in url]  # never the sibling's URL
    assert len(urls) == len(set(urls)) >= len(want) - 1  # ours, each once; at most the spliced one lost


def test_a_seen_block_spliced_with_its_sum_from_a_sibling_is_named(siblings):
    ours, theirs = siblings
    assert os.path.getsize(Layout(ours).seen) > BLOCK
    splice(ours, theirs, "requests.seen", 0, BLOCK)
    splice(ours, theirs, "requests.seen.sums", len(MAGIC), len(MAGIC) + 4)  # the block's own checksum too
    report = verify(ours)
    assert [(f.file, f.offset) for f in report.findings] == [(Layout(ours).seen, 0)]
    with pytest.raises(JobDirCorrupt) as info:
        Frontier(ours)
    assert info.value.file == Layout(ours).seen and info.value.offset == 0


def test_a_cursor_copied_from_a_sibling_is_not_trusted(siblings):
    ours, theirs = siblings
    want = sorted(drain_copy(ours))
    shutil.copyfile(Layout(theirs).cursor, Layout(ours).cursor)
    report = verify(ours)
    assert any("names the job directory" in note for note in report.notes), report.notes
    assert sorted(drain(ours)) == want  # rebuilt from our own journal, nothing lost or foreign


def drain_copy(job: str) -> list[str]:
    scratch = job + ".copy"
    shutil.copytree(job, scratch)
    try:
        return drain(scratch)
    finally:
        shutil.rmtree(scratch)


def test_a_frontier_json_from_a_sibling_is_refused_and_repair_leaves_the_journal(siblings):
    ours, theirs = siblings
    own = dir_id(ours)
    shutil.copyfile(Layout(theirs).meta, Layout(ours).meta)
    with open(Layout(ours).journal, "rb") as f:
        before = f.read()
    with pytest.raises(JobDirCorrupt, match=f'set its "id" to "{own}"') as info:
        Frontier(ours)
    assert info.value.file == Layout(ours).meta
    report = verify(ours, repair=True)
    assert [(f.file, f.offset) for f in report.findings] == [(Layout(ours).meta, 0)], report.findings
    with open(Layout(ours).journal, "rb") as f:
        assert f.read() == before  # the journal is sound: repair leaves it


def test_an_id_that_is_not_16_hex_digits_is_named(tmp_path):
    job = str(tmp_path / "job")
    with Frontier(job) as frontier:
        frontier.push(Request("https://a.example/"))
    with open(Layout(job).meta) as f:
        meta = json.load(f)
    meta["id"] = "not-an-id"
    with open(Layout(job).meta, "w") as f:
        json.dump(meta, f)
    with pytest.raises(JobDirCorrupt, match="16 hex digits"):
        Frontier(job)
