"""Scrapy requests as frontier records, without importing Scrapy.

Scrapy describes a request as a dict (``Request.to_dict``, read back by
``request_from_dict``): ``url``, ``callback`` and ``errback`` (spider method names),
``headers``, ``method``, ``body``, ``cookies``, ``meta``, ``encoding``, ``priority``,
``dont_filter``, ``flags``, ``cb_kwargs``, the attributes of a subclass, and ``_class``
for a subclass such as ``FormRequest``. In the journal, the URL, method, body, priority
and ``dont_filter`` travel in the frontier request's own fields; every other key whose
value is not Scrapy's default goes in its ``meta``. So ``diskfrontier peek`` shows a
Scrapy job directory's URLs and priorities, and a plain GET with a callback costs a few
bytes more than the URL.

Two values that the record's header cannot hold are kept in ``meta`` as well: a
priority outside the 32-bit range (routed at the nearest bound), and a ``dont_filter``
that differs from how the request was deduplicated (see ``start_requests`` in
``diskfrontier.scrapy``).
"""

from __future__ import annotations

from typing import Any

from ..core.errors import RequestTooLarge
from ..request.fingerprint import request_fingerprint
from ..request.model import MAX_BODY_BYTES, MAX_URL_LENGTH, PRIORITY_MAX, PRIORITY_MIN, Request

_DEFAULTS: dict[str, Any] = {
    "callback": None, "errback": None, "headers": {}, "cookies": {}, "meta": {},
    "encoding": "utf-8", "flags": [], "cb_kwargs": {},
}
LIFTED = frozenset({"url", "method", "body", "priority", "dont_filter"})
_MISSING = object()


def route_priority(priority: int) -> int:
    """The priority a frontier can route: Scrapy's, clamped to the 32-bit range of the journal header."""
    return min(max(priority, PRIORITY_MIN), PRIORITY_MAX)


def frontier_request(data: dict[str, Any], fingerprint: bytes | None, *, dont_filter: bool | None = None,
                     slot: str | None = None) -> Request:
    """The frontier request for Scrapy's request dict ``data``.

    ``fingerprint``: None for Scrapy's default one. ``dont_filter``: how the frontier
    should treat it (default: as ``data`` says); when it differs from ``data``'s, the
    original is kept for ``scrapy_dict``. ``slot``: its queue key (a valid one), None
    for its URL's host. Raises ``ValueError``/``TypeError`` for a dict
    Scrapy would not have written, and ``RequestTooLarge`` for a URL or body over the
    limits of ``diskfrontier.request`` (``codec.encode_request`` checks the rest).
    """
    url, method, body = data.get("url"), data.get("method", "GET"), data.get("body", b"")
    priority, original = data.get("priority", 0), bool(data.get("dont_filter", False))
    if not isinstance(url, str) or not url:
        raise TypeError(f"a Scrapy request dict needs a str 'url', got {type(url).__name__}")
    if not isinstance(method, str) or not isinstance(body, bytes):
        raise TypeError("a Scrapy request dict needs a str 'method' and a bytes 'body'")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"a Scrapy request priority must be an int, got {priority!r}")
    extras = {k: v for k, v in data.items() if k not in LIFTED and _DEFAULTS.get(k, _MISSING) != v}
    return stored_request(url, method, body, priority, original, extras, fingerprint, dont_filter=dont_filter,
                          slot=slot)


def stored_request(url: str, method: str, body: bytes, priority: int, original: bool, extras: dict[str, Any],
                   fingerprint: bytes | None, *, dont_filter: bool | None = None, slot: str | None = None) -> Request:
    """``frontier_request`` of a dict whose lifted fields are given (checked types) and whose other
    non-default keys are ``extras`` (kept, and added to)."""
    _check_sizes(url, body)
    routed = route_priority(priority)
    if routed != priority:
        extras["priority"] = priority
    flag = original if dont_filter is None else dont_filter
    if flag != original:
        extras["dont_filter"] = original
    if fingerprint is None:
        fingerprint = request_fingerprint(method, url, body)
    return Request.unchecked(url, method, {}, body, routed, extras, flag, fingerprint, None, slot)


def _check_sizes(url: str, body: bytes) -> None:
    """Raise ``RequestTooLarge`` for a URL or body that a job directory does not store."""
    if len(url) > MAX_URL_LENGTH:
        raise RequestTooLarge(
            f"the URL {url[:80]!r}... is {len(url):,} characters, more than the {MAX_URL_LENGTH:,} "
            f"(MAX_URL_LENGTH) a job directory stores: shorten it")
    if len(body) > MAX_BODY_BYTES:
        raise RequestTooLarge(
            f"the body of {url[:80]!r} is {len(body):,} bytes, more than the {MAX_BODY_BYTES:,} "
            f"(MAX_BODY_BYTES) a job directory stores: keep large payloads outside the request")


def scrapy_dict(request: Request) -> dict[str, Any]:
    """Scrapy's request dict for a frontier request made by ``frontier_request``."""
    data = {k: (v.copy() if isinstance(v, (dict, list)) else v) for k, v in _DEFAULTS.items()}
    data.update(url=request.url, method=request.method, body=request.body,
                priority=request.priority, dont_filter=request.dont_filter)
    data.update(request.meta)
    return data


__all__ = ["frontier_request", "scrapy_dict", "stored_request"]
