"""Commands sent to a job directory that another process holds (its inbox), and what a SIGKILL leaves."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from popkit import take
from volume import forms, scaled

from diskfrontier import Frontier, JobDirUnsafe, Request
from diskfrontier.cli import main
from diskfrontier.contract.snapshot import host_rank
from diskfrontier.jobdir import inbox
from diskfrontier.jobdir.delivery import NotApplied, await_answer, deliver
from diskfrontier.jobdir.journal import JournalScan
from diskfrontier.jobdir.layout import Layout, read_meta, salt_of
from diskfrontier.jobdir.records import MARK, MARK_END, kind_of, parse_mark

HOLDER = textwrap.dedent("""
    import sys, time
    from diskfrontier import Frontier
    f = Frontier(sys.argv[1])
    print("ready", flush=True)
    while True:
        len(f)  # a frontier call now and then; the watcher thread applies the commands
        time.sleep(0.01)
""")


def start_holder(job: Path, script: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, str(script), str(job)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def drained_urls(job: Path) -> Counter[str]:
    """Every pending request's URL (popped and done), counted."""
    out: Counter[str] = Counter()
    with Frontier(job, watch=False) as f:
        while (r := f.pop()) is not None:
            out[r.url] += 1
            f.done(r)
    return out


def ended_marks(job: Path) -> Counter[str]:
    layout = Layout(str(job))
    salt = salt_of(read_meta(layout))
    out: Counter[str] = Counter()
    for _offset, body in JournalScan(layout.journal, salt=salt):
        if kind_of(body) == MARK:
            mark = parse_mark(body)
            assert mark is not None
            if mark.phase == MARK_END:
                out[mark.ident] += 1
    return out


def test_a_held_directory_applies_a_command_and_answers(tmp_path: Path) -> None:
    job = tmp_path / "job"
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    Frontier(job).close()
    proc = start_holder(job, script)
    try:
        # Applied by the holder's watcher while it holds the lock (deliver raises NotApplied if
        # nobody applies the command within its timeout).
        _ident, answer = deliver(str(job), "push", {"urls": ["https://a.example/1", "https://a.example/2"]})
        assert answer is not None and answer["queued"] == 2 and answer["duplicates"] == 0
        assert answer["by"] == proc.pid and proc.poll() is None
        _, again = deliver(str(job), "push", {"urls": ["https://a.example/1"]})
        assert again is not None and again["queued"] == 0 and again["duplicates"] == 1
        assert not os.listdir(job / "inbox"), "the command and its answer are gone once read"
    finally:
        proc.kill()
        proc.wait()
    assert drained_urls(job) == Counter({"https://a.example/1": 1, "https://a.example/2": 1})


def test_a_command_sent_while_nobody_holds_the_directory_is_applied_at_the_open(tmp_path: Path) -> None:
    job = tmp_path / "job"
    Frontier(job).close()
    ident = inbox.send(str(job), "push", {"urls": ["https://b.example/x"], "priority": 3})
    with Frontier(job) as f:
        assert len(f) == 1
        r = f.pop()
        assert r is not None and r.url == "https://b.example/x" and r.priority == 3
    assert inbox.answer_of(str(job), ident) == {"id": ident, "applied": pytest.approx(time.time(), abs=60),
                                                "by": os.getpid(), "queued": 1, "duplicates": 0}


def test_a_holder_that_does_not_apply_is_reported_and_the_command_stays_queued(tmp_path: Path) -> None:
    job = tmp_path / "job"
    Frontier(job).close()
    script = tmp_path / "stopped.py"
    script.write_text(HOLDER)
    proc = start_holder(job, script)
    try:
        os.kill(proc.pid, signal.SIGSTOP)  # holds the lock, applies nothing
        with pytest.raises(NotApplied, match="did not apply command"):
            deliver(str(job), "pause", {}, timeout=0.5)
        assert len([n for n in os.listdir(job / "inbox") if n.endswith(".cmd")]) == 1
        os.kill(proc.pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while [n for n in os.listdir(job / "inbox") if n.endswith(".cmd")]:
            assert time.monotonic() < deadline, "the holder never applied the queued command"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    with Frontier(job) as f:
        assert f.paused_since is not None


@pytest.mark.parametrize("kind", ["symlink", "fifo", "garbage", "huge", "other-id", "unknown-verb", "bad-args",
                                  "stray-name"])
def test_a_hostile_inbox_file_is_set_aside_and_never_applied(tmp_path: Path, kind: str) -> None:
    job = tmp_path / "job"
    Frontier(job).close()
    folder = job / "inbox"
    folder.mkdir()
    ident = inbox.new_id()
    path = folder / f"{ident}.cmd"
    good = {"format": "diskfrontier-command", "version": 1, "id": ident, "verb": "push",
            "args": {"urls": ["https://evil.example/"]}, "sent": time.time()}
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(good))
    if kind == "symlink":
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "garbage":
        path.write_bytes(b"\x00\xffnot json")
    elif kind == "huge":
        path.write_text(json.dumps({**good, "pad": "x" * (inbox.MAX_COMMAND_BYTES + 10)}))
    elif kind == "other-id":
        path.write_text(json.dumps({**good, "id": inbox.new_id()}))
    elif kind == "unknown-verb":
        path.write_text(json.dumps({**good, "verb": "format-disk"}))
    elif kind == "bad-args":
        path.write_text(json.dumps({**good, "args": {"urls": "https://evil.example/", "extra": 1}}))
    else:
        (folder / "commands.txt").write_text(json.dumps(good))
    with Frontier(job) as f:
        assert len(f) == 0, "nothing of a refused file is applied"
        assert f.push(Request("https://good.example/"))  # and the frontier works on
    names = sorted(os.listdir(folder))
    assert any(n.endswith(".refused") for n in names), names
    assert not any(n.endswith(".cmd") for n in names)
    if kind != "stray-name":
        answer = inbox.answer_of(str(job), ident)
        assert answer is not None and "error" in answer


@pytest.mark.parametrize("volume", forms(0.25))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill_9_of_the_holder_loses_no_sent_command_and_applies_none_twice(tmp_path: Path, seed: int,
                                                                          volume: float) -> None:
    """Commands of dont_filter pushes (a second application would store every URL again) are sent
    while the holder runs, and the holder is SIGKILLed at random moments, often in the middle of
    applying one; every URL of every command sent ends up pending exactly once."""
    rng = random.Random(seed)
    job = tmp_path / "job"
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    Frontier(job).close()
    sent: dict[str, list[str]] = {}
    kills = 0
    for round_ in range(scaled(8, volume)):
        proc = start_holder(job, script)
        for k in range(rng.randint(1, 3)):
            urls = [f"https://r{round_}-{k}.example/{i}" for i in range(rng.choice([1, 50, 5000, 20000]))]
            sent[inbox.send(str(job), "push", {"urls": urls, "dont_filter": True})] = urls
        time.sleep(rng.uniform(0.0, 0.8))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
    counted = drained_urls(job)
    wanted = Counter(url for urls in sent.values() for url in urls)
    assert counted == wanted, (f"lost: {sum((wanted - counted).values())}, "
                               f"applied twice: {sum((counted - wanted).values())} after {kills} kills")
    marks = ended_marks(job) if (job / "requests.urls").exists() else Counter()
    assert all(marks[ident] <= 1 for ident in sent), "a command ended twice in the journal"
    assert not [n for n in os.listdir(job / "inbox") if n.endswith(".cmd")]


def test_a_command_cut_short_by_a_kill_is_finished_at_the_open_with_a_whole_summary(tmp_path: Path) -> None:
    """A stop between a command's records and its end: the open applies the rest (nothing twice) and
    its summary counts the requests the first attempt stored."""
    job = tmp_path / "job"
    Frontier(job).close()
    urls = [f"https://cut.example/{i}" for i in range(2000)]
    ident = inbox.send(str(job), "push", {"urls": urls, "dont_filter": True})
    code = textwrap.dedent(f"""
        import os
        from diskfrontier.jobdir import ledger
        from diskfrontier.jobdir.records import MARK_END
        real = ledger.Ledger.mark
        def mark(self, phase, ident, result=b""):
            if phase == MARK_END:
                os.kill(os.getpid(), 9)  # the records are written, their end is not
            return real(self, phase, ident, result)
        ledger.Ledger.mark = mark
        from diskfrontier import Frontier
        Frontier({str(job)!r}, watch=False)
    """)
    proc = subprocess.run([sys.executable, "-c", code], check=False)
    assert proc.returncode == -signal.SIGKILL
    assert [n for n in os.listdir(job / "inbox") if n.endswith(".cmd")] == [f"{ident}.cmd"]
    counted = drained_urls(job)
    assert counted == Counter(urls)
    answer = inbox.answer_of(str(job), ident)
    assert answer is not None and answer["queued"] == 2000 and answer["duplicates"] == 0
    assert ended_marks(job)[ident] == 1


@pytest.mark.parametrize("volume", forms(0.5))
def test_kill_9_of_the_command_leaves_its_command_whole_or_absent(tmp_path: Path, volume: float) -> None:
    """`diskfrontier push` against a running crawl, SIGKILLed at random moments: a command that said it
    was applied is there exactly once; one that was killed is there whole (it was queued) or not at all."""
    rng = random.Random(7)
    job = tmp_path / "job"
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    Frontier(job).close()
    proc = start_holder(job, script)
    finished: list[list[str]] = []
    killed: list[list[str]] = []
    rounds = scaled(12, volume)
    took = 0.0  # how long the first command took, run whole: the kill moments are drawn around it
    try:
        round_ = 0
        # every command of the first rounds, then more until some were killed and some finished
        while round_ < rounds or (not (killed and finished) and round_ < 4 * rounds):
            urls = [f"https://k{round_}.example/{i}" for i in range(rng.choice([1, 100, 3000]))]
            (tmp_path / "urls.txt").write_text("\n".join(urls) + "\n")
            started = time.monotonic()
            cmd = subprocess.Popen([sys.executable, "-m", "diskfrontier", "push", str(job), "-f",
                                    str(tmp_path / "urls.txt")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
            try:
                out, _ = cmd.communicate(timeout=rng.uniform(0.1, 1.5) * took if round_ else None)
                assert cmd.returncode == 0 and out.startswith(f"queued {len(urls):,},"), out
                finished.append(urls)
                took = took or time.monotonic() - started
            except subprocess.TimeoutExpired:
                cmd.send_signal(signal.SIGKILL)
                cmd.communicate()
                killed.append(urls)
            round_ += 1
    finally:
        proc.kill()
        proc.wait()
    counted = drained_urls(job)
    for urls in finished:
        assert all(counted[url] == 1 for url in urls)
    for urls in killed:
        present = sum(counted[url] for url in urls)
        assert present in (0, len(urls)), f"a killed command applied in part: {present} of {len(urls)}"
    assert killed and finished, "the random moments should both finish and kill some commands"


def test_an_inbox_that_is_a_link_is_refused(tmp_path: Path) -> None:
    job = tmp_path / "job"
    Frontier(job).close()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (job / "inbox").symlink_to(elsewhere)
    with pytest.raises(JobDirUnsafe):
        Frontier(job)
    with pytest.raises(JobDirUnsafe):
        inbox.queued(str(job))
    with pytest.raises(JobDirUnsafe):
        inbox.send(str(job), "pause", {})
    assert not os.listdir(elsewhere)


def test_commands_sent_within_the_same_second_are_applied_in_the_order_sent(tmp_path: Path) -> None:
    job = tmp_path / "job"
    Frontier(job).close()
    verbs = ["pause", "resume"] * 10 + ["pause"]
    for verb in verbs:
        inbox.send(str(job), verb, {})
    with Frontier(job, watch=False) as f:
        assert f.paused_since is not None  # the last one sent was a pause
        f.resume()
    for verb in ["resume", "pause"] * 10 + ["resume"]:
        inbox.send(str(job), verb, {})
    with Frontier(job, watch=False) as f:
        assert f.paused_since is None


@pytest.mark.parametrize("volume", forms(0.34))
@pytest.mark.parametrize("seed", [11, 12])
def test_kill_9_during_mixed_commands_leaves_the_state_of_applying_each_once_in_order(tmp_path: Path, seed: int,
                                                                                     volume: float) -> None:
    """Pushes, drops, pauses and resumes sent while the holder is SIGKILLed at random moments (a drop
    rebuilds the queues: a kill may land in it): the end state is the model's, each command applied
    once, in the order sent."""
    rng = random.Random(seed)
    job = tmp_path / "job"
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    Frontier(job).close()
    pending: Counter[str] = Counter()
    paused = False
    for round_ in range(scaled(6, volume)):
        proc = start_holder(job, script)
        for k in range(rng.randint(2, 5)):
            verb = rng.choice(["push", "push", "drop", "pause", "resume"])
            if verb == "push":
                urls = [f"https://g{rng.randint(0, 3)}.example/{round_}/{k}/{i}" for i in range(rng.choice([10, 4000]))]
                inbox.send(str(job), "push", {"urls": urls, "dont_filter": True})
                pending.update(urls)
            elif verb == "drop":
                host = f"g{rng.randint(0, 3)}.example"
                inbox.send(str(job), "drop", {"host": host})
                pending = Counter({u: n for u, n in pending.items() if not u.startswith(f"https://{host}/")})
            else:
                inbox.send(str(job), verb, {})
                paused = verb == "pause"
        time.sleep(rng.uniform(0.0, 0.7))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with Frontier(job, watch=False) as f:
        assert (f.paused_since is not None) == paused
        f.resume()
    assert drained_urls(job) == pending


def test_status_json_counts_hosts_as_hosts_tells_of_them(tmp_path: Path) -> None:
    job = tmp_path / "job"
    with Frontier(job, delay=60.0, watch=False) as f:
        for i in range(40):
            f.push(Request(f"https://h{i % 8}.example/{i}"))
        for _ in range(3):
            f.done(take(f))  # three hosts now wait out their delay (the last one is blocked too)
        f.block("h7.example", time.time() + 600)
        f._publish_status(with_hosts=True)
        published = json.loads((job / "status.json").read_text())
        now = time.time()
        infos = f.hosts()
    pending = [i for i in infos if i.pending]
    ready = [i for i in pending if i.ready_at is not None and i.ready_at <= now and not i.blocked_until]
    assert published["hosts_total"] == len(infos) == 8
    assert (published["hosts_ready"], published["hosts_waiting"]) == (len(ready), len(pending) - len(ready)) == (5, 3)
    busiest = [h["host"] for h in published["hosts"]]
    assert busiest == [i.host for i in sorted(infos, key=lambda i: host_rank(i, now))]  # blocked first, then busiest
    assert busiest[0] == "h7.example"
    assert published["stats"]["pending"] == 37


def test_a_full_disk_at_a_commands_end_applies_it_once_when_tried_again(tmp_path: Path, monkeypatch) -> None:
    """The end record of a command cannot be written (the disk is full): the next attempt writes only
    the end, so a dont_filter push is not stored a second time."""
    from diskfrontier.jobdir import ledger as ledger_module
    from diskfrontier.jobdir.records import MARK_END as END

    job = tmp_path / "job"
    with Frontier(job, watch=False) as f:
        urls = [f"https://full.example/{i}" for i in range(50)]
        ident = inbox.send(str(job), "push", {"urls": urls, "dont_filter": True})
        real = ledger_module.Ledger.mark
        failures = [OSError(28, "No space left on device")]

        def mark(self, phase, name, result=b""):
            if phase == END and failures:
                raise failures.pop()
            return real(self, phase, name, result)

        monkeypatch.setattr(ledger_module.Ledger, "mark", mark)
        with pytest.raises(OSError):
            f._apply_commands()
        assert f._apply_commands() == 1
        assert len(f) == 50
    answer = inbox.answer_of(str(job), ident)
    assert answer is not None and answer["queued"] == 50
    assert drained_urls(job) == Counter(urls)
    assert ended_marks(job)[ident] == 1


def test_status_json_is_published_while_held_and_gone_after_a_clean_close(tmp_path: Path) -> None:
    job = tmp_path / "job"
    Frontier(job).close()
    (job / "status.json.tmp-4242-abcdef").write_text("{")  # what a kill in the middle of a replacement leaves
    with Frontier(job) as f:
        assert not (job / "status.json.tmp-4242-abcdef").exists()
        f.push(Request("https://s.example/"))
        deadline = time.monotonic() + 30
        while not (job / "status.json").exists():
            assert time.monotonic() < deadline, "no status.json while the directory is held"
            time.sleep(0.05)
        published = json.loads((job / "status.json").read_text())
        assert published["pid"] == os.getpid() and published["source"] == str(job)
    assert not (job / "status.json").exists()


# ------------------------------------------------------------------ entries that cannot be read or set aside
def unprivileged() -> list[str]:
    """A command prefix under which a file of mode 000 cannot be read: nothing for a user; for root, root
    without the capabilities that read any file."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no file can be made unreadable to the holder")
    return [setpriv, "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"]


def start_logged_holder(job: Path, script: Path, log: Path, prefix: list[str] | None = None) -> subprocess.Popen[str]:
    """A holder whose log (its warnings) goes to ``log``."""
    with open(log, "w") as err:
        proc = subprocess.Popen([*(prefix or []), sys.executable, str(script), str(job)], stdout=subprocess.PIPE,
                                stderr=err, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_an_entry_beside_a_folder_of_its_set_aside_name_is_set_aside_under_another_name(tmp_path: Path,
                                                                                        caplog) -> None:
    job = tmp_path / "job"
    Frontier(job).close()
    ident = inbox.send(str(job), "push", {"urls": ["https://a.example/1"]})
    folder = job / "inbox"
    (folder / "junk.refused").mkdir()
    (folder / "junk.refused" / "kept").write_text("mine")
    (folder / "junk").write_text("not a command")
    with caplog.at_level(logging.WARNING, logger="diskfrontier"), Frontier(job) as f:
        assert len(f) == 1  # the open went on, and applied the command
    aside = [n for n in os.listdir(folder) if n.startswith("junk.") and n != "junk.refused"]
    assert len(aside) == 1 and aside[0].endswith(".refused"), aside
    assert (folder / aside[0]).read_text() == "not a command" and not (folder / "junk").exists()
    assert (folder / "junk.refused" / "kept").read_text() == "mine"
    assert f"set aside 'junk' in {folder} as '{aside[0]}'" in caplog.text
    answer = inbox.answer_of(str(job), ident)
    assert answer is not None and answer["queued"] == 1


def test_a_name_too_long_for_the_refused_suffix_is_set_aside_under_a_shorter_one(tmp_path: Path) -> None:
    job = tmp_path / "job"
    Frontier(job).close()
    folder = job / "inbox"
    folder.mkdir()
    name = "n" * 255
    (folder / name).write_text("x")
    with Frontier(job) as f:
        assert f.push(Request("https://a.example/"))
    names = os.listdir(folder)
    assert len(names) == 1 and names[0].endswith(".refused") and names[0].startswith("n" * 200), names
    assert len(names[0]) <= 255


def test_a_held_directory_applies_commands_beside_entries_it_cannot_set_aside_as_named(tmp_path: Path) -> None:
    """While a crawl holds the directory, entries that clash with the names it sets aside under are
    named in its log once, and every command sent after them is applied and answered."""
    job = tmp_path / "job"
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    Frontier(job).close()
    log = tmp_path / "holder.log"
    proc = start_logged_holder(job, script, log)
    try:
        _, first = deliver(str(job), "push", {"urls": ["https://a.example/0"]})
        assert first is not None and first["queued"] == 1
        folder = job / "inbox"
        (folder / "junk.refused").mkdir()
        (folder / "junk.refused" / "x").write_text("x")
        (folder / "junk").write_text("junk")
        (folder / "dir").mkdir()
        (folder / "dir.refused").mkdir()
        (folder / "dir.refused" / "y").write_text("y")
        (folder / f"{inbox.new_id()}.done").mkdir()  # a folder of a name the inbox keeps for answers
        for i in range(1, 4):
            _, answer = deliver(str(job), "push", {"urls": [f"https://a.example/{i}"]})
            assert answer is not None and answer["queued"] == 1
        paused = subprocess.run([sys.executable, "-m", "diskfrontier", "pause", str(job)], capture_output=True,
                                text=True, timeout=120)
        assert paused.returncode == 0, paused.stderr
    finally:
        proc.kill()
        proc.wait()
    text = log.read_text()
    assert "set aside 'junk' in" in text and "set aside 'dir' in" in text
    assert "could not be applied" not in text and "Traceback" not in text
    done_dirs = [n for n in os.listdir(job / "inbox") if n.endswith(".done")]
    assert len(done_dirs) == 1 and text.count(f"'{done_dirs[0]}' in {job / 'inbox'}: left in place") == 1
    with Frontier(job, watch=False) as f:
        assert f.paused_since is not None
        f.resume()
    assert drained_urls(job) == Counter(f"https://a.example/{i}" for i in range(4))


def test_an_unreadable_command_is_refused_and_its_sender_told_why(tmp_path: Path) -> None:
    job = tmp_path / "job"
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    Frontier(job).close()
    proc = start_logged_holder(job, script, tmp_path / "holder.log", unprivileged())
    try:
        os.kill(proc.pid, signal.SIGSTOP)  # so that the command is unreadable before the holder looks
        try:
            ident = inbox.send(str(job), "push", {"urls": ["https://a.example/secret"]})
            os.chmod(job / "inbox" / f"{ident}.cmd", 0)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        with pytest.raises(inbox.CommandRefused, match=r"\.cmd cannot be read \(Permission denied\)"):
            answer = await_answer(str(job), ident, 30.0)
            if "error" in answer:
                raise inbox.CommandRefused(answer["error"])
        _, after = deliver(str(job), "push", {"urls": ["https://a.example/ok"]})  # and the next one is applied
        assert after is not None and after["queued"] == 1
    finally:
        proc.kill()
        proc.wait()
    assert [n for n in os.listdir(job / "inbox") if n.startswith(ident)] == [f"{ident}.cmd.refused"]
    assert drained_urls(job) == Counter(["https://a.example/ok"])


def test_a_command_whose_answer_cannot_be_written_is_not_applied_and_its_sender_is_told(tmp_path: Path) -> None:
    job = tmp_path / "job"
    Frontier(job).close()
    ident = inbox.send(str(job), "push", {"urls": ["https://a.example/1"]})
    later = inbox.send(str(job), "push", {"urls": ["https://a.example/2"]})
    (job / "inbox" / f"{ident}.done").mkdir()
    with Frontier(job, watch=False) as f:
        assert len(f) == 1  # the later one only
        assert f.pop().url == "https://a.example/2"  # type: ignore[union-attr]
    with pytest.raises(inbox.CommandRefused, match=r"\.done, where its answer goes, is a directory: the command "
                                                   r"is not applied"):
        await_answer(str(job), ident, 30.0)
    answer = inbox.answer_of(str(job), later)
    assert answer is not None and answer["queued"] == 1
    assert os.path.exists(job / "inbox" / f"{ident}.cmd.refused")


def test_a_sender_whose_command_leaves_the_inbox_unanswered_is_told_at_once(tmp_path: Path) -> None:
    job = tmp_path / "job"
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    Frontier(job).close()
    proc = start_holder(job, script)
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        ident = inbox.send(str(job), "pause", {})
        os.rename(job / "inbox" / f"{ident}.cmd", job / "inbox" / f"{ident}.cmd.refused")  # as a holder sets aside
        with pytest.raises(inbox.CommandRefused, match=f"command {ident} left .* without an answer"):
            await_answer(str(job), ident, 30.0)
    finally:
        proc.kill()
        proc.wait()


def test_the_command_line_writes_to_a_directory_whose_inbox_holds_such_an_entry(tmp_path: Path) -> None:
    job = tmp_path / "job"
    Frontier(job).close()
    (job / "inbox").mkdir()
    (job / "inbox" / "junk.refused").mkdir()
    (job / "inbox" / "junk.refused" / "x").write_text("x")
    (job / "inbox" / "junk").write_text("junk")
    result = CliRunner().invoke(main, ["push", str(job), "https://a.example/"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("queued 1,"), result.output


def test_inspect_shows_what_the_inbox_holds_and_names_what_is_not_a_command(tmp_path: Path) -> None:
    job = tmp_path / "job"
    Frontier(job).close()
    assert "inbox" not in CliRunner().invoke(main, ["inspect", str(job)]).output  # nothing to show
    inbox.send(str(job), "pause", {})
    folder = job / "inbox"
    (folder / "old.refused").write_text("x")
    (folder / "junk").mkdir()
    (folder / "a\nb").write_text("x")
    result = CliRunner().invoke(main, ["inspect", str(job)])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("inbox "))
    assert row.split(None, 1)[1] == ("1 command waiting; 1 set aside (NAME.refused: never applied); 2 not a command: "
                                     "'a\\nb' (a regular file), 'junk' (a directory) (set aside at the next open, or "
                                     "left in place if it cannot be: its log names them)")
    data = json.loads(CliRunner().invoke(main, ["inspect", str(job), "--json"]).output)
    assert data["inbox"] == {"waiting": 1, "answers": 0, "set_aside": 1,
                             "other": [{"name": "a\nb", "kind": "a regular file"},
                                       {"name": "junk", "kind": "a directory"}]}
    with Frontier(job):
        pass
    data = json.loads(CliRunner().invoke(main, ["inspect", str(job), "--json"]).output)
    assert (data["inbox"]["waiting"], data["inbox"]["answers"], data["inbox"]["set_aside"]) == (0, 1, 3)
    assert data["inbox"]["other"] == []


def test_a_command_line_whose_command_is_set_aside_unanswered_exits_with_the_reason(tmp_path: Path) -> None:
    job = tmp_path / "job"
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    Frontier(job).close()
    proc = start_holder(job, script)
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        cmd = subprocess.Popen([sys.executable, "-m", "diskfrontier", "pause", str(job)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not (sent := [n for n in os.listdir(job / "inbox") if n.endswith(".cmd")]
                   if (job / "inbox").exists() else []):
            assert time.monotonic() < deadline and cmd.poll() is None, "the command was never queued"
            time.sleep(0.01)
        os.rename(job / "inbox" / sent[0], job / "inbox" / f"{sent[0]}.refused")
        _, err = cmd.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    ident = sent[0].removesuffix(".cmd")
    assert cmd.returncode == 1
    assert err.startswith(f"Error: command {ident} left {job / 'inbox'} without an answer: the crawl holding "
                          f"{job} set it aside unapplied"), err
