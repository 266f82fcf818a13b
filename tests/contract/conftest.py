"""``frontier_factory``: opens a frontier of one backend (a job directory, or a crawl in the session's
redis-server), the same one again on every call, so that reopening is part of what is tested."""

from __future__ import annotations

import pytest
from backends import BACKENDS, make_factory


@pytest.fixture(params=BACKENDS)
def frontier_factory(request, tmp_path, crawl_name):
    factory = make_factory(request.param, tmp_path, request, crawl_name)
    yield factory
    factory.close_all()
