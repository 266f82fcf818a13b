"""``Reading``: the crawl read as a whole, for every client: its stats, its hosts, its failed requests, and
its pending requests and seen set page by page (for ``copy`` and ``export``). Each page is one query; a
request moved meanwhile by another client may be read twice or not at all."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..contract.outcomes import outcome_counts
from ..contract.values import FailedRequest, HostInfo
from ..redisfrontier.seen import reduced_fingerprint
from ..request.revisit import REVISIT_COUNTERS
from .records import decode
from .state import Shared

COUNTED = ("done", "seen", "pushed", "duplicates", "retried", "refetch_scheduled", "reclaimed", "failed", "dropped",
           *REVISIT_COUNTERS)
_HOSTS = ("SELECT h.name, h.ready_n + h.waiting_n, h.in_flight, h.done, h.delay, h.blocked_until, h.budget, "
          "h.failures, h.last_out, (SELECT value FROM meta WHERE name = 'delay') FROM hosts h")
_PENDING = ("SELECT q.id, h.name, q.priority, q.attempts, q.dont_filter, q.fingerprint, q.not_before, q.record "
            "FROM {} q JOIN hosts h ON h.id = q.host WHERE q.id > %s ORDER BY q.id LIMIT 1000")
_SEEN = "SELECT key FROM seen WHERE %s::bigint IS NULL OR key > %s::bigint ORDER BY key LIMIT 10000"


class Reading:
    """Reads of one client's crawl."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def stats(self) -> dict[str, Any]:
        """The crawl's state and counters (every client's)."""
        shared = self.shared
        found = shared.db.value("stats", "SELECT stats()")
        out: dict[str, Any] = {name: int(found.get(name) or 0) for name in
                               ("pending", "in_flight", "delayed", "hosts", "ready_hosts", *COUNTED)}
        paused = found.get("paused_since")
        out["paused_since"] = None if paused is None else float(paused)
        out["delay"], out["per_host"] = float(found.get("delay") or 0.0), int(found.get("per_host") or 0)
        out.update(outcome_counts(found))
        return out

    def pending(self) -> int:
        """Requests waiting to be popped (ready or waiting for a time), not counting those leased."""
        value = self.shared.db.value("len", "SELECT coalesce(sum(ready_n + waiting_n), 0) FROM hosts")
        return int(value)

    def finished(self) -> bool:
        """Nothing pending and nothing leased by any client."""
        value = self.shared.db.value("finished", "SELECT NOT EXISTS (SELECT 1 FROM hosts WHERE ready_n > 0 OR "
                                     "waiting_n > 0 OR in_flight > 0)")
        return bool(value)

    def paused_since(self) -> float | None:
        value = self.shared.db.value("paused_since", "SELECT value FROM meta WHERE name = 'paused_since'")
        return None if value is None else float(value)

    def hosts(self) -> list[HostInfo]:
        rows = self.shared.db.rows("hosts", _HOSTS + " ORDER BY h.name")
        return [info for info in map(_host_info, rows) if info is not None]

    def host(self, name: str) -> HostInfo | None:
        rows = self.shared.db.rows("host", _HOSTS + " WHERE h.name = %s", [name])
        return _host_info(rows[0]) if rows else None

    def failed(self) -> list[FailedRequest]:
        rows = self.shared.db.rows(
            "failed", "SELECT f.seq, h.name, f.priority, f.attempts, f.dont_filter, f.fingerprint, f.record, f.error, "
            "f.failed_at FROM failed f JOIN hosts h ON h.id = f.host ORDER BY f.seq")
        out = []
        for seq, host, priority, attempts, dont_filter, fingerprint, record, error, failed_at in rows:
            request = decode("failed", seq, host, priority, attempts, dont_filter, fingerprint, None, record)
            out.append(FailedRequest(request, error, float(failed_at)))
        return out

    def pending_requests(self, *, leased: bool = True) -> Iterator[Any]:
        """Every request not done, in no order (``leased=False``: not those leased now)."""
        from psycopg import sql

        tables = ("waiting", "requests", "leases") if leased else ("waiting", "requests")
        for table in tables:
            last = -(2**63)
            while True:
                rows = self.shared.db.rows("pending_requests", sql.SQL(_PENDING).format(sql.Identifier(table)), [last])
                if not rows:
                    break
                last = rows[-1][0]
                for row in rows:
                    yield decode(table, *row)

    def seen_fingerprints(self) -> Iterator[bytes]:
        """Every key of the seen set, as the 20-byte fingerprint it stands for (its 8 bytes, then zeros)."""
        last: int | None = None
        while True:
            keys = [row[0] for row in self.shared.db.rows("seen_fingerprints", _SEEN, [last, last])]
            if not keys:
                return
            last = keys[-1]
            for key in keys:
                yield reduced_fingerprint(key)


def _host_info(row: tuple[Any, ...]) -> HostInfo | None:
    """The ``HostInfo`` of a hosts row; None if it holds nothing worth showing."""
    name, pending, in_flight, done, own_delay, blocked, budget, failures, last_out, crawl_delay = row
    delay = float(crawl_delay or 0.0) if own_delay is None else float(own_delay)
    blocked = None if blocked is None else float(blocked)
    ready_at = None
    if pending:
        last = float(last_out) if delay > 0 else 0.0
        ready_at = max(last + delay if last else 0.0, blocked or 0.0)
    if not (pending or in_flight or done or own_delay is not None or blocked is not None or budget is not None
            or failures):
        return None
    return HostInfo(name, int(pending), int(in_flight), int(done), delay, ready_at, blocked,
                    None if budget is None else int(budget), int(failures))

