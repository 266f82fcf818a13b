"""Clients of a test's crawl on a server (Redis or PostgreSQL), each one closed at the end of the test: the
``open_crawl`` fixture of both backends' own tests."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from diskfrontier import FrontierError


@contextlib.contextmanager
def crawl_clients(frontier_class: Callable[..., Any], url: str, crawl_name: str) -> Iterator[Callable[..., Any]]:
    """``open_(crawl="", **settings)`` opens a new client of crawl ``crawl_name`` (``crawl``: another one of the
    test's, named by this suffix) at ``url``; every client is closed at the end, a close a damaged crawl refuses
    being no failure of the test."""
    opened = []

    def open_(*, crawl: str = "", **kwargs):
        frontier = frontier_class(url, crawl=crawl_name + crawl, **kwargs)
        opened.append(frontier)
        return frontier

    yield open_
    for frontier in opened:
        with contextlib.suppress(FrontierError):
            frontier.close()
