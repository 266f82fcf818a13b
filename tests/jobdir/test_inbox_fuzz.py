"""Fuzz of inbox trees: seeded random files, folders, links, pipes and sockets of every kind of name
(odd characters, bytes that are not UTF-8, 255-byte names, the names entries are set aside under,
temp names, names of command ids and of answers) in a job directory's ``inbox/``, with real commands
sent among them, before an open and while the holder's watcher runs.

The open and the watcher must go on: nothing raised, no command failing in the watcher, every real
command applied exactly once and answered, nothing of an entry that is not a command applied, and
every entry left in place named in the log. The everyday run does a few seeds in this process; the
slow part runs more and bigger trees against a holder in a child process, which (as root: without
the capabilities that read any file) cannot read the files of mode 000. ``pytest -s`` prints the
tallies of what was made and what came of it.
"""

from __future__ import annotations

import json
import logging
import os
import random
import stat
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from test_inbox import drained_urls, ended_marks, start_logged_holder, unprivileged

from diskfrontier import Frontier
from diskfrontier.jobdir import inbox
from diskfrontier.jobdir.delivery import await_answer

EVIL = "https://evil.example/"  # the URLs of everything that is not a real command: never applied
DAY = 24 * 3600
NAME_CLASSES = ("plain", "odd", "long", "not-utf8", "aside", "aside-twice", "tmp", "command-id", "answer-id")
KINDS = ("file", "garbage", "empty", "other-id", "bad-args", "huge", "unreadable", "folder", "tree", "link-file",
         "link-folder", "link-dangling", "link-loop", "fifo", "socket")


def fake_id(rng: random.Random) -> str:
    """A command id of the real form, drawn from ``rng`` (a day of 2026, never one a real command gets now)."""
    return (f"2026{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}{rng.randint(0, 59):02d}"
            f"{rng.randint(0, 59):02d}.{rng.randrange(10**9):09d}-{rng.randbytes(6).hex()}")


def evil_command(rng: random.Random, ident: str) -> dict:
    return {"format": "diskfrontier-command", "version": 1, "id": ident, "verb": "push",
            "args": {"urls": [f"{EVIL}{rng.randrange(10**6)}"], "dont_filter": True}, "sent": time.time()}


class Tree:
    """Makes the entries of one inbox and counts them."""

    def __init__(self, rng: random.Random, folder: Path, outside: Path) -> None:
        self.rng, self.folder, self.outside = rng, folder, outside
        self.names: list[str] = []
        self.kinds: Counter[str] = Counter()
        self.classes: Counter[str] = Counter()

    def name(self) -> str:
        rng = self.rng
        cls = rng.choice(NAME_CLASSES)
        if cls == "plain":
            name = rng.choice(["junk", "notes.txt", "commands", "x", "lock", "inbox", ".hidden", "..."])
        elif cls == "odd":
            name = rng.choice(["a\nb", "tab\there", " lead", "-rf", "*", "?[x]", "back\\slash", "ü-ñ-日本", "\x7f",
                               "'quote\"", "%s%n", "\u202eevil"])
        elif cls == "long":
            name = rng.choice(["n" * 255, "é" * 127, "m" * 248, "k" * 247 + ".cmd"])
        elif cls == "not-utf8":
            name = os.fsdecode(b"bad-" + bytes(rng.randrange(128, 256) for _ in range(rng.randint(1, 4))))
        elif cls in ("aside", "aside-twice") and self.names:
            name = rng.choice(self.names) + ".refused" * (1 if cls == "aside" else 2)
        elif cls == "tmp":
            name = rng.choice([f"{fake_id(rng)}.cmd.tmp-{rng.randint(1, 99999)}-{rng.randbytes(6).hex()}",
                               "x.tmp-", f"{fake_id(rng)}.done.tmp-1-ab", "junk.tmp-9"])
        elif cls == "answer-id":
            name = f"{fake_id(rng)}.done"
        else:
            cls = "command-id"
            name = f"{fake_id(rng)}.cmd"
        if len(os.fsencode(name)) > 255:
            name = os.fsdecode(os.fsencode(name)[:255])
        if os.path.lexists(self.folder / name):
            name = f"{name[:200]}-{rng.randrange(10**6)}"
        self.classes[cls] += 1
        return name

    def entry(self) -> None:
        """One more entry of a random kind under a random name, made beside the inbox and renamed into it
        (whole: a holder looking meanwhile never finds it half made)."""
        rng = self.rng
        name = self.name()
        made = self.outside / f"made-{len(self.names)}"
        kind = rng.choice(KINDS)
        ident = name[:-4] if name.endswith(".cmd") else fake_id(rng)
        if kind == "file":
            made.write_bytes(rng.randbytes(rng.randint(1, 300)))
        elif kind == "garbage":
            made.write_text(rng.choice(['{"format": "diskfrontier-command"', "[" * 100_000, "null", '{"id": 1}',
                                        "\ufeff{}", '{"version": 1e999}']))
        elif kind == "empty":
            made.write_bytes(b"")
        elif kind == "other-id":  # a well-formed command that names another id
            made.write_text(json.dumps(evil_command(rng, fake_id(rng))))
        elif kind in ("bad-args", "unreadable"):  # its own id, arguments no verb takes; or that, unreadable
            command = evil_command(rng, ident)
            command["args"] = {"urls": EVIL, "extra": [1]}
            made.write_text(json.dumps(command))
            if kind == "unreadable":
                os.chmod(made, 0)
        elif kind == "huge":
            with open(made, "wb") as f:
                f.truncate(inbox.MAX_COMMAND_BYTES + rng.randint(1, 1000))
        elif kind in ("folder", "tree"):
            made.mkdir()
            if kind == "tree":
                (made / "sub").mkdir()
                (made / "sub" / f"{ident}.cmd").write_text(json.dumps(evil_command(rng, ident)))
                (made / "x.refused").write_text("x")
        elif kind == "link-file":  # to a well-formed command of its own id, kept elsewhere
            target = self.outside / f"target-{len(self.names)}"
            target.write_text(json.dumps(evil_command(rng, ident)))
            made.symlink_to(target)
        elif kind == "link-folder":
            made.symlink_to(self.outside)
        elif kind == "link-dangling":
            made.symlink_to(self.outside / "nothing-here")
        elif kind == "link-loop":
            made.symlink_to(name)
        elif kind == "fifo":
            os.mkfifo(made)
        else:
            os.mknod(made, stat.S_IFSOCK | 0o600)
        if rng.random() < 0.2:  # old enough to be taken for a leftover
            os.utime(made, (time.time() - 2 * DAY,) * 2, follow_symlinks=False)
        for n in range(100):  # a name the holder took meanwhile (setting something aside): another one
            try:
                os.rename(made, self.folder / name)
                break
            except OSError:
                name = f"{name[:200]}-{n}"
        self.kinds[kind] += 1
        self.names.append(name)


class Sender:
    """Real commands (pushes of URLs of their own, ``dont_filter``, so that one applied twice shows)."""

    def __init__(self, rng: random.Random, job: Path) -> None:
        self.rng, self.job = rng, job
        self.sent: dict[str, list[str]] = {}

    def send(self) -> str:
        n = len(self.sent)
        urls = [f"https://ok{n % 5}.example/{n}/{i}" for i in range(self.rng.choice([1, 3, 40]))]
        ident = inbox.send(str(self.job), "push", {"urls": urls, "dont_filter": True})
        self.sent[ident] = urls
        return ident

    def check_answer(self, ident: str) -> None:
        answer = await_answer(str(self.job), ident, 60.0)
        assert answer.get("queued") == len(self.sent[ident]), (ident, answer)


def wave(tree: Tree, sender: Sender, entries: int, commands: int) -> list[str]:
    """Entries and commands made in a random order; the ids of the commands."""
    steps = ["entry"] * entries + ["command"] * commands
    tree.rng.shuffle(steps)
    idents = []
    for step in steps:
        if step == "entry":
            tree.entry()
        else:
            idents.append(sender.send())
    return idents


def check_end(job: Path, sender: Sender, log_text: str, outcome: Counter[str]) -> None:
    """Every real command applied once and nothing else; every entry still in the inbox accounted for."""
    assert "could not be applied" not in log_text and "Traceback" not in log_text
    assert "status.json could not be written" not in log_text
    assert drained_urls(job) == Counter(url for urls in sender.sent.values() for url in urls)
    ended = ended_marks(job)
    assert all(ended[ident] == 1 for ident in sender.sent), "a command ended twice in the journal, or never"
    for name in os.listdir(job / "inbox"):
        info = os.lstat(job / "inbox" / name)
        if name.endswith(".refused"):
            outcome["*.refused"] += 1
        elif ".tmp-" in name or name.endswith(".done"):
            if stat.S_ISDIR(info.st_mode):
                assert f"{name!r} in {job / 'inbox'}: left in place" in log_text, name
                outcome["left in place (named)"] += 1
            else:
                outcome["left to age"] += 1
        else:
            assert f"{name!r} in {job / 'inbox'}: left in place" in log_text, f"{name!r} is there, unnamed"
            outcome["left in place (named)"] += 1
    outcome["commands applied"] += len(sender.sent)
    outcome["set aside (named)"] += log_text.count("set aside ")
    outcome["refused as unreadable"] += log_text.count(".cmd cannot be read (Permission denied)")


def tally_line(seed: int, tree: Tree, outcome: Counter[str]) -> str:
    return (f"inbox fuzz seed {seed}: kinds {dict(sorted(tree.kinds.items()))}; names "
            f"{dict(sorted(tree.classes.items()))}; outcome {dict(sorted(outcome.items()))}")


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_inbox_trees_never_stop_the_open_or_the_watcher(tmp_path: Path, seed: int, caplog) -> None:
    rng = random.Random(seed)
    job = tmp_path / "job"
    outside = tmp_path / "outside"
    outside.mkdir()
    Frontier(job).close()
    (job / "inbox").mkdir()
    tree, sender = Tree(rng, job / "inbox", outside), Sender(rng, job)
    with caplog.at_level(logging.WARNING, logger="diskfrontier"):
        before_open = wave(tree, sender, rng.randint(10, 30), rng.randint(1, 4))
        with Frontier(job) as f:  # the open applies what waits, the watcher what comes while it is held
            for ident in before_open:
                sender.check_answer(ident)
            for _ in range(3):
                for ident in wave(tree, sender, rng.randint(5, 15), rng.randint(1, 3)):
                    sender.check_answer(ident)
            assert len(f) == sum(map(len, sender.sent.values()))
        wave(tree, sender, rng.randint(5, 15), 0)
        Frontier(job, watch=False).close()  # and once more, over what the last wave left
    outcome: Counter[str] = Counter()
    check_end(job, sender, caplog.text, outcome)
    print("\n" + tally_line(seed, tree, outcome))


HOLDER = textwrap.dedent("""
    import sys, time
    from diskfrontier import Frontier
    f = Frontier(sys.argv[1])
    print("ready", flush=True)
    while True:
        len(f)
        time.sleep(0.01)
""")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 112))
def test_random_inbox_trees_never_stop_a_holder_in_another_process(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    job = tmp_path / "job"
    outside = tmp_path / "outside"
    outside.mkdir()
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    Frontier(job).close()
    (job / "inbox").mkdir()
    tree, sender = Tree(rng, job / "inbox", outside), Sender(rng, job)
    logs = []
    for round_ in range(3):
        before = wave(tree, sender, rng.randint(20, 80), rng.randint(1, 5))
        log = tmp_path / f"holder-{round_}.log"
        logs.append(log)
        proc = start_logged_holder(job, script, log, unprivileged())
        try:
            for ident in before:
                sender.check_answer(ident)
            for _ in range(4):
                for ident in wave(tree, sender, rng.randint(10, 60), rng.randint(1, 4)):
                    sender.check_answer(ident)
            assert proc.poll() is None, "the holder died"
        finally:
            proc.terminate()
            proc.wait()
    wave(tree, sender, rng.randint(10, 40), 0)
    closing = subprocess.run([*unprivileged(), sys.executable, "-c",
                              f"from diskfrontier import Frontier; Frontier({str(job)!r}, watch=False).close()"],
                             capture_output=True, text=True, timeout=120)
    assert closing.returncode == 0, closing.stderr
    outcome: Counter[str] = Counter()
    log_text = "".join(log.read_text() for log in logs) + closing.stderr
    check_end(job, sender, log_text, outcome)
    print("\n" + tally_line(seed, tree, outcome))
