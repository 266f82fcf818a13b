"""The fast canonicaliser against w3lib as the oracle (property test)."""

from __future__ import annotations

from hypothesis import given, settings
from urlstrategies import urls
from w3lib.url import canonicalize_url, safe_url_string

from diskfrontier.request.canonical import _fast_canonical, canonicalize, is_plain, make_safe


@settings(max_examples=1500, deadline=None)
@given(urls())
def test_canonicalize_is_identical_to_w3lib(url):
    try:
        expected = canonicalize_url(url)
    except ValueError:
        try:
            canonicalize(url)
        except ValueError:
            return
        raise AssertionError(f"w3lib rejects {url!r}, the fast path accepted it") from None
    assert canonicalize(url) == expected


@settings(max_examples=1000, deadline=None)
@given(urls())
def test_plain_urls_are_already_safe(url):
    try:
        expected = safe_url_string(url)
    except ValueError:
        return
    assert make_safe(url) == expected
    if is_plain(url):
        assert safe_url_string(url) == url


def test_fast_path_is_taken_for_ordinary_crawl_urls():
    for url in ["https://shop.example/", "https://a.b.example/x/y.html?page=2&sort=asc", "http://h1.example:8080/p?a"]:
        assert _fast_canonical(url) is not None
        assert _fast_canonical(url) == canonicalize_url(url)
