"""``verify --repair`` of a PostgreSQL crawl: what its rows tell is written again, in one transaction that
locks the crawl's tables against every client's writes (stop the clients first: their calls wait meanwhile).

The rows of ``requests``, ``waiting``, ``leases`` and ``failed`` are the crawl's truth (``verify.py``). From them
repair sets each host's counts (``ready_n``, ``waiting_n``, ``in_flight``) and its best ready request
(``top_priority``, ``top_rank``), each ready request's rank (its id, or minus it in a FIFO crawl) and the
``failed`` counter. What the rows cannot tell is left as it is and named: a row whose record does not decode
or whose host is gone, a ``meta`` table without a format or an order this version reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .connection import Database
from .schema import ORDERS

_TABLES = ("hosts", "requests", "waiting", "leases", "failed", "counters")
_COUNTS = ("UPDATE hosts h SET ready_n = c.ready, waiting_n = c.waiting, in_flight = c.leased FROM ("
           "SELECT x.id, (SELECT count(*) FROM requests q WHERE q.host = x.id) AS ready, "
           "(SELECT count(*) FROM waiting w WHERE w.host = x.id) AS waiting, "
           "(SELECT count(*) FROM leases l WHERE l.host = x.id) AS leased FROM hosts x) c "
           "WHERE h.id = c.id "
           "AND (h.ready_n, h.waiting_n, h.in_flight) IS DISTINCT FROM (c.ready, c.waiting, c.leased)")
_RANKS = {"lifo": "UPDATE requests SET rank = id WHERE rank <> id",
          "fifo": "UPDATE requests SET rank = -id WHERE rank <> -id"}
_TOPS = ("UPDATE hosts h SET top_priority = coalesce(b.priority, 0), top_rank = coalesce(b.rank, 0) FROM hosts x "
         "LEFT JOIN LATERAL (SELECT q.priority, q.rank FROM requests q WHERE q.host = x.id "
         "ORDER BY q.priority DESC, q.rank DESC LIMIT 1) b ON true "
         "WHERE h.id = x.id AND (h.top_priority, h.top_rank) IS DISTINCT FROM (coalesce(b.priority, 0), "
         "coalesce(b.rank, 0))")


@dataclass
class Repaired:
    """What ``repair_crawl`` wrote: how many rows of each kind it set again."""

    hosts_counted: int = 0
    hosts_topped: int = 0
    ranks: int = 0
    counters: int = 0
    notes: list[str] = field(default_factory=list)


def repair_crawl(url: str, crawl: str) -> Repaired:
    """Set again what the rows of crawl ``crawl`` at ``url`` tell (the crawl must exist; stop its clients first)."""
    db = Database(url, crawl, size=2)
    try:
        return db.call("verify --repair", _repair, retry=False)
    finally:
        db.close()


def _repair(conn: Any) -> Repaired:
    done = Repaired()
    with conn.transaction():
        conn.execute(f"LOCK TABLE {', '.join(_TABLES)} IN EXCLUSIVE MODE")
        order = conn.execute("SELECT value FROM meta WHERE name = 'order'").fetchone()
        if order is None or order[0] not in ORDERS:
            done.notes.append("the meta table holds no order this version reads ('lifo' or 'fifo'): the ranks of "
                              "the ready requests were left as they are")
        else:
            done.ranks = conn.execute(_RANKS[order[0]]).rowcount
        done.hosts_counted = conn.execute(_COUNTS).rowcount
        done.hosts_topped = conn.execute(_TOPS).rowcount
        stored = int(conn.execute("SELECT count(*) FROM failed").fetchone()[0])
        counted = conn.execute("SELECT coalesce(sum(value), 0) FROM counters WHERE name = 'failed'").fetchone()[0]
        if int(counted) != stored:
            conn.execute("DELETE FROM counters WHERE name = 'failed'")
            conn.execute("INSERT INTO counters (name, part, value) VALUES ('failed', 0, %s)", (float(stored),))
            done.counters += 1
    return done
