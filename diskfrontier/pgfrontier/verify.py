"""``verify`` of a PostgreSQL crawl: check its counts and orders against its rows, and that every row holds a
request diskfrontier stored, in one snapshot (a ``REPEATABLE READ`` transaction that only reads), beside
running clients.

The rows of ``requests``, ``waiting``, ``leases`` and ``failed`` are the crawl's truth; each host's counts
(``ready_n``, ``waiting_n``, ``in_flight``), its best ready request (``top_priority``, ``top_rank``), each
request's rank (its id, or minus it in a FIFO crawl) and the ``failed`` counter are derived from them and
checked; so are the seen set (every stored request's key in it, as many keys as the ``seen`` counter says were
added), the schema's tables and functions and the ``meta`` rows a step reads (``integrity.py``), each host's
settings, and the robots.txt kept. ``repair.py`` sets again what the rows tell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..contract.checks import MAX_ROBOTS
from ..core.errors import CrawlDamaged
from ..redisfrontier.seen import key64
from . import integrity, sql
from .connection import Database, shown_url
from .records import decode
from .schema import FORMAT, ORDERS

_PAGE = 1000
_SHOWN = 20  # rows named one by one, of one page
_UNSEEN = "SELECT k FROM unnest(%s::bigint[]) AS t(k) WHERE NOT EXISTS (SELECT 1 FROM seen WHERE key = k)"
_EARLY = "SELECT id, due, not_before FROM waiting WHERE due < not_before ORDER BY id LIMIT 100"
_COUNTERS = "SELECT name, sum(value) FROM counters GROUP BY name"
_HOST_COLUMNS = ("done", "last_out", "delay", "blocked_until", "budget", "failures")
_HOST_VALUES = "SELECT name, done, last_out, delay, blocked_until, budget, failures FROM hosts ORDER BY name"
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
        gone = integrity.missing_relations(conn, db.schema)
        if gone:
            report.add(db.schema, f"its {', '.join(gone)} {'are' if len(gone) > 1 else 'is'} gone: the crawl cannot "
                                  f"be read (restore it from a backup, or delete it)")
            return report
        meta = dict(conn.execute("SELECT name, value FROM meta").fetchall())
        version, order = meta.get("format"), meta.get("order")
        if not isinstance(version, int) or not 1 <= version <= FORMAT:
            report.add("meta format", f"is {version!r}, not a format this version reads (1 to {FORMAT})")
            return report
        if order not in ORDERS:
            report.add("meta order", f"is {order!r}, not 'lifo' or 'fifo'")
            return report
        for name, problem in integrity.meta_problems(meta):
            report.add(f"meta.{name}", problem)
        if meta.get("code") == sql.code_version():  # (another version's functions: the next open installs these)
            for problem in integrity.changed_functions(conn, db.schema):
                report.add("functions", f"{problem} (the next open installs this version's)")
        for name, upcoming, highest in integrity.sequences_behind(conn):
            report.add(f"sequence {name}", f"gives {upcoming} next, and the rows hold up to {highest}: it was set back")
        _check_hosts(conn, report)
        for row_id, due, not_before in conn.execute(_EARLY).fetchall():
            report.add(f"waiting row {row_id}", f"is due at {due!r}, before its not_before {not_before!r}")
        _check_robots(conn, report)
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
                keys = {}
                for row in rows:
                    report.rows += 1
                    if _check_row(report, table, row, order) and not row[4]:  # dont_filter: not in the seen set
                        keys[key64(bytes(row[5]))] = row[0]
                unseen = conn.execute(_UNSEEN, (list(keys),)).fetchall()
                for (key,) in unseen[:_SHOWN]:
                    report.add(f"{table} row {keys[key]}", "is a request whose key the seen set does not hold")
                if len(unseen) > _SHOWN:
                    report.add(table, f"{len(unseen) - _SHOWN} more rows hold requests the seen set does not hold")
        counters = dict(conn.execute(_COUNTERS).fetchall())
        for name, value in counters.items():
            if not (math.isfinite(value) and value >= 0 and value == int(value)):
                report.add(f"counters {name}", f"adds up to {value!r}, not a count")
        stored = conn.execute("SELECT count(*) FROM failed").fetchone()[0]
        failed = counters.get("failed", 0.0)
        if failed != stored:
            report.add("counters failed", f"is {failed:g}, and the failed table holds {stored} rows")
        keys = conn.execute("SELECT count(*) FROM seen").fetchone()[0]
        added = counters.get("seen", 0.0)
        if added != keys:
            report.add("seen", f"holds {keys} keys, and the seen counter says {added:g} were added")
    return report


def _check_hosts(conn: Any, report: PostgresReport) -> None:
    """Each host's settings and counts hold values a client writes."""
    for name, *values in conn.execute(_HOST_VALUES).fetchall():
        for column, value in zip(_HOST_COLUMNS, values, strict=True):
            if value is None and column in ("delay", "blocked_until", "budget"):
                continue
            top = math.inf if column == "blocked_until" else 2**63
            if value is None or not (0 <= value < top or (column == "blocked_until" and value == math.inf)):
                report.add(f"hosts row {name} {column}", f"is {value!r}, not a value diskfrontier stores")


def _check_robots(conn: Any, report: PostgresReport) -> None:
    """Each robots.txt kept is one a client could store."""
    for host, status, size, fetched_at in conn.execute(
            "SELECT host, status, octet_length(body), fetched_at FROM robots ORDER BY host").fetchall():
        if not (0 <= status <= 999 and size <= MAX_ROBOTS and math.isfinite(fetched_at) and fetched_at >= 0):
            report.add(f"robots row {host}", f"holds status {status}, {size} bytes fetched at {fetched_at!r}: not a "
                                             f"robots.txt diskfrontier stores")


def _check_row(report: PostgresReport, table: str, row: tuple[Any, ...], order: str) -> bool:
    """Check one stored request; whether it holds one (its key is then checked against the seen set)."""
    row_id, host, *fields, rank = row
    if host is None:
        report.add(f"{table} row {row_id}", "names a host the hosts table does not hold")
        return False
    try:
        decode(table, row_id, host, *fields)
    except CrawlDamaged as exc:
        report.add(exc.key, exc.problem)
        return False
    if rank is not None and table == "requests" and rank != (-row_id if order == "fifo" else row_id):
        report.add(f"{table} row {row_id}", f"has rank {rank}, not the {order} rank of its id")
    return True
