"""``inbox/``: commands for the process that holds a job directory, as whole files.

A command that finds the directory held (``diskfrontier push``, ``host``, ``pause``, ...)
cannot write the journal itself. It writes its request as one file instead: JSON in a temp
file ``inbox/ID.cmd.tmp-PID-HEX`` (created exclusively, fsynced), renamed to ``inbox/ID.cmd``
and the folder fsynced. From the rename on the request is durable: the holder applies it within a
second (or whoever opens the directory next applies it at the open), as ordinary journal
records framed by two MARK records that name ``ID`` (``records.py``), then writes its
summary to ``inbox/ID.done`` (replaced atomically) and removes ``ID.cmd``. The command waits
for ``ID.done``, prints it and removes it.

Exactly once: the MARK record that ends a command's records is in the journal before its
``.cmd`` file is removed, so a holder killed in between finds the id applied at the next
open and only answers it; a holder killed in the middle of a command's records finds its
MARK_BEGIN without an end and applies the command again from there (every verb is
idempotent: a push of what was pushed is a duplicate, a second pause or drop finds nothing
more to do), the summary counting what the first attempt stored.

A file that is not a command (a link, a pipe, a folder, a file of another name, garbage, a
file over ``MAX_COMMAND_BYTES`` or that cannot be read, a verb or arguments this release does
not know) is never applied, not even in part: it is renamed aside to ``NAME.refused`` (or
``NAME.HEX.refused`` when that name is taken or too long) with the reason logged, and a
waiting command is answered with the error first. A command whose answer cannot be written
(its ``ID.done`` is a folder, a link or a pipe) is set aside unapplied; its sender is told so.
Nothing in the inbox stops the holder: an entry that cannot be set aside or removed is left in
place, named once in the log (``Skips``), and the other commands go on being applied.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass
from typing import Any

from ..core.errors import FrontierError
from ..files import boundedjson
from ..files.atomic import write_atomic
from ..files.safefs import JobDirUnsafe, describe, make_dir, open_fd

log = logging.getLogger("diskfrontier")

INBOX = "inbox"
MAX_COMMAND_BYTES = 32 << 20
"""The largest command file applied (a push of about 200,000 URLs); larger ones are refused."""
MAX_URLS = 200_000
"""URLs in one push command (a longer list is sent as several commands)."""
VERBS = ("push", "host", "pause", "resume", "requeue-failed", "drop")
_ID = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{9}-[0-9a-f]{12}\Z")  # sortable: applied in the order they were sent
_STALE_ANSWER = 24 * 3600.0  # answers nobody collected are removed after a day
_NAME_MAX = 255  # bytes in a file name (ext4, xfs, btrfs, tmpfs)
_ASIDE = ".refused"


class CommandRefused(FrontierError):
    """An inbox file that is not a command this release applies (named with the reason)."""


@dataclass(frozen=True)
class Command:
    """One command read from the inbox."""

    ident: str
    verb: str
    args: dict[str, Any]
    sent: float  # time.time() when it was written


def inbox_dir(root: str) -> str:
    """The inbox folder of the job directory at ``root``."""
    return os.path.join(root, INBOX)


def new_id() -> str:
    """A new command id: the UTC time to the nanosecond and 12 random hex digits (sorted in sending order)."""
    now = time.time_ns()
    seconds, nanoseconds = divmod(now, 10**9)
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(seconds))}.{nanoseconds:09d}-{secrets.token_hex(6)}"


# ------------------------------------------------------------------ the sending side
def send(root: str, verb: str, args: dict[str, Any]) -> str:
    """Write the command durably into the inbox of ``root``; return its id."""
    check_command(verb, args)
    folder = inbox_dir(root)
    make_dir(folder, 0o700)
    ident = new_id()
    data = json.dumps({"format": "diskfrontier-command", "version": 1, "id": ident, "verb": verb, "args": args,
                       "sent": time.time(), "pid": os.getpid()}).encode()
    if len(data) > MAX_COMMAND_BYTES:
        raise ValueError(f"the command is {len(data):,} bytes, more than an inbox file may hold "
                         f"({MAX_COMMAND_BYTES:,}): send it in parts")
    write_atomic(os.path.join(folder, f"{ident}.cmd"), data)  # a temp file, fsynced, renamed; the folder fsynced
    return ident


def answer_of(root: str, ident: str) -> dict[str, Any] | None:
    """The answer to command ``ident`` if it was applied (the ``.done`` file is then removed), else None.

    ``CommandRefused`` if the answer cannot be read: unreadable, or not a file (then the holder does not
    apply the command either: it cannot answer it).
    """
    path = os.path.join(inbox_dir(root), f"{ident}.done")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(mode):
        raise CommandRefused(unanswerable_reason(path, mode))
    try:
        with os.fdopen(open_fd(path, os.O_RDONLY), "rb") as f:
            value = boundedjson.loads(f.read(boundedjson.MAX_JSON_BYTES + 1))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, JobDirUnsafe) as exc:
        raise CommandRefused(f"{path}: unreadable answer ({_why(exc)})") from None
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    if not isinstance(value, dict):
        raise CommandRefused(f"{path}: unreadable answer (not a JSON object)")
    return value


def unanswerable_reason(path: str, mode: int) -> str:
    """Why a command cannot be answered when its answer's name ``path`` is taken by an entry of ``mode``."""
    return (f"{path}, where its answer goes, is {describe(mode)}: the command is not applied, since it could not "
            f"be answered; remove {path} and send the command again")


def waiting(root: str, ident: str) -> bool:
    """True while command ``ident`` is in the inbox, not applied yet."""
    return os.path.lexists(os.path.join(inbox_dir(root), f"{ident}.cmd"))


# ------------------------------------------------------------------ what is in it, for inspect
@dataclass(frozen=True)
class Survey:
    """What the inbox holds, read without changing it: commands waiting, answers not collected yet,
    entries set aside, and the others (not commands: set aside at the holder's next look, or left in
    place, each as (name, what it is))."""

    waiting: int = 0
    answers: int = 0
    set_aside: int = 0
    other: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"waiting": self.waiting, "answers": self.answers, "set_aside": self.set_aside,
                "other": [{"name": name, "kind": kind} for name, kind in self.other]}

    def __bool__(self) -> bool:
        return bool(self.waiting or self.answers or self.set_aside or self.other)


def survey(root: str) -> Survey:
    """What the inbox of ``root`` holds (``Survey``); an empty one if there is none or it cannot be read."""
    folder = inbox_dir(root)
    try:
        with os.scandir(folder) as listing:
            entries = list(listing)
    except OSError:
        return Survey()
    counts = {"waiting": 0, "answers": 0, "set_aside": 0}
    other = []
    for entry in entries:
        name = entry.name
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if name.endswith(".cmd") and _ID.match(name[:-4]):
            counts["waiting"] += 1
        elif name.endswith(_ASIDE):
            counts["set_aside"] += 1
        elif ".tmp-" in name and not stat.S_ISDIR(mode):
            continue  # a command being written
        elif name.endswith(".done") and _ID.match(name[:-5]) and not stat.S_ISDIR(mode):
            counts["answers"] += 1
        else:
            other.append((name, describe(mode)))
    return Survey(**counts, other=tuple(sorted(other)))


# ------------------------------------------------------------------ the holder's side
class Skips:
    """What the holder left in its inbox, each named once in the log while it stays there.

    ``left`` maps the names of entries that are not looked at again (they could not be set aside
    or removed) to why; ``warned`` keeps the last warning given about each name. Both forget a
    name once no entry has it.
    """

    def __init__(self) -> None:
        self.left: dict[str, str] = {}
        self.warned: dict[str, str] = {}

    def warn(self, folder: str, name: str, text: str) -> None:
        """Log ``text`` about the entry ``name`` of ``folder``, unless it was the last thing said of it."""
        if self.warned.get(name) != text:
            self.warned[name] = text
            log.warning("%s in %s: %s", shown(name), folder, text)

    def leave(self, folder: str, name: str, reason: str) -> None:
        """Leave the entry ``name`` where it is from now on, and say why (once)."""
        self.left[name] = reason
        self.warn(folder, name, f"left in place: {reason}")

    def keep_only(self, names: set[str]) -> None:
        """Forget what was said of names no entry has any more."""
        for memory in (self.left, self.warned):
            for name in [n for n in memory if n not in names]:
                del memory[name]


def shown(name: str) -> str:
    """An inbox entry's name for a message: quoted, odd characters escaped (a newline cannot forge a log line)."""
    return repr(name)


def _why(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def queued(root: str, skips: Skips | None = None) -> list[str]:
    """The ids of the commands waiting in the inbox, oldest first.

    Every other entry is dealt with on the way: the inbox's own leftovers (answers, temp files,
    entries set aside) are removed once older than a day, anything else is set aside
    (``set_aside``). Nothing in it raises: an entry that cannot be set aside or removed is left in
    place and named in the log, once while it stays if the caller keeps ``skips`` between looks.
    Only an inbox that is not a folder raises ``JobDirUnsafe`` (commands come from there only).
    """
    skips = Skips() if skips is None else skips
    folder = inbox_dir(root)
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):  # a link is refused too: commands come from here only
            raise JobDirUnsafe(f"{folder} is not a folder: remove it (commands are written there)")
        with os.scandir(folder) as listing:
            entries = list(listing)
    except FileNotFoundError:
        return []
    except OSError as exc:  # a folder that cannot be listed: nothing to apply, said once
        skips.warn(folder, ".", f"the inbox cannot be read ({_why(exc)}); no command is applied until it can")
        return []
    out = []
    now = time.time()
    for entry in entries:
        name = entry.name
        if name in skips.left:
            continue
        if name.endswith(".cmd") and _ID.match(name[:-4]):
            out.append(name[:-4])
        elif (name.endswith(".done") and _ID.match(name[:-5])) or ".tmp-" in name or name.endswith(_ASIDE):
            _tidy(folder, entry, now, skips)
        else:
            try:
                set_aside(root, name, "not a command file (commands are named ID.cmd)")
            except OSError as exc:
                skips.leave(folder, name, f"not a command file, and it cannot be set aside ({_why(exc)})")
    skips.keep_only({entry.name for entry in entries})
    return sorted(out)


def _tidy(folder: str, entry: os.DirEntry[str], now: float, skips: Skips) -> None:
    """An answer, a temp file or an entry set aside: removed once older than a day (a folder is left)."""
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISDIR(info.st_mode):
        if not entry.name.endswith(_ASIDE):  # set aside by an earlier look: said then
            skips.leave(folder, entry.name, "a folder with a name the inbox keeps for its own files; remove it")
        return
    if now - info.st_mtime > _STALE_ANSWER:
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            skips.leave(folder, entry.name, f"older than a day, and it cannot be removed ({_why(exc)})")


def read_command(root: str, ident: str) -> Command:
    """The command ``ident``; ``CommandRefused`` (with the reason) for anything but a well-formed one
    (``FileNotFoundError`` if it is no longer there)."""
    path = os.path.join(inbox_dir(root), f"{ident}.cmd")
    try:
        with os.fdopen(open_fd(path, os.O_RDONLY), "rb") as f:
            info = os.fstat(f.fileno())
            if info.st_size > MAX_COMMAND_BYTES:
                raise CommandRefused(f"{path} is {info.st_size:,} bytes, more than a command may be "
                                     f"({MAX_COMMAND_BYTES:,})")
            data = f.read(MAX_COMMAND_BYTES + 1)
    except (FileNotFoundError, CommandRefused):
        raise
    except JobDirUnsafe as exc:  # a link, a folder, a pipe...: open_fd refuses all but a regular file
        raise CommandRefused(str(exc)) from None
    except OSError as exc:
        raise CommandRefused(f"{path} cannot be read ({_why(exc)})") from None
    try:
        value = boundedjson.loads(data, max_bytes=MAX_COMMAND_BYTES)
    except ValueError as exc:
        raise CommandRefused(f"{path} is not a command ({exc})") from None
    if not isinstance(value, dict) or value.get("format") != "diskfrontier-command" or value.get("version") != 1:
        raise CommandRefused(f"{path} is not a diskfrontier command (format 1)")
    if value.get("id") != ident:
        raise CommandRefused(f"{path} names another command ({value.get('id')!r:.80}): it was copied or renamed")
    verb, args, sent = value.get("verb"), value.get("args"), value.get("sent")
    if isinstance(sent, bool) or not isinstance(sent, (int, float)) or not 0 <= sent < 1e11:
        raise CommandRefused(f"{path}: its time {sent!r:.80} is not a time")
    try:
        check_command(verb, args)
    except (TypeError, ValueError) as exc:
        raise CommandRefused(f"{path}: {exc}") from None
    assert isinstance(verb, str) and isinstance(args, dict)
    return Command(ident, verb, args, float(sent))


def unanswerable(root: str, ident: str) -> str | None:
    """Why command ``ident`` cannot be answered (its ``ID.done`` is not a file), or None."""
    path = os.path.join(inbox_dir(root), f"{ident}.done")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    return None if stat.S_ISREG(mode) else unanswerable_reason(path, mode)


def write_answer(root: str, ident: str, result: dict[str, Any]) -> None:
    """Write the answer to command ``ident`` (``ID.done``, replaced atomically)."""
    write_atomic(os.path.join(inbox_dir(root), f"{ident}.done"),
                 json.dumps({"id": ident, "applied": time.time(), "by": os.getpid(), **result}).encode())


def answer(root: str, ident: str, result: dict[str, Any]) -> None:
    """Write the answer to command ``ident`` (``ID.done``), then remove its ``ID.cmd``."""
    write_answer(root, ident, result)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(inbox_dir(root), f"{ident}.cmd"))


def set_aside(root: str, name: str, reason: str) -> str | None:
    """Rename the inbox entry ``name`` to ``name.refused`` (``name.HEX.refused`` if that is taken or too
    long), never to be applied, and say why; return the new name (None: the entry was gone).
    ``OSError`` if it cannot be renamed."""
    folder = inbox_dir(root)
    aside = _aside_name(folder, name)
    try:
        os.rename(os.path.join(folder, name), os.path.join(folder, aside))
    except FileNotFoundError:
        return None
    log.warning("set aside %s in %s as %s: %s", shown(name), folder, shown(aside), reason)
    return aside


def _aside_name(folder: str, name: str) -> str:
    """A free name to set ``name`` aside under."""
    wanted = f"{name}{_ASIDE}"
    if len(os.fsencode(wanted)) <= _NAME_MAX and not os.path.lexists(os.path.join(folder, wanted)):
        return wanted
    stem = os.fsdecode(os.fsencode(name)[:_NAME_MAX - 32])  # room for ".HEX.refused"
    while True:
        aside = f"{stem}.{secrets.token_hex(8)}{_ASIDE}"
        if not os.path.lexists(os.path.join(folder, aside)):
            return aside


def refuse(root: str, ident: str, reason: str, *, answered: bool = True) -> None:
    """Answer command ``ident`` with ``reason`` (unless ``answered`` is False: it cannot be), then set it
    aside. The answer comes first: a sender that finds the command gone finds its answer.
    ``OSError`` or ``FrontierError`` if either cannot be written."""
    error: BaseException | None = None
    if answered:
        try:
            write_answer(root, ident, {"error": reason})
        except (OSError, FrontierError) as exc:  # still set aside: never read again
            error = exc
    set_aside(root, f"{ident}.cmd", reason)
    if error is not None:
        raise error


# ------------------------------------------------------------------ what a command may say
def check_command(verb: Any, args: Any) -> None:
    """TypeError or ValueError unless ``verb`` is known and ``args`` are what it takes."""
    if verb not in VERBS:
        raise ValueError(f"unknown verb {verb!r} (known: {', '.join(VERBS)})")
    if not isinstance(args, dict):
        raise TypeError("its arguments are not a JSON object")
    allowed = _ARGS[verb]
    extra = set(args) - set(allowed)
    if extra:
        raise ValueError(f"{verb} takes no argument {sorted(extra)[0]!r}")
    for name, check in allowed.items():
        if name in args:
            check(name, args[name])
    if verb == "push" and "urls" not in args:
        raise ValueError("push needs urls")
    if verb == "host" and "host" not in args:
        raise ValueError("host needs a host")
    if verb == "drop" and ("host" in args) == ("match" in args):
        raise ValueError("drop takes exactly one of host and match")


def _urls(name: str, value: Any) -> None:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_URLS:
        raise ValueError(f"{name} must be a list of 1 to {MAX_URLS:,} URLs")
    if not all(isinstance(url, str) and 0 < len(url) <= 1 << 16 for url in value):
        raise ValueError(f"{name} must hold URLs as strings")


def _text(name: str, value: Any) -> None:
    if not isinstance(value, str) or not 0 < len(value) <= 4096:
        raise ValueError(f"{name} must be a string of 1 to 4,096 characters")


def _integer(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not -2**63 <= value < 2**63:
        raise ValueError(f"{name} must be a whole number")


def _count_or_none(name: str, value: Any) -> None:
    if value is not None:
        _integer(name, value)
        if value < 0:
            raise ValueError(f"{name} must be 0 or more")


def _seconds_or_none(name: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not 0 <= value <= 1e11):
        raise ValueError(f"{name} must be a number of seconds or null")


def _until(name: str, value: Any) -> None:
    if value == "inf":
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a time.time() value, 0 or \"inf\"")


def _flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false")


_ARGS: dict[str, dict[str, Any]] = {
    "push": {"urls": _urls, "priority": _integer, "dont_filter": _flag},
    "host": {"host": _text, "delay": _seconds_or_none, "default_delay": _flag, "blocked_until": _until,
             "budget": _count_or_none, "no_budget": _flag},
    "pause": {},
    "resume": {},
    "requeue-failed": {},
    "drop": {"host": _text, "match": _text, "dry_run": _flag, "show": _count_or_none},
}
