"""``Writes``: the steps that store requests: ``push`` (dedupe, store and enqueue, ``BATCH`` requests a call),
``mark_seen`` and ``record_failed``. Every request of a call is checked and encoded before anything is sent,
so that a bad one raises with nothing stored."""

from __future__ import annotations

from collections.abc import Iterable

from ..contract.checks import cap_error, check_attempts, check_time
from ..contract.values import FailedRequest
from ..redisfrontier.seen import key64
from ..request.model import Request, check_priority
from .records import PushRows, encode
from .state import BATCH, Shared

_PUSH = ("SELECT * FROM push(%b::text[], %b::bigint[], %b::boolean[], %b::integer[], %b::integer[], %b::bytea[], "
         "%b::float8[], %b::bytea[], %b)")
_RECORD_FAILED = ("SELECT record_failed(%s::text[], %s::bigint[], %s::integer[], %s::integer[], %s::boolean[], "
                  "%s::bytea[], %s::bytea[], %s::text[], %s::float8[])")


class Writes:
    """The writes of requests of one client."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def push(self, rows: PushRows) -> list[bool]:
        """Push what ``rows`` holds: for each, True if queued, False if a duplicate."""
        answers: list[bool] = []
        for start in range(0, len(rows), BATCH):
            params = [*rows.columns(start, start + BATCH), self.shared.fifo]
            [(queued, best_priority, best_rank)] = self.shared.db.rows("push", _PUSH, params)
            answers += queued
            self.shared.pushed(None if best_priority is None else (best_priority, best_rank))
        if any(answers):
            self.shared.signal(frees=False)
        return answers

    def mark_seen(self, fingerprints: list[bytes]) -> int:
        """Add the keys of ``fingerprints`` to the seen set; how many were new."""
        new = 0
        for start in range(0, len(fingerprints), BATCH * 10):
            keys = [key64(fingerprint) for fingerprint in fingerprints[start:start + BATCH * 10]]
            new += int(self.shared.db.value("mark_seen", "SELECT mark_seen(%s::bigint[])", [keys]))
        return new

    def record_failed(self, entries: Iterable[FailedRequest]) -> int:
        """Store ``entries`` (checked by ``check_failed``) as failed requests; how many."""
        columns: list[list] = [[] for _ in range(9)]
        for entry in entries:
            request = entry.request
            values = (request.slot, key64(request.fingerprint), check_priority(request.priority),
                      check_attempts(request.attempts), request.dont_filter, request.fingerprint, encode(request),
                      cap_error(entry.error).decode("utf-8"), check_time("record_failed(): failed_at", entry.failed_at))
            for column, value in zip(columns, values, strict=True):
                column.append(value)
        stored = 0
        for start in range(0, len(columns[0]), BATCH):
            stored += int(self.shared.db.value("record_failed", _RECORD_FAILED,
                                               [column[start:start + BATCH] for column in columns]))
        return stored


def push_rows(requests: Iterable[Request], records: Iterable[bytes | None] | None = None,
              not_before: float | None = None) -> PushRows:
    """``requests`` checked and encoded for a push (``records``: those already encoded, None where not)."""
    rows = PushRows()
    if records is None:
        for request in requests:
            rows.add(request, not_before)
    else:
        for request, record in zip(requests, records, strict=True):
            rows.add(request, not_before, record)
    return rows
