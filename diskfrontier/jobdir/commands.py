"""Applying the inbox's commands (``inbox.py``) to an open job directory, exactly once.

Each command's records are framed by a MARK_BEGIN and a MARK_END naming its id; the
summary goes into the MARK_END and then into ``ID.done``. A command the journal shows as
applied (a stop after its MARK_END, before its answer) is only answered; one whose
MARK_BEGIN has no end (a stop in the middle of its records) is applied again from where
it stopped, without a second MARK_BEGIN, and its summary counts what the first attempt
stored. A command that cannot be read, or whose answer cannot be written, never stops the others
(``Commands.apply_queued``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from typing import TYPE_CHECKING, Any

from ..contract.protocol import FrontierProtocol
from ..core.errors import FrontierError
from ..request.model import Request
from . import inbox
from .inbox import Command, CommandRefused
from .records import MARK_BEGIN, MARK_END, MAX_RESULT
from .replay import OpenGroup

log = logging.getLogger("diskfrontier")

if TYPE_CHECKING:
    from .ledger import Ledger
    from .shared import Shared


class Commands:
    """The inbox's commands for one open job directory: which are waiting, and applying them.

    It owns what only it changes: the inbox entries left in place (each named once in the log)
    and the results of commands applied in full whose MARK_END a write error stopped.
    """

    def __init__(self, frontier: FrontierProtocol, state: Shared, ledger: Ledger) -> None:
        self.frontier = frontier
        self.state = state
        self.ledger = ledger
        self.skips = inbox.Skips()
        self.unended: dict[str, dict[str, Any]] = {}

    def waiting(self) -> bool:
        """True if a command waits in the inbox, or one a stop cut short waits to be finished."""
        return bool(inbox.queued(self.state.path, self.skips)) or self.state.open_group is not None

    def apply_at_close(self) -> None:
        """Apply the commands sent while the frontier ran, at its close (one that fails is left in the inbox
        for the next open, and named in the log: the close goes on)."""
        if self.state.broken:
            return
        try:
            self.apply_queued()
        except Exception as exc:
            log.warning("%s: commands left in the inbox for the next open (%s: %s)", self.state.path,
                        type(exc).__name__, exc)

    def apply_queued(self) -> int:
        """Apply every command waiting in the inbox, oldest first (the frontier's lock is held); return how many.

        Nothing in the inbox raises here: an entry that is not a command is set aside (``inbox.queued``), a
        command that cannot be read or answered is refused unapplied, and one whose answer cannot be
        written is answered at a later look (the journal says it was applied). Only a failed journal write
        raises; the command is then tried again, and applied once.
        """
        st, ledger, frontier = self.state, self.ledger, self.frontier
        root = st.path
        skips = self.skips
        idents = inbox.queued(root, skips)
        group = st.open_group
        if group is not None and group.ident not in idents:  # its file is gone: close what it began
            _end(st, ledger, group.ident, {"error": "its command file was removed before it was applied in full"})
        applied = 0
        for ident in idents:
            done = st.applied.get(ident)
            if done is not None:
                _answer(root, skips, ident, json.loads(done))
                continue
            blocked = inbox.unanswerable(root, ident)
            try:
                if blocked is not None:
                    raise CommandRefused(blocked)
                command = inbox.read_command(root, ident)
            except FileNotFoundError:  # gone since the folder was listed
                continue
            except CommandRefused as exc:
                _refuse(root, skips, ident, str(exc), answered=blocked is None)
                continue
            result = self.unended.pop(ident, None)  # applied in full by an attempt whose end could not be written
            if result is None:
                group = st.open_group
                partial = group if group is not None and group.ident == ident else None
                if partial is None:
                    ledger.mark(MARK_BEGIN, ident)
                    st.open_group = OpenGroup(ident, -1, 0, 0)
                try:
                    result = run(frontier, command, partial)
                except (TypeError, ValueError) as exc:  # refused by the frontier's own checks: nothing was applied
                    result = {"error": str(exc)}
            try:
                _end(st, ledger, ident, result)
            except BaseException:
                self.unended[ident] = result  # the next attempt writes only the end: nothing is applied twice
                raise
            _answer(root, skips, ident, result)
            applied += 1
        return applied


def _answer(root: str, skips: inbox.Skips, ident: str, result: dict[str, Any]) -> None:
    """Answer an applied command; if the answer cannot be written, say so (once) and leave it for the next look."""
    try:
        inbox.answer(root, ident, result)
    except (OSError, FrontierError) as exc:
        skips.warn(inbox.inbox_dir(root), f"{ident}.cmd",
                   f"applied, but its answer cannot be written ({exc}); written at a later look")


def _refuse(root: str, skips: inbox.Skips, ident: str, reason: str, *, answered: bool) -> None:
    """Refuse a command unapplied; one that cannot be set aside is left in place, never read again."""
    folder = inbox.inbox_dir(root)
    name = f"{ident}.cmd"
    try:
        inbox.refuse(root, ident, reason, answered=answered)
    except (OSError, FrontierError) as exc:
        if os.path.lexists(os.path.join(folder, name)):
            skips.leave(folder, name, f"refused ({reason}), and it cannot be set aside ({exc})")
        else:
            skips.warn(folder, name, f"refused ({reason}), and its answer cannot be written ({exc})")


def _end(st: Shared, ledger: Ledger, ident: str, result: dict[str, Any]) -> None:
    text = json.dumps(result)
    if len(text.encode()) > MAX_RESULT:
        text = json.dumps({k: v for k, v in result.items() if k != "urls"})
    ledger.mark(MARK_END, ident, text.encode())
    st.open_group = None
    st.applied[ident] = text
    st.counters["commands"] += 1


def run(frontier: FrontierProtocol, command: Command, partial: OpenGroup | None) -> dict[str, Any]:
    """Apply one command with the frontier's own verbs; its summary (what the command prints)."""
    args = command.args
    verb = command.verb
    before = partial.stored if partial is not None else 0
    if verb == "push":
        priority, dont_filter = args.get("priority", 0), args.get("dont_filter", False)
        urls = args["urls"]
        if dont_filter:  # no dedupe to skip what the first attempt stored: they were stored in order
            urls = urls[before:]
        requests = [Request(url, priority=priority, dont_filter=dont_filter) for url in urls]
        queued = frontier.push_many(requests)
        repeated = 0 if dont_filter else before  # this time refused as duplicates, stored the first time
        return {"queued": queued + before, "duplicates": max(0, len(requests) - queued - repeated)}
    if verb == "host":
        return _host(frontier, args)
    if verb == "pause":
        frontier.pause()
        return {"paused_since": frontier.paused_since}
    if verb == "resume":
        was = frontier.paused_since
        frontier.resume()
        return {"resumed": was is not None}
    if verb == "requeue-failed":
        requeued = frontier.requeue_failed()
        return {"requeued": requeued + before, "pending": len(frontier)}
    if verb == "drop":
        dropped = frontier.drop(host=args.get("host"), match=args.get("match"), dry_run=args.get("dry_run", False),
                                show=args.get("show") or 0)
        earlier = partial.dropped if partial is not None else 0
        return {"dropped": dropped.count + earlier, "urls": dropped.urls, "dry_run": args.get("dry_run", False)}
    raise CommandRefused(f"unknown verb {verb!r}")  # read_command checked it


def _host(frontier: FrontierProtocol, args: dict[str, Any]) -> dict[str, Any]:
    name = args["host"]
    if "delay" in args or args.get("default_delay"):
        frontier.set_delay(name, None if args.get("default_delay") else args["delay"])
    if "blocked_until" in args:
        until = args["blocked_until"]
        if until == "inf":
            frontier.block(name, math.inf)
        elif until:
            frontier.block(name, max(float(until), time.time()))
        else:
            frontier.unblock(name)
    if "budget" in args or args.get("no_budget"):
        frontier.set_budget(name, None if args.get("no_budget") else args["budget"])
    info = frontier.host(name)
    return {"host": None if info is None else _finite(info.to_dict())}


def _finite(values: dict[str, Any]) -> dict[str, Any]:
    """JSON has no infinity: a block until unblocked is written as the string "inf"."""
    return {k: "inf" if isinstance(v, float) and math.isinf(v) else v for k, v in values.items()}
