"""The fast canonicaliser against w3lib as the oracle (property test)."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st
from w3lib.url import canonicalize_url, safe_url_string

from diskfrontier.request.canonical import _fast_canonical, canonicalize, is_plain, make_safe

label = st.text(string.ascii_lowercase + string.digits + "-", min_size=1, max_size=12)
host = st.lists(label, min_size=1, max_size=4).map(".".join)
path_chars = string.ascii_letters + string.digits + "-._~!$&'()*+,=:@/%;?#[] \u00e9"
query_chars = string.ascii_letters + string.digits + "-._~=&+%/?# \u00e9"


@st.composite
def urls(draw):
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "ftp"]))
    h = draw(st.one_of(host, host.map(str.upper), st.just("xn--bcher-kva.example")))
    port = draw(st.one_of(st.just(""), st.integers(0, 99999).map(lambda p: f":{p}")))
    path = draw(st.one_of(st.just(""), st.text(path_chars, max_size=30).map(lambda p: "/" + p)))
    query = draw(st.one_of(st.just(""), st.text(query_chars, max_size=30).map(lambda q: "?" + q)))
    frag = draw(st.one_of(st.just(""), st.text(string.printable, max_size=10).map(lambda f: "#" + f)))
    return f"{scheme}://{h}{port}{path}{query}{frag}"


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
