"""access.targets: a job directory, or a Redis or PostgreSQL URL with its crawl, opened as a frontier or a view."""

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


def test_the_one_place_that_tells_the_backends_apart(tmp_path):
    from diskfrontier.access.targets import backend_name, backend_of, is_server_target

    cases = {"redis://h:6379/0": "redis", "rediss://h/0": "redis", "unix:///tmp/r.sock": "redis",
             "postgresql://u@h:5432/db": "postgres", "postgres://u@h/db": "postgres", str(tmp_path): "jobdir",
             "crawls/postgresql": "jobdir"}
    assert {target: backend_of(target) for target in cases} == cases
    assert [is_server_target(t) for t in cases] == [kind != "jobdir" for kind in cases.values()]
    assert backend_name("postgres://u@h/db") == "PostgreSQL" and backend_name(tmp_path) == "job directory"


def test_a_postgres_url_opens_a_postgres_crawl_taking_the_redis_options_that_ask_for_nothing(postgres_url,
                                                                                             crawl_name):
    from diskfrontier import PostgresFrontier
    from diskfrontier.access.targets import open_shared

    with open_target(postgres_url, crawl_name, lease=60.0, prefer="priority", shards=None, wait_replicas=0) as f:
        assert isinstance(f, PostgresFrontier) and f.lease == 60.0
        f.push(Request("https://b.example/"))
    with open_shared(postgres_url, crawl_name, prefer="idle") as f:  # a preference it cannot follow: left out
        assert len(f) == 1
    for asked in ({"shards": 3}, {"wait_replicas": 1}, {"prefer": "anything"}):
        with pytest.raises(ValueError, match="is a setting of a Redis crawl; a PostgreSQL crawl has no such"):
            open_target(postgres_url, crawl_name, **asked)
    with open_view(postgres_url, crawl_name) as view:
        assert [r.url for r in view.pending_requests()] == ["https://b.example/"]
