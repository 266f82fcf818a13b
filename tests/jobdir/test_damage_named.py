"""Damage that used to pass as sound is named now: a record's identity is in its checksum,
a DONE must name a PUSH, the checkpoint is checked against the journal's own counts, and
the seen file has checksums. Format-1 directories are upgraded on open."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jobkit import dir_salt
from paths import DATA

from diskfrontier import Frontier, FrontierError, JobDirCorrupt, Request
from diskfrontier.jobdir.journal import FRAME, JournalScan, done_body, frame
from diskfrontier.jobdir.layout import FORMAT_VERSION
from diskfrontier.jobdir.maintenance.verify import verify

SCRIPT = os.path.join(os.path.dirname(sys.executable), "diskfrontier")
N = 300


def make_job(path, *, clean: bool = True) -> set[str]:
    f = Frontier(path)
    f.push_many(Request(f"https://a.example/{i}", priority=i % 3) for i in range(N))
    finished = set()
    for _ in range(100):
        r = f.pop()
        assert r is not None
        f.done(r)
        finished.add(r.url)
    if clean:
        f.close()
    else:
        f._state.seen.flush()
        f._closing.release_files()
        f._lock.release()
    return finished


def expected(finished: set[str]) -> list[str]:
    return sorted({f"https://a.example/{i}" for i in range(N)} - finished)


def drain(path) -> list[str]:
    out = []
    with Frontier(path) as f:
        while not f.finished:  # (a host with a delay of its own holds its requests back a while)
            r = f.pop(timeout=5)
            assert r is not None
            out.append(r.url)
            f.done(r)
    return sorted(out)


def records(path) -> list[tuple[int, bytes]]:
    return [(offset, bytes(body)) for offset, body in JournalScan(str(path), salt=dir_salt(os.path.dirname(path)))]


def pending_push_offset(path, index: int) -> int:
    """The offset of the index-th PUSH record that is still pending."""
    all_records = records(path)
    done = {int.from_bytes(b[1:], "big") for _, b in all_records if b[0] == 2}
    return [o for o, b in all_records if b[0] == 1 and o not in done][index]


def open_and_drain_must_refuse(job, *offsets: int) -> None:
    """A crash-state directory refuses at open; a clean one (whose journal is not scanned) at the pop."""
    with pytest.raises(JobDirCorrupt) as info:
        drain(job)
    assert info.value.offset in offsets
    assert any(f.offset == offsets[0] for f in verify(job).findings)


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
@pytest.mark.parametrize("byte", [0, 1, 2, 3])
def test_flipped_length_of_a_record_in_the_middle_is_damage_not_a_torn_tail(tmp_path, clean, byte):
    job = tmp_path / "job"
    make_job(job, clean=clean)
    offset = pending_push_offset(job / "requests.urls", 50)
    with open(job / "requests.urls", "r+b") as f:
        f.seek(offset + byte)
        value = f.read(1)[0]
        f.seek(offset + byte)
        f.write(bytes([value ^ 0x40]))
    open_and_drain_must_refuse(job, offset)


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_the_last_records_length_damaged_is_not_taken_for_a_torn_tail(tmp_path, clean):
    job = tmp_path / "job"
    finished = make_job(job, clean=clean)
    with Frontier(job) as f:  # the last record is a PUSH acknowledged after the open
        f.push(Request("https://a.example/last"))
    last = records(job / "requests.urls")[-1][0]
    with open(job / "requests.urls", "r+b") as f:
        f.seek(last + 1)
        f.write(b"\x7f")  # the length now runs far past the end of the file, as a torn write would
    with pytest.raises(JobDirCorrupt) as info:
        Frontier(job)
    assert info.value.offset == last
    assert finished  # nothing was opened with a request silently missing


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_swapped_records_of_equal_length_are_damage(tmp_path, clean):
    job = tmp_path / "job"
    make_job(job, clean=clean)
    a = pending_push_offset(job / "requests.urls", 10)
    b = pending_push_offset(job / "requests.urls", 11)
    data = bytearray((job / "requests.urls").read_bytes())
    size = b - a
    assert int.from_bytes(data[b:b + 4], "big") + FRAME.size == size  # equal lengths, side by side
    data[a:a + size], data[b:b + size] = data[b:b + size], data[a:a + size]
    (job / "requests.urls").write_bytes(bytes(data))
    open_and_drain_must_refuse(job, a, b)  # a clean directory's LIFO pop may reach either first


def test_a_record_copied_over_another_is_damage(tmp_path):
    job = tmp_path / "job"
    make_job(job, clean=False)
    all_records = records(job / "requests.urls")
    dones = [(o, b) for o, b in all_records if b[0] == 2]
    (a, _), (b, _) = dones[3], dones[4]
    data = bytearray((job / "requests.urls").read_bytes())
    size = FRAME.size + 9
    data[b:b + size] = data[a:a + size]  # a valid DONE record, in the wrong place
    (job / "requests.urls").write_bytes(bytes(data))
    with pytest.raises(JobDirCorrupt) as info:
        Frontier(job)
    assert info.value.offset == b


@pytest.mark.parametrize("target", ["nowhere", "a-done", "later"])
def test_a_done_that_names_no_pending_push_is_damage(tmp_path, target):
    job = tmp_path / "job"
    make_job(job, clean=False)
    all_records = records(job / "requests.urls")
    path = job / "requests.urls"
    end = os.path.getsize(path)
    named = {"nowhere": 12345, "a-done": next(o for o, b in all_records if b[0] == 2), "later": end + 100}[target]
    if target == "a-done":
        named = int.from_bytes(bytes(dict(all_records)[named])[1:], "big")  # a PUSH already done
    with open(path, "ab") as f:
        f.write(frame(end, done_body(named), dir_salt(job)))
    with pytest.raises(JobDirCorrupt) as info:
        Frontier(job)
    assert info.value.offset == end
    assert any(f.offset == end for f in verify(job).findings)


def test_flipped_byte_in_the_checkpoint_means_rebuild_never_empty(tmp_path):
    job = tmp_path / "job"
    finished = make_job(job)
    text = (job / "requests.cursor").read_text()
    assert '"pending"' in text
    (job / "requests.cursor").write_text(text.replace('"pending"', '"pend`ng"'))
    with Frontier(job) as f:
        assert f.recovery == "rebuilt"
        assert len(f) == N - 100
    assert drain(job) == expected(finished)


def test_checkpoint_counts_that_do_not_add_up_mean_rebuild(tmp_path):
    job = tmp_path / "job"
    finished = make_job(job)
    value = json.loads((job / "requests.cursor").read_text())
    value["pending"] = {}  # and a matching crc: consistent on its own, but not with the journal's counts
    value.pop("crc")
    import zlib

    value["crc"] = zlib.crc32(json.dumps(value, sort_keys=True).encode())
    (job / "requests.cursor").write_text(json.dumps(value))
    assert drain(job) == expected(finished)


def test_a_damaged_seen_entry_is_named(tmp_path):
    job = tmp_path / "job"
    with Frontier(job) as f:
        f.push_many(Request(f"https://a.example/{i}") for i in range(4000))  # more than one 64 KiB block
    with open(job / "requests.seen", "r+b") as f:
        for where in (1000, 80_000):
            f.seek(where)
            value = f.read(1)[0]
            f.seek(where)
            f.write(bytes([value ^ 1]))
            break
    with pytest.raises(JobDirCorrupt, match=r"requests\.seen") as info:
        Frontier(job)
    assert info.value.offset == 0
    report = verify(job)
    assert not report.sound and report.findings[0].file.endswith("requests.seen")
    assert verify(job, repair=True).repaired
    with Frontier(job) as f:  # every fingerprint of the journal is seen again
        assert not any(f.push(Request(f"https://a.example/{i}")) for i in range(4000))


def test_a_damaged_seen_entry_in_the_last_block_is_named_after_a_clean_close(tmp_path):
    job = tmp_path / "job"
    with Frontier(job) as f:
        f.push_many(Request(f"https://a.example/{i}") for i in range(50))
    with open(job / "requests.seen", "r+b") as f:
        f.seek(22 * 10 + 5)
        f.write(b"\x00")
    with pytest.raises(JobDirCorrupt, match=r"requests\.seen"):
        Frontier(job)


def test_peek_and_export_refuse_a_damaged_record(tmp_path):
    job = tmp_path / "job"
    with Frontier(job) as f:
        f.push_many(Request(f"https://a.example/page-{i}") for i in range(5))
    data = (job / "requests.urls").read_bytes()
    at = data.index(b"page-3")
    (job / "requests.urls").write_bytes(data[:at] + b"PAGE-3" + data[at + 6:])
    for command in (["peek"], ["export"]):
        result = subprocess.run([SCRIPT, *command, str(job)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, result.stdout
        assert "PAGE-3" not in result.stdout
        assert "requests.urls" in result.stderr and "Traceback" not in result.stderr


def _copy(name: str, tmp_path) -> str:
    job = str(tmp_path / name)
    shutil.copytree(os.path.join(DATA, name), job)
    return job


@pytest.mark.parametrize("name", ["format1-killed-lifo", "format1-killed-fifo", "format1-clean-lifo",
                                  "format2-killed-lifo", "format2-killed-fifo", "format2-clean-lifo",
                                  "format3-killed-lifo", "format3-killed-fifo", "format3-clean-lifo"])
def test_an_older_directory_is_upgraded_on_open_and_loses_nothing(tmp_path, name):
    job = _copy(name, tmp_path)
    with open(os.path.join(DATA, f"{name}.expected.json")) as f:
        want = json.load(f)
    with Frontier(job) as frontier:
        assert all(not frontier.push(Request(u)) for u in want["done"])  # finished ones stay seen
        failed = sorted([item.request.url, item.error] for item in frontier.failed())
        delays = {info.host: info.delay for info in frontier.hosts() if info.delay}
        for host in delays:
            frontier.set_delay(host, 0.0)  # checked: the drain need not wait for it
    assert failed == want.get("failed", []) and delays == want.get("delays", {})
    meta = json.loads(Path(job, "frontier.json").read_text())
    assert meta["version"] == FORMAT_VERSION and meta["order"] == want["order"] and len(meta["id"]) == 16
    assert Path(job, "requests.urls").read_bytes()[:8] == b"DFURLS\x00\x04"
    assert Path(job, "requests.seen.sums").read_bytes()[:8] == b"DFSEEN\x00\x03"
    assert verify(job).sound
    with Frontier(job) as frontier:  # the done count of each host comes through the upgrade
        done = {h.host: h.done for h in frontier.hosts()}
    assert sum(done.values()) == len(want["done"]) + len(want.get("failed", []))
    assert drain(job) == want["pending"]


@pytest.mark.parametrize("name", ["format1-killed-lifo", "format2-killed-lifo", "format2-clean-lifo",
                                  "format3-killed-lifo", "format3-clean-lifo"])
def test_an_older_directory_can_be_inspected_and_peeked_before_it_is_upgraded(tmp_path, name):
    job = _copy(name, tmp_path)
    before = {name: Path(job, name).read_bytes() for name in ("requests.urls", "frontier.json")}
    result = subprocess.run([SCRIPT, "inspect", job, "--json"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["format_version"] == int(name[6])
    peek = subprocess.run([SCRIPT, "peek", job, "-n", "3"], capture_output=True, text=True, timeout=60)
    assert peek.returncode == 0 and len(peek.stdout.splitlines()) == 3
    after = {name: Path(job, name).read_bytes() for name in before}
    assert before == after  # read-only


@pytest.mark.parametrize("stop", ["install", "meta"])
def test_an_upgrade_killed_half_way_finishes_at_the_next_open(tmp_path, monkeypatch, stop):
    job = _copy("format1-killed-fifo", tmp_path)
    with open(os.path.join(DATA, "format1-killed-fifo.expected.json")) as f:
        want = json.load(f)
    import diskfrontier.jobdir.maintenance.upgrade as upgrade

    def killed(*args, **kwargs):
        raise SystemExit("killed")

    monkeypatch.setattr(upgrade, "install" if stop == "install" else "write_json_atomic", killed)
    with pytest.raises(SystemExit):
        Frontier(job)
    monkeypatch.undo()
    assert drain(job) == want["pending"]


def test_a_journal_without_its_frontier_json_is_not_taken_for_a_new_directory(tmp_path):
    job = tmp_path / "job"
    make_job(job)
    os.unlink(job / "frontier.json")
    with pytest.raises(FrontierError, match=r"frontier\.json"):
        Frontier(job)
    assert (job / "requests.urls").stat().st_size > 8


@pytest.mark.parametrize("written", [0, 3, 8])
def test_a_creation_killed_before_frontier_json_is_finished_at_the_next_open(tmp_path, written):
    job = tmp_path / "job"
    with Frontier(job):
        pass
    os.unlink(job / "frontier.json")  # killed while the journal held only (a beginning of) its magic
    os.truncate(job / "requests.urls", written)
    with Frontier(job) as f:
        assert f.push(Request("https://a.example/"))
    assert drain(job) == ["https://a.example/"]


def test_repair_of_a_seen_file_whose_first_length_is_damaged_keeps_the_others(tmp_path):
    job = tmp_path / "job"
    urls = [f"https://a.example/{i}" for i in range(100)]
    with Frontier(job) as f:
        f.push_many(Request(u) for u in urls)
        while (r := f.pop()) is not None:
            f.done(r)
        f.compact()  # the journal no longer holds these fingerprints: only requests.seen does
    data = bytearray((job / "requests.seen").read_bytes())
    data[1] ^= 0x01
    (job / "requests.seen").write_bytes(bytes(data))
    assert verify(job, repair=True).repaired
    with Frontier(job) as f:
        assert sum(f.push(Request(u)) for u in urls) <= 1  # only the damaged entry's URL may come back
