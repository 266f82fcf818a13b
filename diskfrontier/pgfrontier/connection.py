"""Connecting to PostgreSQL: the crawl's name and schema, a pool of connections whose search path is the
crawl's schema, and every call through ``Database.call``, which turns the server's errors into
``FrontierError``s and tries a call again when its connection was lost (a server restart) or it was chosen
as a deadlock's victim (its transaction was rolled back: nothing of it was applied)."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ..core.errors import CrawlDamaged, FrontierClosed, FrontierError

log = logging.getLogger("diskfrontier")

CRAWL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,60}\Z")  # df_ and 60 characters: within PostgreSQL's 63 bytes
SCHEMA_PREFIX = "df_"
DAMAGED = "DF001"  # the SQLSTATE a step raises when the crawl's tables disagree with each other
_RETRY_FOR = 60.0  # seconds a call is tried again while its server cannot be reached
_T = TypeVar("_T")


class PostgresUnavailable(FrontierError):
    """The PostgreSQL server could not be reached for long enough that the call gave up.

    A push, pop or done that raised this may or may not have been applied; nothing acknowledged before is lost
    (each call commits before it returns), and a pop that was applied comes back when its lease runs out.
    """


def is_postgres_url(target: Any) -> bool:
    """True if ``target`` names a PostgreSQL server (``postgresql://`` or ``postgres://``)."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def check_crawl_name(crawl: Any) -> str:
    """``crawl`` if it is a valid crawl name, else ``ValueError``."""
    if not isinstance(crawl, str) or not CRAWL_NAME.match(crawl):
        raise ValueError(f"crawl must be 1 to 60 letters, digits or '_.:-', got {crawl!r}")
    return crawl


def schema_of(crawl: str) -> str:
    """The schema that holds the crawl ``crawl``'s tables."""
    return SCHEMA_PREFIX + crawl


def shown_url(url: str) -> str:
    """``url`` without its password, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<an unreadable URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise FrontierError("the PostgreSQL backend needs psycopg and psycopg-pool: "
                            "pip install 'diskfrontier[postgres]'") from None
    return psycopg, psycopg_pool


class Database:
    """A pool of up to ``size`` connections to ``url``, each with the crawl's schema as its search path and in
    autocommit (each step is one function call: one transaction)."""

    def __init__(self, url: str, crawl: str, *, size: int = 10, retry_for: float = _RETRY_FOR) -> None:
        psycopg, psycopg_pool = _psycopg()
        self.url, self.crawl, self.retry_for = url, crawl, retry_for
        self.schema = schema_of(crawl)
        self._errors = psycopg.errors
        self._lost = (psycopg.OperationalError, psycopg_pool.PoolTimeout)
        self._closed = psycopg_pool.PoolClosed  # an OperationalError too: never tried again
        self._calls = threading.local()  # .retried: the last call of this thread was sent again
        path = psycopg.sql.SQL("SET search_path TO {}, public").format(psycopg.sql.Identifier(self.schema))

        def configure(conn: Any) -> None:
            conn.execute(path)

        try:  # one connection first: an unreachable server or a wrong URL is told at once, with its reason
            psycopg.connect(url, connect_timeout=10, autocommit=True).close()
        except psycopg.ProgrammingError as exc:
            raise FrontierError(f"{shown_url(url)} is not a usable PostgreSQL URL ({_first_line(exc)}); write "
                                f"postgresql://user@host:5432/database") from None
        except psycopg.OperationalError as exc:
            raise PostgresUnavailable(f"open(): the PostgreSQL server at {shown_url(url)} cannot be reached, or "
                                      f"refused the connection ({_first_line(exc)})") from None
        try:
            self.pool = psycopg_pool.ConnectionPool(url, min_size=1, max_size=size, open=False, configure=configure,
                                                    kwargs={"autocommit": True, "connect_timeout": 10},
                                                    timeout=10.0, name=f"diskfrontier-{crawl}")
        except psycopg.ProgrammingError as exc:
            raise FrontierError(f"{shown_url(url)} is not a PostgreSQL URL ({exc}); write "
                                f"postgresql://user@host:5432/database") from None
        self.pool.open(wait=False)
        try:
            self.call("open", lambda conn: conn.execute("SELECT 1").fetchone(), retry=False)
        except BaseException:
            self.pool.close()
            raise

    def call(self, what: str, step: Callable[[Any], _T], *, retry: bool = True) -> _T:
        """``step(connection)``, its errors named with ``what`` (the call). A lost connection or an unreachable
        server is tried again for up to ``retry_for`` seconds (``retry=False``: raised at once as
        ``PostgresUnavailable``); a deadlock's victim at once."""
        deadline = time.monotonic() + self.retry_for
        pause = 0.05
        self._calls.retried = False
        while True:
            try:
                with self.pool.connection() as conn:
                    return step(conn)
            except self._errors.DeadlockDetected:
                continue
            except self._closed:
                raise FrontierClosed(f"{what}(): crawl {self.crawl!r} at {shown_url(self.url)} was closed meanwhile; "
                                     f"open it again") from None
            except self._lost as exc:
                self._calls.retried = True
                if not retry or time.monotonic() >= deadline:
                    raise PostgresUnavailable(f"{what}(): the PostgreSQL server at {shown_url(self.url)} cannot be "
                                              f"reached ({_first_line(exc)}); the call may or may not have been "
                                              f"applied") from None
                log.info("%s(): the connection to %s was lost (%s); trying again", what, shown_url(self.url),
                         _first_line(exc))
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
            except self._errors.UndefinedTable:
                raise FrontierError(f"crawl {self.crawl!r} at {shown_url(self.url)} was deleted (its schema "
                                    f"{self.schema} is gone): open it again to make it anew") from None
            except self._errors.UndefinedFunction:
                raise FrontierError(f"crawl {self.crawl!r} at {shown_url(self.url)} has lost its functions: open "
                                    f"it again to install them, or it was deleted") from None
            except self._errors.UniqueViolation as exc:  # no step makes a key twice unless the crawl was changed
                raise CrawlDamaged(f"{self.schema}", f"{what}(): a key of its tables is taken twice "
                                   f"({_first_line(exc)}): a sequence of the crawl was set back, or rows were copied "
                                   f"in", hint="run diskfrontier verify, or delete the crawl") from None
            except self._errors.Error as exc:
                if getattr(exc, "sqlstate", None) == DAMAGED:
                    raise CrawlDamaged(f"{self.schema}", _first_line(exc), hint="run diskfrontier verify, or "
                                       "delete the crawl") from None
                raise FrontierError(f"{what}(): PostgreSQL refused the call: {_first_line(exc)}") from None

    @property
    def retried(self) -> bool:
        """True if the last call of this thread was sent more than once after a lost connection: its first
        sending may have been applied."""
        return bool(getattr(self._calls, "retried", False))

    def rows(self, what: str, query: Any, params: Sequence[Any] = (), *, retry: bool = True) -> list[tuple[Any, ...]]:
        """The rows of ``query``."""
        return self.call(what, lambda conn: conn.execute(query, params).fetchall(), retry=retry)

    def value(self, what: str, query: Any, params: Sequence[Any] = (), *, retry: bool = True) -> Any:
        """The first column of the first row of ``query`` (None if it gives no row)."""
        found = self.rows(what, query, params, retry=retry)
        return found[0][0] if found else None

    def close(self) -> None:
        self.pool.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
