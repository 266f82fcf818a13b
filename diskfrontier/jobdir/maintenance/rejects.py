"""Pending requests that cannot be served: found by decoding each one, set aside in a side file.

A journal record can have valid checksums and still hold a request that no frontier may
hand out: bytes that are not a request record (msgpack), or fields that ``Request``
refuses at the door (a URL with no host, a header value with CR or LF). ``pop`` refuses
such a request by name; ``verify`` finds every one with ``find_unservable`` (one pass
over the journal, decoding each pending or failed request as ``pop`` does), and
``verify --repair`` writes them with ``write_rejected`` to
``requests.urls.rejected-<UTC time>`` (a new file: JSON lines of the record's offset,
what is wrong, its URL when one could be read, and the record's bytes in base64) before
it rewrites the journal without them.
"""

from __future__ import annotations

import base64
import heapq
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import compress

from ...files.atomic import write_all
from ...files.safefs import create_aside
from ...files.writeerrors import naming
from ..journal import JournalScan
from ..records import CARRIES_REQUEST, kind_of, parse_push
from ..replay import JournalState

SIDE_FILE = "requests.urls.rejected"


@dataclass(frozen=True)
class Unservable:
    """A pending (or failed) request record that cannot be handed out."""

    offset: int
    problem: str
    url: str | None
    body: bytes  # the journal record's body, as it is


def _wanted(state: JournalState) -> Iterator[int]:
    """The offsets of every pending and every failed request, in journal order."""
    alive = compress(state.order, state.alive_in_order())
    return heapq.merge(alive, sorted(state.failed))


def problem_of(body: bytes | memoryview, version: int) -> tuple[str, str | None] | None:
    """What keeps the request record ``body`` from being served, and its URL if readable; None if nothing."""
    url = None
    try:
        pushed = parse_push(body, version)
        url = pushed.request().url
        pushed.slot.decode("utf-8")  # as pop reads it
    except (ValueError, TypeError) as exc:  # UnicodeDecodeError included
        return str(exc), url
    return None


def find_unservable(journal: str, state: JournalState, version: int, salt: int) -> list[Unservable]:
    """Every pending or failed request of ``journal`` (described by ``state``; ``salt``: its directory's) that
    cannot be served."""
    found: list[Unservable] = []
    wanted = _wanted(state)
    next_offset = next(wanted, None)
    if next_offset is None:
        return found
    for offset, body in JournalScan(journal, salt=salt, repair=True):
        while next_offset is not None and next_offset < offset:  # named by the state, absent from this scan
            next_offset = next(wanted, None)
        if next_offset is None:
            break
        if offset != next_offset or kind_of(body) not in CARRIES_REQUEST:
            continue
        next_offset = next(wanted, None)
        problem = problem_of(body, version)
        if problem is not None:
            found.append(Unservable(offset, problem[0], problem[1], bytes(body)))
    return found


def write_rejected(root: str, rejected: list[Unservable]) -> str:
    """Write ``rejected`` to a new side file in the job directory ``root``; return its path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    lines = [json.dumps({"offset": item.offset, "problem": item.problem, "url": item.url,
                         "record": base64.b64encode(item.body).decode("ascii")}) + "\n" for item in rejected]
    with naming(os.path.join(root, f"{SIDE_FILE}-{stamp}")):
        fd, name = create_aside(os.path.join(root, f"{SIDE_FILE}-{stamp}"))
        try:
            write_all(fd, "".join(lines).encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
    return name
