"""``Writes``: the steps that store requests, ``PUSH`` (dedupe, store and enqueue) and ``RECORD_FAILED``.

Each request goes to the shard its slot hashes to, with its host; a batch is split by shard and sent
``BATCH`` requests a script call. Every request of a call is encoded before anything is sent (``prepare``),
so that a bad one raises with nothing stored.
"""

from __future__ import annotations

import struct
from typing import Any

from ..contract.checks import cap_error, check_attempts, check_time
from ..contract.values import FailedRequest
from ..request.model import Request
from .records import SeenKeys, encode, pack_body, push_args
from .seen import SeenLayout
from .settings import BATCH
from .shards import Router
from .transport import Transport

PUSH_ARGS = 6  # the PUSH script's arguments per request
FAILED_ARGS = 4  # RECORD_FAILED's


class Writes:
    """The writes of requests to the crawl that ``transport`` runs scripts on, in its seen layout ``seen_keys``."""

    def __init__(self, transport: Transport, router: Router, seen_keys: SeenLayout | SeenKeys) -> None:
        self.transport, self.router, self.seen_keys = transport, router, seen_keys

    # ------------------------------------------------------------------ pushes
    def prepare(self, request: Request, not_before: float | None = None, record: bytes | None = None) -> list[Any]:
        """The ``PUSH`` arguments of ``request`` (``not_before`` None: its own; ``record``: its record, encoded)."""
        return push_args(request, self.seen_keys, not_before, record)

    def push(self, request: Request, args: list[Any]) -> bool:
        """Push ``request`` (its arguments from ``prepare``); False if it was a duplicate."""
        return bool(self.transport.run("push", "PUSH", [1, *args], self.router.of_slot(request.slot))[0])

    def prepare_many(self, requests: list[Request],
                     records: list[bytes | None] | None = None) -> dict[int, tuple[list[int], list[Any]]]:
        """Shard -> (the positions in ``requests`` it holds, their ``PUSH`` arguments one after the other)."""
        by_shard: dict[int, tuple[list[int], list[Any]]] = {}
        for index, request in enumerate(requests):
            places, args = by_shard.setdefault(self.router.of_slot(request.slot), ([], []))
            places.append(index)
            args.extend(push_args(request, self.seen_keys, None, None if records is None else records[index]))
        return by_shard

    def push_many(self, prepared: dict[int, tuple[list[int], list[Any]]]) -> int:
        """Push what ``prepare_many`` made; how many were queued."""
        queued = 0
        step = BATCH * PUSH_ARGS
        for shard, (_places, args) in prepared.items():
            for at in range(0, len(args), step):
                chunk = args[at:at + step]
                queued += sum(self.transport.run("push_many", "PUSH", [len(chunk) // PUSH_ARGS, *chunk], shard))
        return queued

    def push_each(self, prepared: dict[int, tuple[list[int], list[Any]]], count: int) -> list[bool]:
        """Push what ``prepare_many`` made of ``count`` requests: for each, True if queued, False if a duplicate."""
        answers = [False] * count
        for shard, (places, args) in prepared.items():
            for at in range(0, len(places), BATCH):
                chunk = args[at * PUSH_ARGS:(at + BATCH) * PUSH_ARGS]
                replies = self.transport.run("push_many", "PUSH", [len(chunk) // PUSH_ARGS, *chunk], shard)
                for index, reply in zip(places[at:at + BATCH], replies, strict=True):
                    answers[index] = bool(reply)
        return answers

    # ------------------------------------------------------------------ failed requests
    def prepare_failed(self, entries: list[FailedRequest]) -> dict[int, list[Any]]:
        """Shard -> the ``RECORD_FAILED`` arguments of its entries (each checked as ``check_failed`` does)."""
        by_shard: dict[int, list[Any]] = {}
        for entry in entries:
            request = entry.request
            at = check_time("record_failed(): failed_at", entry.failed_at)
            key, field = ("", b"") if request.dont_filter else self.seen_keys.of(request.fingerprint)
            by_shard.setdefault(self.router.of_slot(request.slot), []).extend(
                [key, field, pack_body(request, encode(request), check_attempts(request.attempts), 0.0),
                 failure(at, entry.error)])
        return by_shard

    def record_failed(self, prepared: dict[int, list[Any]]) -> int:
        """Store what ``prepare_failed`` made as failed requests; how many were stored."""
        stored = 0
        step = BATCH * FAILED_ARGS
        for shard, args in prepared.items():
            for at in range(0, len(args), step):
                chunk = args[at:at + step]
                stored += int(self.transport.run("record_failed", "RECORD_FAILED", [len(chunk) // FAILED_ARGS, *chunk],
                                                 shard))
        return stored


def failure(at: float, error: str) -> bytes:
    """What the ``failinfo`` hash keeps of a failure: its time (f64) and its error text, capped."""
    return struct.pack(">d", at) + cap_error(error)
