"""Fixtures of the dashboard's tests: a job directory with pushed, done, failed and blocked requests
(``kits/livecrawl.py``)."""

from __future__ import annotations

import pytest

pytest.importorskip("aiohttp")  # the serve extra: part of the test extra

from livecrawl import fill

from diskfrontier import Frontier


@pytest.fixture
def jobdir(tmp_path) -> str:
    path = str(tmp_path / "job")
    with Frontier(path) as frontier:
        fill(frontier)
    return path
