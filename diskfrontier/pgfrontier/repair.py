"""``verify --repair`` of a PostgreSQL crawl: what its rows tell is written again, in one transaction that
locks the crawl's tables against every client's writes (stop the clients first: their calls wait meanwhile).

The rows of ``requests``, ``waiting``, ``leases`` and ``failed`` are the crawl's truth (``verify.py``). From them
repair sets each host's counts (``ready_n``, ``waiting_n``, ``in_flight``) and its best ready request
(``top_priority``, ``top_rank``), each ready request's rank (its id, or minus it in a FIFO crawl) and the
``failed`` counter; it adds to the seen set the key of every stored request it lacks, sets the ``seen`` counter
to the keys held, installs this version's functions again if they were dropped or changed, writes the ``meta``
rows a step reads that are missing or wrong (``integrity.py``), and clears host settings and robots.txt entries
no client writes. What the rows cannot bring back is said in a note beginning "could not bring back": requests
a host's row counted whose rows are gone, failed requests the counter counted, seen keys the counter counted
(their URLs are not duplicates any more), a ``meta`` setting. What the rows cannot tell is left as it is and
named: a row whose record does not decode or whose host is gone, a ``meta`` table without a format or an order
this version reads, a table that is gone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..contract.checks import MAX_ROBOTS
from ..redisfrontier.seen import key64
from . import integrity
from .connection import Database
from .schema import ORDERS

_TABLES = ("meta", "hosts", "requests", "waiting", "leases", "failed", "counters", "seen", "robots")
_LOST = ("SELECT h.name, (h.ready_n + h.waiting_n + h.in_flight) - ((SELECT count(*) FROM requests q WHERE q.host = "
         "h.id) + (SELECT count(*) FROM waiting w WHERE w.host = h.id) + (SELECT count(*) FROM leases l WHERE l.host "
         "= h.id)) FROM hosts h ORDER BY h.name")
_FINGERPRINTS = ("SELECT {key}, fingerprint FROM {table} WHERE {key} > %s AND NOT dont_filter ORDER BY {key} "
                 "LIMIT 1000")  # a dont_filter request's key is not in the seen set
_SETTINGS = {  # a host setting no client writes: cleared (its count: 0)
    "delay": "UPDATE hosts SET delay = NULL WHERE NOT (delay >= 0 AND delay < 'Infinity') RETURNING name",
    "blocked_until": "UPDATE hosts SET blocked_until = NULL WHERE NOT (blocked_until >= 0) RETURNING name",
    "budget": "UPDATE hosts SET budget = NULL WHERE budget < 0 RETURNING name",
    "done": "UPDATE hosts SET done = 0 WHERE done < 0 RETURNING name",
    "failures": "UPDATE hosts SET failures = 0 WHERE failures < 0 RETURNING name",
    "last_out": "UPDATE hosts SET last_out = 0 WHERE NOT (last_out >= 0 AND last_out < 'Infinity') RETURNING name"}
_ROBOTS = ("DELETE FROM robots WHERE NOT (status BETWEEN 0 AND 999 AND octet_length(body) <= %s "
           "AND fetched_at >= 0 AND fetched_at < 'Infinity')")
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
        return db.call("verify --repair", lambda conn: _repair(conn, db), retry=False)
    finally:
        db.close()


def _repair(conn: Any, db: Database) -> Repaired:
    done = Repaired()
    with conn.transaction():
        conn.execute(f"LOCK TABLE {', '.join(_TABLES)} IN EXCLUSIVE MODE")
        _meta(conn, done)
        if integrity.changed_functions(conn, db.schema):
            integrity.install_functions(conn, db.schema)
            done.notes.append("the crawl's functions were dropped or changed: this version's were installed again")
        _settings(conn, done)
        for name, _upcoming, highest in integrity.sequences_behind(conn):
            conn.execute("SELECT setval(%s, %s)", (name, highest))
            done.notes.append(f"the sequence {name} was set back: set to {highest}, the highest number its rows hold")
        woken = conn.execute("UPDATE waiting SET due = not_before WHERE due < not_before").rowcount
        if woken:
            done.notes.append(f"{woken} requests waiting for a time were due before their not_before: set to it")
        for name, lost in conn.execute(_LOST).fetchall():
            if lost > 0:
                done.notes.append(f"could not bring back {lost} requests of host {name}: its row counted them, and "
                                  f"their rows are gone")
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
        _recount(conn, done, "failed", counted, stored, "failed requests: the failed counter counted them, and "
                 "their rows are gone")
        _seen(conn, done)
        for name, value in conn.execute("SELECT name, sum(value) FROM counters GROUP BY name").fetchall():
            if not (math.isfinite(value) and value >= 0 and value == int(value)):
                done.notes.append(f"could not bring back the counter {name}: it added up to {value!r}; set to 0")
                _set_counter(conn, name, 0)
                done.counters += 1
    return done


def _recount(conn: Any, done: Repaired, name: str, counted: float, held: int, lost: str) -> None:
    """The counter ``name`` set to ``held`` (what the rows hold) if it counted ``counted``; more counted than held is
    noted as ``lost`` things that could not be brought back."""
    if counted == held:
        return
    if counted > held:
        done.notes.append(f"could not bring back {int(counted) - held} {lost}")
    _set_counter(conn, name, held)
    done.counters += 1


def _set_counter(conn: Any, name: str, value: int) -> None:
    conn.execute("DELETE FROM counters WHERE name = %s", (name,))
    conn.execute("INSERT INTO counters (name, part, value) VALUES (%s, 0, %s)", (name, float(value)))


def _meta(conn: Any, done: Repaired) -> None:
    """The ``meta`` rows a step reads, written again where missing or wrong."""
    from psycopg.types.json import Jsonb

    meta = dict(conn.execute("SELECT name, value FROM meta").fetchall())
    for name, problem in integrity.meta_problems(meta):
        value = integrity.META_DEFAULTS[name]
        conn.execute("DELETE FROM meta WHERE name = %s", (name,))
        conn.execute("INSERT INTO meta (name, value) VALUES (%s, %s)", (name, Jsonb(value)))
        if name != "code":
            done.notes.append(f"could not bring back meta {name}: it {problem}; set to {value!r} (set it again)")


def _settings(conn: Any, done: Repaired) -> None:
    """Host settings and robots.txt entries no client writes, cleared."""
    for column, statement in _SETTINGS.items():
        names = [row[0] for row in conn.execute(statement).fetchall()]
        if names:
            done.notes.append(f"could not bring back the {column} of host(s) {', '.join(names[:5])}: it was not a "
                              f"value diskfrontier stores, and was cleared")
    gone = conn.execute(_ROBOTS, (MAX_ROBOTS,)).rowcount
    if gone:
        done.notes.append(f"{gone} robots.txt entries no client stores were removed: they are fetched again")


def _seen(conn: Any, done: Repaired) -> None:
    """The key of every stored request added to the seen set if keys were lost (the set holds fewer than the
    ``seen`` counter counted; else a request whose key it lacks is one copied from elsewhere, and is left for
    verify to name); the ``seen`` counter set to the keys held."""
    from psycopg import sql as psql

    held = int(conn.execute("SELECT count(*) FROM seen").fetchone()[0])
    counted = conn.execute("SELECT coalesce(sum(value), 0) FROM counters WHERE name = 'seen'").fetchone()[0]
    added = 0
    for table, key in (("requests", "id"), ("waiting", "id"), ("leases", "id"), ("failed", "seq")):
        if counted <= held:  # no key was lost: a request whose key is not held is not this crawl's (left named)
            break
        query = psql.SQL(_FINGERPRINTS).format(key=psql.Identifier(key), table=psql.Identifier(table))
        last = -(2**63)
        while rows := conn.execute(query, (last,)).fetchall():
            last = rows[-1][0]
            keys = sorted({key64(bytes(fingerprint)) for _id, fingerprint in rows if fingerprint})
            added += conn.execute("INSERT INTO seen (key) SELECT unnest(%s::bigint[]) ON CONFLICT DO NOTHING",
                                  (keys,)).rowcount
    if added:
        done.notes.append(f"{added} keys of stored requests were added to the seen set")
    held += added
    _recount(conn, done, "seen", counted, held, "keys of the seen set: the seen counter counted them, and they "
             "are gone (their URLs are not duplicates any more)")
