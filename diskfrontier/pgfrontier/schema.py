"""A crawl's schema made, checked and upgraded: one function, ``install``, run by every open (and by
``diskfrontier upgrade``). The schema ``df_<crawl>`` holds the tables of ``sql/tables.sql`` and the functions of
the other files; its ``meta`` table says its format. A crawl of a later format than this version reads is
refused with ``FormatError``; one of this format whose functions were installed from other text (another
version of diskfrontier of the same format), or whose functions were dropped or changed since, has them dropped and
this version's installed, in one transaction that also holds the crawl's advisory lock, so that two clients opening
at once make or upgrade it once. A crawl whose tables or ``meta`` rows were dropped or changed is refused with
``CrawlDamaged`` (``integrity.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import CrawlDamaged, FormatError, FrontierError
from . import integrity, sql
from .connection import Database, shown_url

FORMAT = 2
"""The format of a crawl's tables this version makes and reads (2: ``counters`` rows are inserted, never
changed; a crawl of format 1 is brought to 2 at open, ``_upgrade``)."""
ORDERS = ("lifo", "fifo")


@dataclass(frozen=True)
class Settings:
    """The crawl settings an open asks for (None: keep the crawl's)."""

    order: str | None = None
    delay: float | None = None
    per_host: int | None = None
    new_order: str = "lifo"
    create: bool = True


@dataclass(frozen=True)
class Opened:
    """A crawl as an open found it (or made it)."""

    order: str
    delay: float
    per_host: int
    made: bool


def install(db: Database, asked: Settings) -> Opened:
    """Make the crawl of ``db`` if it is not there (unless ``asked.create`` is False), check its format, install
    this version's functions if they differ, and apply the settings ``asked`` gives."""
    return db.call("open", lambda conn: _install(conn, db, asked))


def _install(conn: Any, db: Database, asked: Settings) -> Opened:
    from psycopg import sql as psql

    schema = psql.Identifier(db.schema)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"diskfrontier {db.schema}",))
        made = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (db.schema,)).fetchone() is None
        if made:
            if not asked.create:
                raise FrontierError(f"there is no crawl {db.crawl!r} at {shown_url(db.url)} (no schema {db.schema})")
            conn.execute(psql.SQL("CREATE SCHEMA {}").format(schema))
            conn.execute(psql.SQL("SET LOCAL search_path TO {}, public").format(schema))
            conn.execute(sql.read(sql.TABLES))
            order = asked.order or asked.new_order
            conn.execute("INSERT INTO meta (name, value) VALUES ('format', %s), ('order', %s), ('delay', '0'), "
                         "('per_host', '0'), ('paused_since', 'null'), ('code', '\"\"'), "
                         "('made_at', to_jsonb(extract(epoch FROM clock_timestamp())::float8))",
                         (_json(FORMAT), _json(order)))
        gone = integrity.missing_relations(conn, db.schema)
        if gone:
            raise CrawlDamaged(db.schema, f"its {', '.join(gone)} {'are' if len(gone) > 1 else 'is'} gone",
                               hint=integrity.HINT)
        meta = dict(conn.execute(psql.SQL("SELECT name, value FROM {}.meta").format(schema)).fetchall())
        found = meta.get("format")
        if not isinstance(found, int) or found < 1:
            raise FormatError(f"crawl {db.crawl!r} at {shown_url(db.url)}: its meta table holds no format "
                              f"({found!r}): it was not made by diskfrontier, or was damaged")
        if found > FORMAT:
            raise FormatError(f"crawl {db.crawl!r} at {shown_url(db.url)} is of format {found}, made by a later "
                              f"version of diskfrontier; this version reads up to format {FORMAT}: upgrade "
                              f"diskfrontier (pip install -U 'diskfrontier[postgres]')")
        if found < FORMAT:
            _upgrade(conn, schema, found)
        wrong = integrity.meta_problems(meta)
        if wrong:
            name, problem = wrong[0]
            raise CrawlDamaged(f"{db.schema}.meta {name}", problem, hint=integrity.HINT)
        if meta.get("code") != sql.code_version() or integrity.changed_functions(conn, db.schema):
            conn.execute(psql.SQL("SET LOCAL search_path TO {}, public").format(schema))
            integrity.install_functions(conn, db.schema)
            conn.execute(psql.SQL("UPDATE {}.meta SET value = %s WHERE name = 'code'").format(schema),
                         (_json(sql.code_version()),))
        order = str(meta.get("order"))
        if order not in ORDERS:
            raise FormatError(f"crawl {db.crawl!r} at {shown_url(db.url)}: its order is {order!r}, not lifo or fifo")
        if asked.order is not None and asked.order != order and not made:
            raise ValueError(f"crawl {db.crawl!r} is {order}: its order is fixed when it is made (got order="
                             f"{asked.order!r})")
        changes = {"delay": asked.delay, "per_host": asked.per_host}
        for name, value in changes.items():
            if value is not None:
                conn.execute(psql.SQL("UPDATE {}.meta SET value = %s WHERE name = %s").format(schema),
                             (_json(value), name))
                meta[name] = value
    return Opened(order, float(meta.get("delay") or 0.0), int(meta.get("per_host") or 0), made)


def _upgrade(conn: Any, schema: Any, found: int) -> None:
    """Bring a crawl's tables from format ``found`` to ``FORMAT`` (in the open's transaction, under its lock)."""
    from psycopg import sql as psql

    if found < 2:  # 1 -> 2: counters take a row a step, so their key goes
        conn.execute(psql.SQL("ALTER TABLE {}.counters DROP CONSTRAINT IF EXISTS counters_pkey").format(schema))
    conn.execute(psql.SQL("UPDATE {}.meta SET value = %s WHERE name = 'format'").format(schema), (_json(FORMAT),))


def _json(value: Any) -> Any:
    from psycopg.types.json import Jsonb

    return Jsonb(value)
