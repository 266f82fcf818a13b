"""``HostRules``: host settings (delay, block, budget, done count), the failure streak that blocks a host
(``host_failed``), and the robots.txt kept per host, each one call, for every client at once."""

from __future__ import annotations

from ..contract.values import RobotsEntry
from .state import Shared

_SET = "SELECT set_host(%s, %s, %s::float8)"


class HostRules:
    """The host settings of one client's crawl."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def set(self, host: str, field: str, value: float | None, call: str) -> None:
        """Set ``field`` ("delay", "blocked_until", "budget" or "done") of ``host``; None clears it."""
        self.shared.db.value(call, _SET, [host, field, value])
        self.shared.signal()

    def failed(self, host: str, block_after: int, backoff: float, backoff_max: float) -> float | None:
        value = self.shared.db.value("host_failed", "SELECT host_failed(%s, %s, %s::float8, %s::float8)",
                                     [host, block_after, backoff, backoff_max])
        return None if value is None else float(value)

    def robots(self, host: str) -> RobotsEntry | None:
        rows = self.shared.db.rows("robots", "SELECT status, body, fetched_at FROM robots WHERE host = %s", [host])
        if not rows:
            return None
        status, body, fetched_at = rows[0]
        return RobotsEntry(int(status), bytes(body), float(fetched_at))

    def set_robots(self, host: str, entry: RobotsEntry) -> None:
        self.shared.db.value(
            "set_robots", "INSERT INTO robots (host, status, body, fetched_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (host) DO UPDATE SET status = excluded.status, body = excluded.body, "
            "fetched_at = excluded.fetched_at RETURNING 1", [host, entry.status, entry.body, entry.fetched_at])
