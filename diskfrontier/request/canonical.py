"""URL canonicalisation identical to w3lib's ``canonicalize_url``, with a fast path.

Scrapy's request fingerprint is dominated by ``w3lib.url.canonicalize_url`` (~15 us a
URL). Most crawl URLs are plain ASCII with nothing to escape; for those the canonical
form is only "lower-case scheme and host, '/' for an empty path, query pairs sorted".
``canonicalize`` recognises exactly that shape with one regular expression and builds
the result directly; everything else goes to w3lib, which stays the single source of
truth. ``tests/request/test_canonical.py`` checks the fast path against w3lib as an oracle.

``w3lib.url`` (which imports ``urllib.request`` and ``http.client``) is imported when a URL first
needs it, not with this module: reading stored requests, and most commands, never do.
"""

from __future__ import annotations

import re

# The fast path accepts: http or https; a host of lower-case DNS labels (no IDNA "xn--",
# no trailing dot); an optional port; a path of unreserved and sub-delimiter characters
# without dot segments; a query of key=value pairs over unreserved characters; a
# fragment of the same characters as the path. Nothing in that set is changed by w3lib's escaping.
_LABEL = r"(?!xn--)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_FAST_URL = re.compile(
    r"(https?)://(" + _LABEL + r"(?:\." + _LABEL + r")*)(:[0-9]{1,5})?"
    r"(/[A-Za-z0-9\-._~!$&'()*+,=:@/]*)?"
    r"(?:\?([A-Za-z0-9\-._~=&]+))?"
    r"(?:#[A-Za-z0-9\-._~!$&'()*+,=:@/?]+)?\Z"
)
_DOT_SEGMENT = re.compile(r"/\.\.?(?:/|\Z)")


def _plain_match(url: str) -> re.Match[str] | None:
    match = _FAST_URL.match(url)
    if match is None:
        return None
    if match.group(3) is not None and int(match.group(3)[1:]) > 65535:
        return None  # w3lib rejects it; let it say so
    if match.group(4) is None and ("?" in url or "#" in url):
        return None  # safe_url_string inserts the "/" before a query or fragment
    return match


def _fast_canonical(url: str) -> str | None:
    match = _plain_match(url)
    return None if match is None else _canonical_of(match)


def _canonical_of(match: re.Match[str]) -> str | None:
    scheme, host, port, path, query = match.groups()
    if path is None:
        path = "/"
    elif _DOT_SEGMENT.search(path):
        return None
    head = f"{scheme}://{host}{port or ''}{path}"
    if not query:
        return head
    pairs = []
    for part in query.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        if "=" in value:
            return None  # w3lib escapes a second '=' as %3D
        pairs.append((key, value))
    if not pairs:
        return head
    pairs.sort()
    return head + "?" + "&".join(f"{k}={v}" for k, v in pairs)


def canonicalize(url: str) -> str:
    """Return ``w3lib.url.canonicalize_url(url)``, faster for plain URLs."""
    fast = _fast_canonical(url)
    if fast is not None:
        return fast
    from w3lib.url import canonicalize_url

    return canonicalize_url(url)


def canonical_and_host(url: str) -> tuple[str, str | None]:
    """``canonicalize(url)``, and the URL's host (lower-case, no port) when the fast path read it, else None."""
    match = _plain_match(url)
    if match is not None:
        fast = _canonical_of(match)
        if fast is not None:
            return fast, match.group(2)
    from w3lib.url import canonicalize_url

    return canonicalize_url(url), None


def is_plain(url: str) -> bool:
    """True when ``url`` has the fast-path shape: absolute, ASCII, nothing to escape."""
    return _plain_match(url) is not None


def make_safe(url: str) -> str:
    """Return ``w3lib.url.safe_url_string(url)`` (what Scrapy stores as ``Request.url``).

    A URL of the fast-path shape is already safe and is returned as it is.
    """
    if _plain_match(url) is not None:
        return url
    from w3lib.url import safe_url_string

    return safe_url_string(url)
