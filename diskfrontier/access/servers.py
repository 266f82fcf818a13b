"""The crawls of a server and their clients, whatever the server: Redis or PostgreSQL. What ``diskfrontier
crawls``, ``clients``, ``release`` and ``inspect`` read of them, each call given to the backend's own
``management`` module by the URL (``backend_of``); both answer with the same summaries, client rows and
answers (``redisfrontier/management.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.errors import FrontierError
from .targets import backend_of

if TYPE_CHECKING:
    from ..redisfrontier.management import ClientInfo, CrawlSummary, Released


def _backend(url: str) -> str:
    kind = backend_of(url)
    if kind == "jobdir":
        raise FrontierError(f"{url} is not a Redis or PostgreSQL URL (redis://host:6379/0, "
                            f"postgresql://user@host:5432/db)")
    return kind


def crawl_summaries(url: str, *, memory: bool = True) -> list[CrawlSummary]:
    """Every crawl at the server ``url``, summed up; ``memory``: measure what each takes (Redis: the memory of its
    keys; PostgreSQL: its tables and indexes on disk)."""
    if _backend(url) == "postgres":
        from ..pgfrontier import management as pg

        return pg.summaries(url, memory=memory)
    from ..redisfrontier import management as redis

    return redis.summaries(url, memory=memory)


def crawl_clients(url: str, crawl: str) -> list[ClientInfo]:
    """Every client of crawl ``crawl`` at ``url``: live ones first."""
    if _backend(url) == "postgres":
        from ..pgfrontier import management as pg

        return pg.clients(url, crawl)
    from ..redisfrontier import management as redis

    return redis.clients(url, crawl)


def release_leases(url: str, crawl: str, *, client: str | None = None, expired: bool = False,
                   force: bool = False) -> Released:
    """Give back now every lease of ``client``, or every lease that ran out (``expired``), of crawl ``crawl``."""
    if _backend(url) == "postgres":
        from ..pgfrontier import management as pg

        return pg.release(url, crawl, client=client, expired=expired, force=force)
    from ..redisfrontier import management as redis

    return redis.release(url, crawl, client=client, expired=expired, force=force)
