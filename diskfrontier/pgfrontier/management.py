"""The crawls of one PostgreSQL database and their clients, seen from outside: what ``diskfrontier crawls``,
``clients`` and ``release`` work on, in the terms of the Redis backend's ``management`` (the same summaries,
client rows and answers).

A crawl is a schema ``df_<NAME>`` whose ``meta`` table holds a format; it is summed up from its hosts' counts,
its counters and the clients that are live, and its size is that of its tables and indexes on disk
(``pg_total_relation_size``). A crawl's clients are the rows of its ``clients`` table (each client writes its
row at open and again with every lease renewal: its host, pid, lease and beat) and the owners of its leases.
A client is live while it was seen within two beats of its renewal thread (a client without one: its lease);
one that holds leases but has no row is live while one of its leases has not run out. ``release`` gives
leases back at once, at their places, counted in ``reclaimed``, as when a lease runs out (the ``reclaim``
step); a late ``done`` of one raises ``LeaseExpired``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from ..core.errors import FrontierError
from ..redisfrontier.management import (
    CLIENT_ID,
    ClientInfo,
    ClientLive,
    CrawlSummary,
    Released,
    _live_for,
    _live_message,
)
from .connection import SCHEMA_PREFIX, PostgresUnavailable, _psycopg, check_crawl_name, schema_of, shown_url
from .schema import FORMAT

_BATCH = 1000  # leases a release gives back in one transaction
_T = TypeVar("_T")
_CRAWLS = ("SELECT n.nspname FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = 'meta' "
           "AND c.relkind = 'r' WHERE n.nspname LIKE 'df\\_%' ORDER BY n.nspname")
_NOW = "SELECT extract(epoch FROM clock_timestamp())::float8"


def _talk(url: str, what: str, step: Callable[[Any], _T]) -> _T:
    """``step(connection)`` on a connection of its own to ``url`` (autocommit), the server's errors as
    ``FrontierError``s naming ``what``."""
    psycopg, _pool = _psycopg()
    try:
        conn = psycopg.connect(url, connect_timeout=10, autocommit=True)
    except psycopg.ProgrammingError as exc:
        raise FrontierError(f"{shown_url(url)} is not a usable PostgreSQL URL ({_first_line(exc)}); write "
                            f"postgresql://user@host:5432/database") from None
    except psycopg.OperationalError as exc:
        raise PostgresUnavailable(f"{what}: the PostgreSQL server at {shown_url(url)} cannot be reached, or refused "
                                  f"the connection ({_first_line(exc)})") from None
    try:
        with conn:
            return step(conn)
    except psycopg.OperationalError as exc:
        raise PostgresUnavailable(f"{what}: the connection to the PostgreSQL server at {shown_url(url)} was lost "
                                  f"({_first_line(exc)})") from None
    except psycopg.Error as exc:
        raise FrontierError(f"{what}: PostgreSQL refused the call: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _in_schema(conn: Any, crawl: str) -> None:
    """Point ``conn`` at crawl ``crawl``'s schema."""
    from psycopg import sql

    conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema_of(crawl))))


def crawl_names(url: str) -> list[str]:
    """The names of the crawls in the PostgreSQL database at ``url``, sorted."""
    return _talk(url, "crawls", lambda conn: [row[0][len(SCHEMA_PREFIX):] for row in conn.execute(_CRAWLS)])


def summaries(url: str, *, memory: bool = True) -> list[CrawlSummary]:
    """A ``CrawlSummary`` of every crawl in the database at ``url``; ``memory``: the bytes its tables and indexes
    take on the server's disk (None with ``memory=False``)."""

    def step(conn: Any) -> list[CrawlSummary]:
        found = []
        for (schema,) in conn.execute(_CRAWLS).fetchall():
            name = schema[len(SCHEMA_PREFIX):]
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                _in_schema(conn, name)
                found.append(_summary(conn, name, schema, memory))
        return found

    return _talk(url, "crawls", step)


def _summary(conn: Any, name: str, schema: str, memory: bool) -> CrawlSummary:
    pending, in_flight = conn.execute(
        "SELECT coalesce(sum(ready_n + waiting_n), 0), coalesce(sum(in_flight), 0) FROM hosts").fetchone()
    counters = dict(conn.execute("SELECT name, sum(value) FROM counters WHERE name IN ('done', 'failed', 'seen') "
                                 "GROUP BY name").fetchall())
    paused = conn.execute("SELECT value FROM meta WHERE name = 'paused_since'").fetchone()
    live = sum(1 for client in _client_list(conn) if client.live)
    used = None
    if memory:
        used = int(conn.execute("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN "
                                "pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN "
                                "('r', 'S')", (schema,)).fetchone()[0])
    return CrawlSummary(name=name, pending=int(pending), in_flight=int(in_flight),
                        done=int(counters.get("done") or 0), failed=int(counters.get("failed") or 0),
                        seen=int(counters.get("seen") or 0), clients=live, memory=used,
                        paused=paused is not None and paused[0] is not None)


def clients(url: str, crawl: str) -> list[ClientInfo]:
    """Every client of crawl ``crawl`` at ``url``: live ones first, then by host, pid and id."""
    def step(conn: Any) -> list[ClientInfo]:
        _open(conn, url, crawl)
        return _client_list(conn)

    return _talk(url, "clients", step)


def release(url: str, crawl: str, *, client: str | None = None, expired: bool = False,
            force: bool = False) -> Released:
    """Give leases of crawl ``crawl`` back now: every lease of ``client`` or, with ``expired``, every lease that has
    run out (exactly one of the two), as ``RedisFrontier``'s ``management.release`` does: the requests are pending
    again at their places and counted in ``reclaimed``; a live client is refused (``ClientLive``) unless ``force``.
    Works in transactions of at most 1,000 leases each."""
    if (client is None) == (not expired):
        raise ValueError("release takes a client or expired=True, not both and not neither")
    if client is not None and (not isinstance(client, str) or not CLIENT_ID.match(client)):
        raise ValueError(f"{client!r} is not a client id (<hex>-<pid>, as 'diskfrontier clients' lists them)")

    def step(conn: Any) -> Released:
        fifo = _open(conn, url, crawl)
        if client is None:
            total, step_count = 0, _BATCH
            while step_count == _BATCH:
                step_count = int(conn.execute("SELECT reclaim(%s, %s)", (fifo, _BATCH)).fetchone()[0])
                total += step_count
            return Released(crawl, None, total, False)
        known = next((c for c in _client_list(conn) if c.client == client), None)
        if known is None:
            raise FrontierError(f"crawl {crawl!r} has no client {client!r} (none by that id is registered or holds "
                                f"a lease); 'diskfrontier clients {shown_url(url)} --crawl {crawl}' lists them")
        if known.live and not force:
            raise ClientLive(_live_message(known, url, crawl))
        count = 0
        while True:
            with conn.transaction():  # the client's leases run out now, and the reclaim step takes them first
                marked = conn.execute(
                    "UPDATE leases SET expires = '-Infinity' WHERE id IN (SELECT id FROM leases WHERE client = %s "
                    "ORDER BY id LIMIT %s FOR UPDATE) RETURNING 1", (client, _BATCH)).fetchall()
                if marked:
                    count += int(conn.execute("SELECT reclaim(%s, %s)", (fifo, len(marked))).fetchone()[0])
            if len(marked) < _BATCH:
                break
        if not known.live:
            conn.execute("DELETE FROM clients WHERE id = %s", (client,))
        return Released(crawl, client, count, known.live)

    return _talk(url, "release", step)


def _open(conn: Any, url: str, crawl: str) -> bool:
    """Point ``conn`` at crawl ``crawl``, which must be there in a format this version reads; whether it is FIFO."""
    check_crawl_name(crawl)
    schema = schema_of(crawl)
    if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None:
        raise FrontierError(f"there is no crawl {crawl!r} at {shown_url(url)} (no schema {schema}); 'diskfrontier "
                            f"crawls {shown_url(url)}' lists them")
    _in_schema(conn, crawl)
    meta = dict(conn.execute("SELECT name, value FROM meta WHERE name IN ('format', 'order')").fetchall())
    version = meta.get("format")
    if not isinstance(version, int) or not 1 <= version <= FORMAT:
        raise FrontierError(f"crawl {crawl!r} at {shown_url(url)} is of format {version!r}; this version of "
                            f"diskfrontier reads formats 1 to {FORMAT}")
    return meta.get("order") == "fifo"


def _client_list(conn: Any) -> list[ClientInfo]:
    """Every client of the crawl ``conn`` points at: its ``clients`` rows, then the owners of leases without one."""
    now = float(conn.execute(_NOW).fetchone()[0])
    owners = {client: (int(n), float(latest)) for client, n, latest in conn.execute(
        "SELECT client, count(*), max(expires) FROM leases GROUP BY client").fetchall()}
    found = []
    for client, info, seen_at in conn.execute("SELECT id, info, seen_at FROM clients").fetchall():
        entry = info if isinstance(info, dict) else _entry(info)
        lease, beat = _real(entry.get("lease")), _real(entry.get("beat"))
        pid, host = entry.get("pid"), entry.get("host")
        seen = float(seen_at)
        found.append(ClientInfo(
            client=client, host=host if isinstance(host, str) else None,
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None, lease=lease, started=None,
            last_seen=seen, seen_ago=max(0.0, now - seen), leases=owners.get(client, (0, 0.0))[0],
            live=lease is not None and now - seen < _live_for(lease, beat)))
    registered = {c.client for c in found}
    for client, (count, latest) in owners.items():
        if client not in registered:
            pid_text = client.rpartition("-")[2]
            found.append(ClientInfo(client=client, host=None, pid=int(pid_text) if pid_text.isdigit() else None,
                                    lease=None, started=None, last_seen=None, seen_ago=None, leases=count,
                                    live=latest > now))
    found.sort(key=lambda c: (not c.live, c.host or "", c.pid or 0, c.client))
    return found


def _entry(raw: Any) -> dict[str, Any]:
    try:
        entry = json.loads(raw) if isinstance(raw, (str, bytes)) else {}
    except ValueError:
        return {}
    return entry if isinstance(entry, dict) else {}


def _real(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
