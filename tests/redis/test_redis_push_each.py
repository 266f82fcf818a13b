"""``RedisFrontier.push_each``: a batch stored in one script call per 500 requests, answered request by request."""

from __future__ import annotations

import pytest

from diskfrontier import Request
from diskfrontier.request.codec import encode_request


def test_push_each_says_which_requests_were_queued(open_crawl):
    frontier = open_crawl()
    assert frontier.push(Request("https://a.example/old"))
    batch = [Request("https://a.example/new"), Request("https://a.example/old"), Request("https://a.example/new"),
             Request("https://a.example/old", dont_filter=True)]
    assert frontier.push_each(batch) == [True, False, False, True]
    queued = sorted(request.url for request in frontier.pending_requests())
    assert queued == ["https://a.example/new", "https://a.example/old", "https://a.example/old"]


def test_push_each_over_many_script_calls_keeps_the_answers_in_order(open_crawl):
    frontier = open_crawl()
    frontier.push_many(Request(f"https://h{i % 7}.example/{i}") for i in range(0, 1300, 3))
    answers = frontier.push_each(Request(f"https://h{i % 7}.example/{i}") for i in range(1300))
    assert answers == [i % 3 != 0 for i in range(1300)]
    assert len(frontier) == 1300


def test_push_each_takes_the_records_already_encoded(open_crawl):
    frontier = open_crawl()
    requests = [Request("https://a.example/1", meta={"k": 1}), Request("https://a.example/2")]
    assert frontier.push_each(requests, [encode_request(request) for request in requests]) == [True, True]
    assert {request.url: request.meta for request in frontier.pending_requests()} == {
        "https://a.example/1": {"k": 1}, "https://a.example/2": {}}
    with pytest.raises(ValueError, match="2 requests and 1 records"):
        frontier.push_each(requests, [encode_request(requests[0])])
    with pytest.raises(TypeError, match=r"diskfrontier\.Request"):
        frontier.push_each(["https://a.example/3"])


def test_push_each_on_a_sharded_crawl_answers_each_request_in_its_place(open_crawl):
    frontier = open_crawl(shards=3)
    frontier.push_many(Request(f"https://h{i % 5}.example/{i}") for i in range(0, 700, 2))
    answers = frontier.push_each(Request(f"https://h{i % 5}.example/{i}") for i in range(700))
    assert answers == [i % 2 == 1 for i in range(700)]
    assert len(frontier) == 700
