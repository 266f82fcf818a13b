"""The PostgreSQL backend: the contract for many crawler processes on many machines, with the crawl on the
server's disk.

``PostgresFrontier`` is imported when first used (it needs the ``postgres`` extra: psycopg and psycopg-pool);
the errors and ``is_postgres_url`` (what the command line needs to tell a PostgreSQL URL from a job directory)
at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .connection import PostgresUnavailable, is_postgres_url

if TYPE_CHECKING:
    from .frontier import PostgresFrontier

__all__ = ["PostgresFrontier", "PostgresUnavailable", "is_postgres_url"]

if not TYPE_CHECKING:  # hidden from type checkers, which would otherwise accept any name of the package

    def __getattr__(name: str) -> Any:
        """``PostgresFrontier``, imported from ``frontier.py`` on first use (PEP 562)."""
        if name != "PostgresFrontier":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from .frontier import PostgresFrontier

        globals()[name] = PostgresFrontier
        return PostgresFrontier
