"""A crawl that appears only whole: ``copy`` builds a PostgreSQL crawl under a name of its own (its build,
``<NAME>.diskfrontier-copy``) and renames the build's schema to the crawl's in one transaction at the end, as a
job directory is built in a hidden folder and renamed.

A copy stopped at any point (an error, Ctrl-C, kill -9) leaves no crawl NAME, only its build, which the next copy
to NAME deletes before it starts again. The rename holds the crawl's advisory lock (the one an open takes to make
a crawl), so that a client opening NAME at that moment either made it before (then it must be empty, and is
replaced) or finds the copy. The functions of a crawl name no schema (every connection's search path is its
crawl's), so they work unchanged under the new name.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..core.errors import FrontierError
from .connection import Database, check_crawl_name, schema_of, shown_url

SUFFIX = ".diskfrontier-copy"
_KEEP = 25  # characters of a long crawl name a build's name keeps


def build_name(crawl: str) -> str:
    """The name of the crawl in which a copy to crawl ``crawl`` is built."""
    check_crawl_name(crawl)
    name = crawl + SUFFIX
    if len(name) <= 60:
        return name
    digest = hashlib.sha1(crawl.encode(), usedforsecurity=False).hexdigest()[:16]
    return f"{crawl[:_KEEP]}-{digest}{SUFFIX}"


def exists(url: str, crawl: str) -> bool:
    """Whether the crawl ``crawl`` (its schema) is in the database at ``url``."""
    db = Database(url, crawl, size=2)
    try:
        return bool(db.value("copy", "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s)",
                             [schema_of(crawl)], retry=False))
    finally:
        db.close()


def drop(url: str, crawl: str) -> bool:
    """Drop the crawl ``crawl``'s schema if it is there; whether it was."""
    from psycopg import sql

    db = Database(url, crawl, size=2)

    def step(conn: Any) -> bool:
        with conn.transaction():
            found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (db.schema,)).fetchone()
            if found is not None:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(db.schema)))
        return found is not None

    try:
        return db.call("copy", step, retry=False)
    finally:
        db.close()


def check_empty(url: str, crawl: str, order: str, where: str) -> None:
    """FrontierError unless crawl ``crawl`` is absent, or holds nothing and has the order ``order``."""
    db = Database(url, crawl, size=2)
    try:
        db.call("copy", lambda conn: _check_empty(conn, db, order, where), retry=False)
    finally:
        db.close()


def _check_empty(conn: Any, db: Database, order: str, where: str) -> None:
    if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (db.schema,)).fetchone() is None:
        return
    held = conn.execute("SELECT (SELECT count(*) FROM hosts), (SELECT count(*) FROM seen), "
                        "(SELECT count(*) FROM failed), (SELECT value #>> '{}' FROM meta WHERE name = 'order')"
                        ).fetchone()
    hosts, seen, failed, found_order = held
    if hosts or seen or failed:
        raise FrontierError(f"{where} is not empty ({hosts:,} hosts, {seen:,} seen, {failed:,} failed); copy into a "
                            f"new crawl name, or delete this one first (diskfrontier delete URL --crawl NAME)")
    if found_order != order:
        raise FrontierError(f"{where} exists (empty) and is {str(found_order).upper()}, and the source is "
                            f"{order.upper()}: copy into a new crawl name")


def move_into_place(url: str, build: str, crawl: str, order: str, where: str) -> None:
    """Rename the build ``build`` to crawl ``crawl`` in one transaction (an empty crawl ``crawl`` there, made by an
    open meanwhile, is replaced; one that holds anything is refused)."""
    from psycopg import sql

    db = Database(url, crawl, size=2)

    def step(conn: Any) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"diskfrontier {db.schema}",))
            conn.execute(sql.SQL("SET LOCAL search_path TO {}, public").format(sql.Identifier(db.schema)))
            _check_empty(conn, db, order, where)
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(db.schema)))
            conn.execute(sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(sql.Identifier(schema_of(build)),
                                                                        sql.Identifier(db.schema)))

    try:
        db.call("copy", step, retry=False)
    except FrontierError as exc:
        raise FrontierError(f"{exc} (moving the copy into place at {shown_url(url)})") from None
    finally:
        db.close()
