"""A job directory is untrusted input: links and odd files planted in it are refused, never written through."""

from __future__ import annotations

import errno
import os
import time

import pytest

from diskfrontier import Frontier, Request
from diskfrontier.core.errors import FrontierError, JobDirUnsafe
from diskfrontier.files import atomic, safefs
from diskfrontier.files.atomic import fsync_path, write_atomic
from diskfrontier.files.safefs import (
    DIRECTORY,
    FILE,
    check_entries,
    check_tree,
    create_aside,
    create_exclusive,
    make_dir,
    open_fd,
    open_file,
    remove_stale_temps,
    remove_tree,
)
from diskfrontier.jobdir.lock import Lock

PRECIOUS = b"precious bytes that live outside the job directory\n"
NOT_WIRED = "needs the storage layer to open files through safefs"


@pytest.fixture
def job(tmp_path):
    path = tmp_path / "job"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path):
    """A file outside the job directory that a planted link points at."""
    path = tmp_path / "outside" / "precious.txt"
    path.parent.mkdir()
    path.write_bytes(PRECIOUS)
    return path


def snapshot(root):
    """Every entry under ``root``: its bytes (or None for a folder), inode and mtime."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            full = os.path.join(folder, name)
            st = os.lstat(full)
            data = None
            if not os.path.isdir(full):
                with open(full, "rb") as f:
                    data = f.read()
            out[os.path.relpath(full, root)] = (data, st.st_ino, st.st_mtime_ns)
    return out


def temp_files(folder):
    return sorted(name for name in os.listdir(folder) if ".tmp" in name)


# ------------------------------------------------------------------ write_atomic
def test_write_atomic_leaves_a_file_behind_a_planted_temp_link_untouched(job, outside):
    cursor = job / "requests.cursor"
    cursor.write_bytes(b"old")
    (job / "requests.cursor.tmp").symlink_to(outside)
    write_atomic(str(cursor), b"new")
    assert outside.read_bytes() == PRECIOUS
    assert cursor.read_bytes() == b"new"
    assert (job / "requests.cursor.tmp").is_symlink()


def test_write_atomic_refuses_a_link_at_its_temp_name(job, outside, monkeypatch):
    cursor = job / "requests.cursor"
    cursor.write_bytes(b"old")
    planted = job / "requests.cursor.tmp-1-feed"
    planted.symlink_to(outside)
    monkeypatch.setattr(atomic, "unique_temp", lambda path: str(planted))
    with pytest.raises(JobDirUnsafe, match="is a symbolic link"):
        write_atomic(str(cursor), b"new")
    assert outside.read_bytes() == PRECIOUS
    assert cursor.read_bytes() == b"old"
    assert planted.is_symlink()


def test_write_atomic_replaces_a_link_at_its_target_instead_of_writing_through_it(job, outside):
    cursor = job / "requests.cursor"
    cursor.symlink_to(outside)
    write_atomic(str(cursor), b"new")
    assert outside.read_bytes() == PRECIOUS
    assert not cursor.is_symlink() and cursor.read_bytes() == b"new"


@pytest.mark.parametrize("call", ["write", "fsync"])
@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()],
                         ids=["ENOSPC", "KeyboardInterrupt"])
def test_write_atomic_interrupted_leaves_no_temp_file_and_the_old_file_intact(job, monkeypatch, call, error):
    cursor = job / "requests.cursor"
    cursor.write_bytes(b"old")

    def fail(*_args):
        raise error

    monkeypatch.setattr(atomic.os, call, fail)
    with pytest.raises(type(error)):
        write_atomic(str(cursor), b"new" * 1000)
    monkeypatch.undo()
    assert cursor.read_bytes() == b"old"
    assert temp_files(job) == []


def test_write_atomic_temp_names_are_unique(job):
    names = {safefs.unique_temp(str(job / "x")) for _ in range(100)}
    assert len(names) == 100
    assert all(name.startswith(f"{job / 'x'}.tmp-{os.getpid()}-") for name in names)


def test_remove_stale_temps_removes_temp_files_and_links_but_not_their_targets(job, outside):
    cursor = job / "requests.cursor"
    cursor.write_bytes(b"kept")
    (job / "requests.cursor.tmp").write_bytes(b"left by an older release")
    (job / "requests.cursor.tmp-12-ab").write_bytes(b"left by a kill")
    (job / "requests.cursor.tmp-13-cd").symlink_to(outside)
    (job / "requests.seen.tmp-14-ef").write_bytes(b"another file's")
    removed = remove_stale_temps(str(cursor))
    assert sorted(os.path.basename(p) for p in removed) == [
        "requests.cursor.tmp", "requests.cursor.tmp-12-ab", "requests.cursor.tmp-13-cd"]
    assert sorted(os.listdir(job)) == ["requests.cursor", "requests.seen.tmp-14-ef"]
    assert outside.read_bytes() == PRECIOUS


# ------------------------------------------------------------------ opening
def test_open_fd_refuses_a_link_naming_it_and_saying_what_to_do(job, outside):
    link = job / "requests.seen"
    link.symlink_to(outside)
    with pytest.raises(JobDirUnsafe) as caught:
        open_fd(str(link), os.O_RDWR | os.O_CREAT)
    message = str(caught.value)
    assert message.startswith(f"{link} is a symbolic link")
    assert "never follows links" in message and "replace it with the real file" in message
    assert caught.value.path == str(link)
    assert isinstance(caught.value, FrontierError)
    assert outside.read_bytes() == PRECIOUS


def test_open_fd_refuses_a_dangling_link_without_creating_its_target(job, tmp_path):
    target = tmp_path / "elsewhere" / "created-through-the-link"
    target.parent.mkdir()
    (job / "requests.seen").symlink_to(target)
    with pytest.raises(JobDirUnsafe):
        open_fd(str(job / "requests.seen"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    assert not target.exists()


def test_open_fd_refuses_a_link_even_when_the_lstat_check_is_raced(job, outside, monkeypatch):
    link = job / "requests.seen"
    link.symlink_to(outside)
    real_lstat = os.lstat
    calls = []

    def lstat_sees_nothing_the_first_time(path, *args, **kwargs):  # the link appears after the check
        calls.append(path)
        if len(calls) == 1:
            raise FileNotFoundError(errno.ENOENT, "not yet", path)
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(safefs.os, "lstat", lstat_sees_nothing_the_first_time)
    with pytest.raises(JobDirUnsafe):
        open_fd(str(link), os.O_RDWR | os.O_TRUNC)
    monkeypatch.undo()
    assert outside.read_bytes() == PRECIOUS


def test_open_fd_refuses_a_named_pipe_without_hanging(job):
    fifo = job / "requests.urls"
    os.mkfifo(fifo)
    started = time.monotonic()
    for flags in (os.O_RDONLY, os.O_RDWR, os.O_WRONLY):
        with pytest.raises(JobDirUnsafe, match="is a named pipe, not a regular file"):
            open_fd(str(fifo), flags)
    assert time.monotonic() - started < 5


def test_open_fd_refuses_a_directory_where_a_file_belongs(job):
    (job / "requests.cursor").mkdir()
    with pytest.raises(JobDirUnsafe, match="is a directory, not a regular file"):
        open_fd(str(job / "requests.cursor"), os.O_RDONLY)


def test_open_fd_lets_other_os_errors_through_unchanged(job):
    with pytest.raises(FileNotFoundError):
        open_fd(str(job / "missing"), os.O_RDONLY)
    (job / "there").write_bytes(b"")
    with pytest.raises(FileExistsError):
        create_exclusive(str(job / "there"))


def test_open_fd_returns_a_blocking_close_on_exec_descriptor(job):
    fd = open_fd(str(job / "requests.urls"), os.O_RDWR | os.O_CREAT)
    try:
        import fcntl
        assert not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK
        assert not os.get_inheritable(fd)
    finally:
        os.close(fd)


def test_open_file_reads_and_writes_real_files_and_refuses_links(job, outside):
    with open_file(str(job / "frontier.json"), "wb") as f:
        f.write(b"{}")
    with open_file(str(job / "frontier.json")) as f:
        assert f.read() == b"{}"
    with open_file(str(job / "notes"), "x") as f:
        f.write("text")
    assert (job / "notes").read_text() == "text"
    (job / "requests.cursor").symlink_to(outside)
    for mode in ("rb", "r+b", "wb", "ab", "xb"):
        with pytest.raises(JobDirUnsafe):
            open_file(str(job / "requests.cursor"), mode)
    assert outside.read_bytes() == PRECIOUS


def test_fsync_path_refuses_a_link(job, outside):
    (job / "p0").symlink_to(outside)
    with pytest.raises(JobDirUnsafe):
        fsync_path(str(job / "p0"))
    fsync_path(str(job))  # a real folder is fine


def test_create_aside_steps_over_taken_names_but_refuses_a_link(job, outside):
    base = job / "requests.urls.torn-8"
    base.write_bytes(b"an earlier tail")
    fd, name = create_aside(str(base))
    os.close(fd)
    assert name == f"{base}.1"
    (job / "requests.urls.torn-8.2").symlink_to(outside)
    with pytest.raises(JobDirUnsafe):
        create_aside(str(base))
    assert outside.read_bytes() == PRECIOUS


# ------------------------------------------------------------------ entries and folders
def test_check_entries_refuses_a_queue_link_to_an_outside_folder(job, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (job / "requests.queue").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(JobDirUnsafe, match=r"requests\.queue is a symbolic link.*replace it with the real directory"):
        check_entries(str(job), {"requests.seen": FILE, "requests.queue": DIRECTORY})


def test_check_entries_refuses_an_entry_of_the_wrong_kind(job):
    (job / "requests.queue").write_bytes(b"")
    with pytest.raises(JobDirUnsafe, match="is a regular file, not a directory"):
        check_entries(str(job), {"requests.queue": DIRECTORY})
    os.mkfifo(job / "requests.seen")
    with pytest.raises(JobDirUnsafe, match="is a named pipe, not a regular file"):
        check_entries(str(job), {"requests.seen": FILE})


def test_check_entries_accepts_missing_entries_and_a_job_dir_that_is_itself_a_link(job, tmp_path):
    (job / "requests.seen").write_bytes(b"")
    (job / "requests.queue").mkdir()
    linked = tmp_path / "linked-job"
    linked.symlink_to(job, target_is_directory=True)
    expected = {"requests.seen": FILE, "requests.queue": DIRECTORY, "requests.cursor": FILE}
    check_entries(str(linked), expected)
    assert safefs.resolve_root(str(linked)) == os.path.realpath(job)


def test_check_tree_refuses_a_link_inside_the_queue_folder(job, outside):
    queue = job / "requests.queue"
    (queue / "p0").mkdir(parents=True)
    (queue / "p0" / "q00000").write_bytes(b"")
    (queue / "active.json").write_bytes(b"[0]")
    check_tree(str(queue))
    (queue / "p0" / "info.json").symlink_to(outside)
    with pytest.raises(JobDirUnsafe, match=r"info\.json is a symbolic link"):
        check_tree(str(queue))


def test_make_dir_refuses_a_link_to_a_folder(job, tmp_path):
    make_dir(str(job / "requests.queue"))
    make_dir(str(job / "requests.queue"))  # already there: fine
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (job / "other.queue").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(JobDirUnsafe):
        make_dir(str(job / "other.queue"))


def test_remove_tree_removes_links_inside_but_not_what_they_point_to(job, tmp_path, outside):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "deep").mkdir(parents=True)
    (elsewhere / "deep" / "keep").write_bytes(b"keep")
    queue = job / "requests.queue"
    (queue / "p1").mkdir(parents=True)
    (queue / "p1" / "q00000").write_bytes(b"x")
    (queue / "p2").symlink_to(elsewhere, target_is_directory=True)
    (queue / "p1" / "info.json").symlink_to(outside)
    before = snapshot(elsewhere)
    remove_tree(str(queue))
    assert not os.path.lexists(queue)
    assert snapshot(elsewhere) == before
    assert outside.read_bytes() == PRECIOUS


def test_remove_tree_refuses_a_link_at_the_top(job, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_bytes(b"keep")
    (job / "requests.queue").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(JobDirUnsafe):
        remove_tree(str(job / "requests.queue"))
    assert (elsewhere / "keep").read_bytes() == b"keep"


# ------------------------------------------------------------------ the lock
def test_lock_link_to_an_outside_file_is_refused_and_the_file_unchanged(job, outside):
    (job / "lock").symlink_to(outside)
    lock = Lock(str(job / "lock"))
    with pytest.raises(JobDirUnsafe, match="lock is a symbolic link"):
        lock.acquire()
    assert outside.read_bytes() == PRECIOUS
    assert not lock.owned()


# ------------------------------------------------------------------ through Frontier
def make_job(path, n=20, *, close=True):
    f = Frontier(str(path))
    f.push_many(Request(f"https://a.example/{i}") for i in range(n))
    if close:
        f.close()
    return f


def open_push_close(path):
    """Frontier(path), one push, close. Returns the JobDirUnsafe raised, or None."""
    try:
        with Frontier(str(path)) as f:
            f.push(Request("https://b.example/new"))
            f.pop()
    except JobDirUnsafe as exc:
        return exc
    return None


def test_frontier_refuses_a_seen_link_and_leaves_its_target_unchanged(job, outside):
    make_job(job)
    seen = job / "requests.seen"
    outside.write_bytes(seen.read_bytes())
    before = outside.read_bytes()
    seen.unlink()
    seen.symlink_to(outside)
    refused = open_push_close(job)
    assert outside.read_bytes() == before, "the frontier wrote through the requests.seen link"
    assert refused is not None and str(seen) in str(refused), "the requests.seen link was not refused"


def test_frontier_refuses_a_dangling_seen_link_without_creating_its_target(job, tmp_path):
    target = tmp_path / "elsewhere" / "created-through-the-link"
    target.parent.mkdir()
    (job / "requests.seen").symlink_to(target)
    refused = open_push_close(job)
    assert not target.exists(), "the frontier created a file through the requests.seen link"
    assert refused is not None, "the requests.seen link was not refused"


def test_frontier_does_not_set_a_torn_tail_aside_through_a_link(job, outside):
    make_job(job)
    journal = job / "requests.urls"
    end = journal.stat().st_size
    with open(journal, "ab") as f:
        f.write(b"\x00\x00\x00\x40torn")  # a frame header whose body never came
    aside = job / f"requests.urls.torn-{end}"
    aside.symlink_to(outside)
    try:
        with Frontier(str(job)) as f:
            pending = len(f)
    except JobDirUnsafe:
        pending = None
    assert outside.read_bytes() == PRECIOUS, "the torn tail was written through the link"
    assert aside.is_symlink() and os.readlink(aside) == str(outside)
    assert pending in (None, 20), "an open that went ahead lost requests"


def test_frontier_refuses_a_queue_link_and_leaves_the_folder_it_points_to_unchanged(job, tmp_path):
    make_job(job)
    elsewhere = tmp_path / "elsewhere"
    os.rename(job / "requests.queue", elsewhere)
    (job / "requests.queue").symlink_to(elsewhere, target_is_directory=True)
    before = snapshot(elsewhere)
    refused = open_push_close(job)
    assert snapshot(elsewhere) == before, "the frontier changed the folder the requests.queue link points to"
    assert refused is not None and "requests.queue" in str(refused), "the requests.queue link was not refused"
