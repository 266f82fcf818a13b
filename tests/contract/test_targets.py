"""access.targets.open_target and open_view: a job directory or a Redis URL with its crawl, and nothing else."""

from __future__ import annotations

import pytest

from diskfrontier import Frontier, RedisFrontier, Request
from diskfrontier.access.targets import open_target, open_view


def test_a_path_opens_a_job_directory_and_a_url_a_redis_crawl(tmp_path, redis_url, crawl_name):
    with open_target(tmp_path / "job") as local:
        assert isinstance(local, Frontier)
        local.push(Request("https://a.example/"))
    with open_target(redis_url, crawl_name, lease=60.0) as shared:
        assert isinstance(shared, RedisFrontier) and shared.lease == 60.0
        shared.push(Request("https://b.example/"))
    for target, crawl, url in ((str(tmp_path / "job"), None, "https://a.example/"),
                               (redis_url, crawl_name, "https://b.example/")):
        with open_view(target, crawl) as view:
            assert [r.url for r in view.pending_requests()] == [url] and view.pending_count() == 1


def test_a_crawl_name_goes_with_a_url_and_only_with_one(tmp_path, redis_url):
    with pytest.raises(ValueError, match="crawl"):
        open_target(redis_url)
    with pytest.raises(ValueError, match="job directory"):
        open_target(tmp_path / "job", "news")
    assert not (tmp_path / "job").exists()  # refused before anything was made
