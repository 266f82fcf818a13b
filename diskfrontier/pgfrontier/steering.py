"""``Steering``: pause and resume (the ``meta`` row ``paused_since``, which every client's pops read), ``drop``
(pending requests removed page by page while clients pop and push), and deleting the whole crawl."""

from __future__ import annotations

import re

from ..contract.values import Dropped
from .records import decode
from .state import Shared

_PAGE = ("SELECT q.id, h.name, q.priority, q.attempts, q.dont_filter, q.fingerprint, q.not_before, q.record "
         "FROM {} q JOIN hosts h ON h.id = q.host WHERE q.id > %s AND (%s::text IS NULL OR h.name = %s::text) "
         "ORDER BY q.id LIMIT 1000")


class Steering:
    """The steering of one client's crawl."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def set_paused(self, on: bool) -> None:
        self.shared.db.value("pause" if on else "resume", "SELECT set_paused(%s)", [on])
        self.shared.signal()

    def drop(self, host: str | None, pattern: re.Pattern[str] | None, dry_run: bool, show: int) -> Dropped:
        """Remove the pending requests of ``host`` or whose URL ``pattern`` finds. Those waiting for a time are
        read first, then those ready (a request whose time comes meanwhile moves from the first to the second)."""
        db = self.shared.db
        from psycopg import sql

        count, urls = 0, list[str]()
        decode_all = pattern is not None
        for table in ("waiting", "requests"):
            last = -(2**63)
            while True:
                rows = db.rows("drop", sql.SQL(_PAGE).format(sql.Identifier(table)), [last, host, host])
                if not rows:
                    break
                last = rows[-1][0]
                chosen = []
                for row in rows:
                    url = decode(table, *row).url if decode_all or len(urls) < show else None
                    if pattern is not None and url is not None and not pattern.search(url):
                        continue
                    chosen.append(row[0])
                    if url is not None and len(urls) < show:
                        urls.append(url)
                if dry_run:
                    count += len(chosen)
                elif chosen:
                    count += int(db.value("drop", "SELECT drop_ids(%s::bigint[])", [chosen]))
        return Dropped(count, urls)

    def drop_crawl(self) -> int:
        """Drop the crawl's schema; how many tables and sequences it held."""
        from psycopg import sql

        db = self.shared.db
        schema = db.schema

        def step(conn: object) -> int:
            with conn.transaction():  # type: ignore[attr-defined]
                found = conn.execute(  # type: ignore[attr-defined]
                    "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s AND c.relkind IN ('r', 'S')", [schema]).fetchone()[0]
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))  # type: ignore[attr-defined]
            return int(found)

        return db.call("drop_crawl", step)
