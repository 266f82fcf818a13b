"""The fast canonicaliser against w3lib as the oracle (property test)."""

from __future__ import annotations

from urlstrategies import urls
from volume import property_test
from w3lib.url import canonicalize_url, safe_url_string

from diskfrontier.request.canonical import _fast_canonical, canonicalize, is_plain, make_safe


@property_test(1500, urls())
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


@property_test(1000, urls())
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


@property_test(1500, urls())
def test_the_host_read_on_the_way_is_the_slot_host_of_gives(url):
    """The fingerprint sets a request's slot from what the fast path read: it must be host_of's."""
    from diskfrontier import Request
    from diskfrontier.request.canonical import canonical_and_host
    from diskfrontier.request.model import host_of

    try:
        canonical, host = canonical_and_host(url)
        request = Request(url)
    except ValueError:
        return
    assert canonical == canonicalize(url)
    if host is not None:
        assert host == host_of(url)
    request.fingerprint  # noqa: B018 - sets the slot when the fast path read the host
    assert request.slot == host_of(request.url)


def test_a_host_longer_than_a_slot_is_cut_as_host_of_cuts_it():
    from diskfrontier import Request
    from diskfrontier.request.model import host_of

    url = "https://" + ".".join(["a" * 60] * 5) + "/p"
    request = Request(url)
    request.fingerprint  # noqa: B018
    assert request.slot == host_of(url) and len(request.slot.encode()) <= 255
