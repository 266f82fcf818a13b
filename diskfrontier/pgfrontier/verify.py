"""``verify`` of a PostgreSQL crawl: check its counts and orders against its rows, and that every row holds a
request diskfrontier stored, in one snapshot (a ``REPEATABLE READ`` transaction that only reads), beside
running clients.

The rows of ``requests``, ``waiting``, ``leases`` and ``failed`` are the crawl's truth; each host's counts
(``ready_n``, ``waiting_n``, ``in_flight``), its best ready request (``top_priority``, ``top_rank``), each
request's rank (its id, or minus it in a FIFO crawl) and the ``failed`` counter are derived from them and
checked. Repair is not done here yet: a crawl found unsound is reported with every finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.errors import CrawlDamaged
from .connection import Database, shown_url
from .records import decode
from .schema import FORMAT, ORDERS

_PAGE = 1000
_HOST_COUNTS = (
    "SELECT h.name, h.ready_n, h.waiting_n, h.in_flight, h.top_priority, h.top_rank, "
    "(SELECT count(*) FROM requests q WHERE q.host = h.id), (SELECT count(*) FROM waiting w WHERE w.host = h.id), "
    "(SELECT count(*) FROM leases l WHERE l.host = h.id), "
    "(SELECT ARRAY[q.priority::bigint, q.rank] FROM requests q WHERE q.host = h.id "
    "ORDER BY q.priority DESC, q.rank DESC LIMIT 1) FROM hosts h ORDER BY h.name")
_ROWS = {
    "requests": "SELECT q.id, h.name, q.priority, q.attempts, q.dont_filter, q.fingerprint, q.not_before, q.record, "
                "q.rank FROM requests q LEFT JOIN hosts h ON h.id = q.host WHERE q.id > %s ORDER BY q.id LIMIT 1000",
    "waiting": "SELECT q.id, h.name, q.priority, q.attempts, q.dont_filter, q.fingerprint, q.not_before, q.record, "
               "NULL FROM waiting q LEFT JOIN hosts h ON h.id = q.host WHERE q.id > %s ORDER BY q.id LIMIT 1000",
    "leases": "SELECT q.id, h.name, q.priority, q.attempts, q.dont_filter, q.fingerprint, q.not_before, q.record, "
              "q.rank FROM leases q LEFT JOIN hosts h ON h.id = q.host WHERE q.id > %s ORDER BY q.id LIMIT 1000",
    "failed": "SELECT q.seq, h.name, q.priority, q.attempts, q.dont_filter, q.fingerprint, NULL, q.record, NULL "
              "FROM failed q LEFT JOIN hosts h ON h.id = q.host WHERE q.seq > %s ORDER BY q.seq LIMIT 1000",
}


@dataclass
class PostgresReport:
    """What ``verify_crawl`` found: the crawl, how many rows it read, and each problem (where, what)."""

    source: str
    rows: int = 0
    findings: list[tuple[str, str]] = field(default_factory=list)

    @property
    def sound(self) -> bool:
        return not self.findings

    def add(self, where: str, problem: str) -> None:
        self.findings.append((where, problem))


def verify_crawl(url: str, crawl: str) -> PostgresReport:
    """Check the crawl ``crawl`` at ``url`` (which must exist) without changing it."""
    db = Database(url, crawl, size=2)
    try:
        return db.call("verify", lambda conn: _verify(conn, db))
    finally:
        db.close()


def _verify(conn: Any, db: Database) -> PostgresReport:
    report = PostgresReport(f"{shown_url(db.url)} crawl {db.crawl}")
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (db.schema,)).fetchone()
        if found is None:
            report.add(db.schema, "there is no such schema: the crawl does not exist")
            return report
        meta = dict(conn.execute("SELECT name, value FROM meta").fetchall())
        version, order = meta.get("format"), meta.get("order")
        if not isinstance(version, int) or not 1 <= version <= FORMAT:
            report.add("meta format", f"is {version!r}, not a format this version reads (1 to {FORMAT})")
            return report
        if order not in ORDERS:
            report.add("meta order", f"is {order!r}, not 'lifo' or 'fifo'")
            return report
        for name, ready_n, waiting_n, in_flight, top_p, top_r, ready, waiting, leased, best in conn.execute(
                _HOST_COUNTS).fetchall():
            for column, counted, rows in (("ready_n", ready_n, ready), ("waiting_n", waiting_n, waiting),
                                          ("in_flight", in_flight, leased)):
                if counted != rows:
                    report.add(f"hosts row {name} {column}", f"is {counted}, and its rows are {rows}")
            if best is not None and [top_p, top_r] != list(best):
                report.add(f"hosts row {name} top", f"is ({top_p}, {top_r}), and its best ready request is "
                                                    f"({best[0]}, {best[1]})")
        for table, query in _ROWS.items():
            last = -(2**63)
            while rows := conn.execute(query, (last,)).fetchall():
                last = rows[-1][0]
                for row in rows:
                    report.rows += 1
                    _check_row(report, table, row, order)
        failed = conn.execute("SELECT coalesce(sum(value), 0) FROM counters WHERE name = 'failed'").fetchone()[0]
        stored = conn.execute("SELECT count(*) FROM failed").fetchone()[0]
        if int(failed) != stored:
            report.add("counters failed", f"is {int(failed)}, and the failed table holds {stored} rows")
    return report


def _check_row(report: PostgresReport, table: str, row: tuple[Any, ...], order: str) -> None:
    row_id, host, *fields, rank = row
    if host is None:
        report.add(f"{table} row {row_id}", "names a host the hosts table does not hold")
        return
    try:
        decode(table, row_id, host, *fields)
    except CrawlDamaged as exc:
        report.add(exc.key, exc.problem)
        return
    if rank is not None and table == "requests" and rank != (-row_id if order == "fifo" else row_id):
        report.add(f"{table} row {row_id}", f"has rank {rank}, not the {order} rank of its id")
