"""Fixtures of the PostgreSQL backend's own tests."""

from __future__ import annotations

import pytest
from crawlclients import crawl_clients

from diskfrontier import PostgresFrontier


@pytest.fixture
def open_crawl(postgres_url, crawl_name):
    """Open the test's crawl (each call a new client; ``crawl``: another one of the test's, named by this
    suffix); every client is closed at the end (a crawl a test damaged may refuse the close's step)."""
    with crawl_clients(PostgresFrontier, postgres_url, crawl_name) as open_:
        yield open_


@pytest.fixture
def sql(postgres_url, crawl_name):
    """Run SQL in the test crawl's schema (from outside diskfrontier): ``sql(query, params)`` -> rows."""
    import psycopg

    conn = psycopg.connect(postgres_url, autocommit=True)
    conn.execute(f'SET search_path TO "df_{crawl_name}"')

    def run(query: str, params: tuple = ()) -> list[tuple]:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []

    yield run
    conn.close()
