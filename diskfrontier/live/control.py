"""What ``serve --allow-control`` does to a crawl: pause, resume, a host's block or delay, seeds.

``apply_control(target, crawl, verb, args)`` is the one entry: it checks the arguments, opens the
crawl (a Redis crawl: a ``RedisFrontier`` client; a job directory: a ``Frontier``, or, while a crawl
holds the directory, a command through its inbox that the crawl applies), applies the change and
answers a JSON-ready dict. Every refusal is a ``ControlError`` with the HTTP status to answer: 400
(bad arguments), 404 (no such crawl), 504 (the crawl holding
the directory did not apply the command in time: it stays queued).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from typing import Any

from ..access.targets import is_server_target, open_target
from ..contract.checks import MAX_SECONDS, check_host
from ..core.errors import FrontierError, JobDirLocked
from ..jobdir.delivery import NotApplied, deliver
from ..request.model import PRIORITY_MAX, PRIORITY_MIN, Request
from .sources import json_safe

VERBS = ("pause", "resume", "block", "unblock", "delay", "push")
MAX_SEEDS = 10_000
"""URLs one push may carry."""


class ControlError(FrontierError):
    """A control action refused: ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


def _seconds(args: Mapping[str, Any], name: str, *, required: bool) -> float | None:
    value = args.get(name)
    if value is None or value == "":
        if required:
            raise ControlError(400, f"give {name}= (seconds)")
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int too large for a float
        raise ControlError(400, f"{name}={value!r:.40} is not a number of seconds") from None
    if not 0 <= seconds <= MAX_SECONDS:
        raise ControlError(400, f"{name}={value!r:.40} is not from 0 to {MAX_SECONDS:g} seconds")
    return seconds


def _host(args: Mapping[str, Any]) -> str:
    host = args.get("host")
    if not isinstance(host, str) or not host:
        raise ControlError(400, "give host= (a host name, as the hosts table lists it)")
    try:
        return check_host(host)
    except (TypeError, ValueError) as exc:
        raise ControlError(400, str(exc)) from None


def _seeds(args: Mapping[str, Any]) -> list[Request]:
    urls = args.get("urls")
    if isinstance(urls, str):
        urls = [line.strip() for line in urls.splitlines()]
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        raise ControlError(400, "give urls= (a list of URLs, or one URL a line)")
    urls = [u for u in urls if u and not u.startswith("#")]
    if not urls:
        raise ControlError(400, "give at least one URL")
    if len(urls) > MAX_SEEDS:
        raise ControlError(400, f"at most {MAX_SEEDS:,} URLs at a time (got {len(urls):,})")
    try:
        priority = int(args.get("priority") or 0)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite float
        raise ControlError(400, f"priority={args.get('priority')!r:.40} is not a whole number") from None
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise ControlError(400, f"priority must be from {PRIORITY_MIN} to {PRIORITY_MAX}")
    out = []
    for number, url in enumerate(urls, 1):
        try:
            if any(c.isspace() for c in url):
                raise ValueError("it holds whitespace")
            out.append(Request(url, priority=priority))
        except (TypeError, ValueError) as exc:
            raise ControlError(400, f"URL {number} ({url!r:.80}): {exc}") from None
    return out


INBOX_TIMEOUT = 10.0
"""Seconds a control action waits for the crawl holding a job directory to apply it."""


def _through_inbox(target: str, verb: str, host: str | None, seconds: float | None,
                   seeds: list[Request]) -> dict[str, Any]:
    """``verb`` as a command in the inbox of the crawl that holds the job directory ``target``."""
    args: dict[str, Any] = {}
    if verb in ("pause", "resume"):
        command = verb
    elif verb == "push":
        command = "push"
        args = {"urls": [r.url for r in seeds], "priority": seeds[0].priority}
    else:
        command = "host"
        args = {"host": host}
        if verb == "block":
            args["blocked_until"] = "inf" if seconds is None else time.time() + seconds
        elif verb == "unblock":
            args["blocked_until"] = 0
        elif seconds is None:
            args["default_delay"] = True
        else:
            args["delay"] = seconds
    try:
        _ident, result = deliver(target, command, args, timeout=INBOX_TIMEOUT)
    except NotApplied as exc:
        raise ControlError(504, str(exc)) from None
    assert result is not None
    if "error" in result:
        raise ControlError(400, str(result["error"]))
    answer: dict[str, Any] = {"ok": True, "action": verb, "applied_by": result.get("by")}
    if verb == "push":
        answer.update(queued=result["queued"], duplicates=result["duplicates"])
    elif command == "host":
        answer["host"] = result.get("host")
    return answer


def available_actions(target: str) -> list[str]:
    """The verbs that ``apply_control`` can carry out on ``target``'s crawl (every one, on both backends)."""
    return list(VERBS)


def apply_control(target: str, crawl: str | None, verb: str, args: dict[str, Any]) -> dict[str, Any]:
    """Apply ``verb`` (pause, resume, block, unblock, delay, push) with ``args`` to the crawl at
    ``target`` (a job directory, or a Redis URL with ``crawl``); a JSON-ready answer, or ``ControlError``.

    ``args``: ``host`` for block, unblock and delay; ``seconds`` for block (none: until unblocked)
    and delay (none: the crawl's own delay again); ``urls`` (a list, or one a line) and
    ``priority`` for push.
    """
    if verb not in VERBS:
        raise ControlError(400, f"unknown action {verb!r:.40}: one of {', '.join(VERBS)}")
    server = is_server_target(target)
    host = _host(args) if verb in ("block", "unblock", "delay") else None
    seconds = _seconds(args, "seconds", required=False) if verb in ("block", "delay") else None
    seeds = _seeds(args) if verb == "push" else []
    if not server and not os.path.isfile(os.path.join(target, "frontier.json")):
        raise ControlError(404, f"{target} is not a diskfrontier job directory (no frontier.json)")
    try:
        frontier = open_target(target, crawl, create=False) if server else open_target(target)
    except JobDirLocked:
        return _through_inbox(target, verb, host, seconds, seeds)
    except FrontierError as exc:
        raise ControlError(404 if server else 409, str(exc)) from None
    answer: dict[str, Any] = {"ok": True, "action": verb}
    try:
        with frontier:
            if verb in ("pause", "resume"):
                getattr(frontier, verb)()
            elif verb == "push":
                queued = frontier.push_many(seeds)
                answer.update(queued=queued, duplicates=len(seeds) - queued)
            else:
                assert host is not None
                if verb == "block":
                    frontier.block(host, math.inf if seconds is None else time.time() + seconds)
                elif verb == "unblock":
                    frontier.unblock(host)
                else:
                    frontier.set_delay(host, seconds)
                info = frontier.host(host)
                answer["host"] = None if info is None else json_safe(info.to_dict())
    except (TypeError, ValueError) as exc:
        raise ControlError(400, str(exc)) from None
    return answer
