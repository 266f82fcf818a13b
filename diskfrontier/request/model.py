"""``Request``: what a crawler pushes into the frontier, validated at the door."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ..core.errors import RequestTooLarge
from .canonical import canonicalize, is_plain, make_safe
from .fingerprint import fingerprint_and_host
from .revisit import RevisitState

PRIORITY_MIN = -(2**31)
PRIORITY_MAX = 2**31 - 1

# The limits of what a request may hold, so that every request accepted can be read back
# (a journal record holds at most 1 GiB; these stay far below it). Checked here for the
# URL and body, and by ``codec.encode_request`` for the nesting depth and the whole record.
MAX_URL_LENGTH = 1 << 20
"""Characters in ``Request.url`` (1 MiB; browsers stop near 2 MB, most servers near 8 KB)."""
MAX_BODY_BYTES = 64 << 20
"""Bytes in ``Request.body`` (64 MiB)."""
MAX_DEPTH = 64
"""Levels of nested containers in ``Request.meta`` (dicts, lists, tuples, sets and frozensets
alike; ``meta`` itself is the first level)."""
MAX_RECORD_BYTES = MAX_BODY_BYTES + MAX_URL_LENGTH + (1 << 20)
"""Bytes in a request's stored record: URL, method, headers, body and meta together (66 MiB)."""

_METHOD = re.compile(r"[A-Z][A-Z0-9_-]*\Z")
_HOST = re.compile(r"[^:/?#]*://(?:[^/?#]*@)?(\[[^\]/?#]*\]|[^:/?#]*)")
MAX_SLOT_BYTES = 255
"""Bytes of a request's slot (its queue key) in UTF-8."""
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")  # RFC 9110 field-name: a token of tchar
_SHOWN = 80  # characters of a long value shown in an error message

HeaderValue = str | bytes
Headers = dict[str, HeaderValue | list[HeaderValue]]


def _shown(value: str | bytes) -> str:
    """``repr(value)``, cut short for an error message (without copying a long value)."""
    if len(value) <= _SHOWN:
        return repr(value)
    return f"{value[:_SHOWN]!r}... ({len(value):,} long)"


def _check_url_length(url: str) -> None:
    if len(url) > MAX_URL_LENGTH:
        raise RequestTooLarge(
            f"Request.url {_shown(url)} is {len(url):,} characters, more than the limit of "
            f"{MAX_URL_LENGTH:,} (MAX_URL_LENGTH); no web server accepts such a URL: shorten it, "
            f"or send the data in the body"
        )


def _check_url(url: Any) -> str:
    if not isinstance(url, str):
        raise TypeError(f"Request.url must be a str, got {type(url).__name__}")
    _check_url_length(url)
    if is_plain(url):
        return url
    if not url or url != url.strip() or any(c in url for c in "\r\n\t\x00"):
        raise ValueError(
            f"Request.url {_shown(url)} is empty or has whitespace or control characters at its ends"
        )
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"Request.url {_shown(url)} cannot be parsed: {exc}") from None
    if not parts.scheme:
        raise ValueError(
            f"Request.url {_shown(url)} has no scheme; give an absolute URL such as https://{url.lstrip('/')}"
        )
    if not parts.netloc or not parts.hostname:
        raise ValueError(f"Request.url {_shown(url)} has no host; give an absolute URL such as https://example.com/")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
        safe = make_safe(url)
    except ValueError as exc:
        raise ValueError(f"Request.url {_shown(url)} is not a valid URL: {exc}") from None
    _check_url_length(safe)  # percent-escaping can make it longer
    try:
        canonicalize(safe)  # what the fingerprint needs must not fail later, inside push()
    except ValueError as exc:
        raise ValueError(f"Request.url {_shown(url)} is not a valid URL: {exc}") from None
    return safe


def _check_header_name(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"Request.headers: name {name!r} must be a str, got {type(name).__name__}")
    if not _TOKEN.match(name):
        raise ValueError(
            f"Request.headers: name {_shown(name)} is not a header name: use letters, digits and "
            f"!#$%&'*+-.^_`|~ only (an RFC 9110 token: no spaces, ':' or control characters)"
        )
    return name


def _check_header_value(name: str, value: HeaderValue) -> HeaderValue:
    if isinstance(value, str):
        unsafe = "\r" in value or "\n" in value or "\0" in value
    else:
        unsafe = b"\r" in value or b"\n" in value or b"\0" in value
    if unsafe:
        raise ValueError(
            f"Request.headers[{name!r}] value {_shown(value)} holds a CR, LF or NUL character, which "
            f"would end the header line and start another (header injection): remove it, and give "
            f"several values as a list"
        )
    return value


def _check_headers(headers: Any) -> Headers:
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise TypeError(f"Request.headers must be a mapping of name to value, got {type(headers).__name__}")
    checked: Headers = {}
    for name, value in headers.items():
        name = _check_header_name(name)
        if isinstance(value, (str, bytes)):
            checked[name] = _check_header_value(name, value)
        elif isinstance(value, (list, tuple)) and all(isinstance(v, (str, bytes)) for v in value):
            checked[name] = [_check_header_value(name, v) for v in value]
        else:
            raise TypeError(
                f"Request.headers[{name!r}] must be a str, bytes or a list of them, got {type(value).__name__}"
            )
    return checked


def _check_body_size(size: int) -> None:
    if size > MAX_BODY_BYTES:
        raise RequestTooLarge(
            f"Request.body is {size:,} bytes, more than the limit of {MAX_BODY_BYTES:,} "
            f"(MAX_BODY_BYTES, 64 MiB): keep a payload that large outside the request "
            f"(for example a file path in meta)"
        )


def _check_body(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, (bytes, bytearray, memoryview)):
        size = body.nbytes if isinstance(body, memoryview) else len(body)
        _check_body_size(size)
        return body if isinstance(body, bytes) else bytes(body)
    if isinstance(body, str):
        _check_body_size(len(body))  # UTF-8 is never shorter: refuse before encoding
        encoded = body.encode("utf-8")
        _check_body_size(len(encoded))
        return encoded
    raise TypeError(f"Request.body must be bytes or str, got {type(body).__name__}")


def check_priority(priority: Any) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"Request.priority must be an int, got {type(priority).__name__} {priority!r}")
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise ValueError(f"Request.priority {priority} is outside the range {PRIORITY_MIN}..{PRIORITY_MAX}")
    return priority


def _check_meta(meta: Any) -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise TypeError(f"Request.meta must be a dict, got {type(meta).__name__}")
    for key in meta:
        if not isinstance(key, str):
            raise TypeError(f"Request.meta keys must be str, got {type(key).__name__} {key!r}")
    return meta


def host_of(url: str) -> str:
    """The host name of an absolute URL, lower-cased, without port or brackets (Scrapy's download slot key)."""
    match = _HOST.match(url)
    host = match.group(1) if match is not None else ""
    if host.startswith("["):
        host = host[1:-1]
    host = host.lower()
    if not host.isascii() or len(host) > MAX_SLOT_BYTES:  # a slot is at most 255 bytes of valid UTF-8
        host = host.encode("utf-8", "replace")[:MAX_SLOT_BYTES].decode("utf-8", "ignore")
    return host


def check_slot(slot: Any, what: str = "Request.slot") -> str | None:
    """``slot`` if it is a valid queue key (a host name, or any 1 to 255 bytes of UTF-8), else raise."""
    if slot is None:
        return None
    if not isinstance(slot, str):
        raise TypeError(f"{what} must be a str, got {type(slot).__name__}")
    size = len(slot.encode("utf-8", "surrogatepass"))
    if not 1 <= size <= MAX_SLOT_BYTES or "\x00" in slot:
        raise ValueError(f"{what} {_shown(slot)} must be 1 to {MAX_SLOT_BYTES} bytes of UTF-8 without NUL")
    try:
        slot.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} {_shown(slot)} is not valid Unicode text") from None
    return slot


def check_stored(url: str, method: str, headers: Any, meta: Any) -> None:
    """Raise ``ValueError`` unless a request read back from a job directory is one ``Request`` accepts.

    A record with valid checksums can still hold what the door refuses (a URL with no host,
    a header value with CR or LF, a method that is no method name): it was written by other
    code, or altered. Such a request is never handed out; the message names the field.
    """
    try:
        _check_url(url)
        if not _METHOD.match(method):
            raise ValueError(f"Request.method {method!r} is not an HTTP method name such as 'GET'")
        if headers:
            _check_headers(headers)
        if meta:
            _check_meta(meta)
    except TypeError as exc:
        raise ValueError(str(exc)) from None


class Request:
    """A request to crawl: a URL and what to send with it.

    ``priority``: larger is fetched first (as in Scrapy). ``dont_filter``: queue it even if
    its fingerprint was seen before. ``fingerprint``: the 20-byte sha1 that Scrapy's
    default ``RequestFingerprinter`` gives the same request. ``slot``: the queue key that
    politeness applies to; None means the URL's host name (lower-cased, no port), as
    Scrapy's download slot. ``attempts``: how many times the frontier's ``retry`` gave it
    back (0 for a new request): its retries, the first try not counted. Everything that
    shows it (the crawl log, ``diskfrontier failed``) calls it that (``retries_text``). Every field is checked here;
    a bad one raises ``TypeError`` or ``ValueError`` naming it, before anything is written
    (``RequestTooLarge``, a ``ValueError``, for a URL or body over ``MAX_URL_LENGTH`` or
    ``MAX_BODY_BYTES``). ``revisit``: the state of the page's last fetch (``RevisitState``), for a
    crawl that comes back to it (``diskfrontier.Revisit``); None for a page never fetched.
    """

    # ``_fingerprint`` and ``_slot`` are the request's own, given to the constructor or computed from it
    # on first use. ``_seq``, ``_hid`` and ``_size`` belong to the backend that handed the request out, and
    # only that backend's modules write them (``unchecked`` only passes ``seq`` on for its caller):
    # - ``_seq``: its number there. A job directory: the journal offset of its record (jobdir/records.py,
    #   through ``unchecked``), or a negative number for a request kept in memory only (jobdir/dispatch.py,
    #   which also clears it on a failed request read back). Redis: this client's lease number
    #   (redisfrontier/leases.py).
    # - ``_hid``: its host's id in the job directory's host table (jobdir/dispatch.py).
    # - ``_size``: the bytes of its record in the job directory's journal (jobdir/records.py).
    __slots__ = ("url", "method", "headers", "body", "priority", "meta", "dont_filter", "_fingerprint", "_seq", "_size",
                 "_slot", "attempts", "not_before", "_hid", "revisit")

    def __init__(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, HeaderValue | list[HeaderValue]] | None = None,
        body: bytes | bytearray | memoryview | str | None = None,
        priority: int = 0,
        meta: dict[str, Any] | None = None,
        dont_filter: bool = False,
        fingerprint: bytes | None = None,
        slot: str | None = None,
        revisit: RevisitState | None = None,
    ) -> None:
        self.url: str = _check_url(url)
        if not isinstance(method, str) or not _METHOD.match(method.upper()):
            raise ValueError(f"Request.method {method!r} is not an HTTP method name such as 'GET'")
        self.method: str = method.upper()
        self.headers: Headers = _check_headers(headers)
        self.body: bytes = _check_body(body)
        self.priority: int = check_priority(priority)
        self.meta: dict[str, Any] = _check_meta(meta)
        if not isinstance(dont_filter, bool):
            raise TypeError(f"Request.dont_filter must be True or False, got {dont_filter!r}")
        self.dont_filter: bool = dont_filter
        if fingerprint is not None and (not isinstance(fingerprint, bytes) or not 1 <= len(fingerprint) <= 255):
            raise TypeError("Request fingerprint must be bytes of 1 to 255 bytes")
        self._fingerprint: bytes | None = fingerprint
        self._seq: int | None = None
        self._size = 0  # bytes of its journal record, once a job directory handed it out
        self._slot: str | None = check_slot(slot)
        self.attempts = 0
        self.not_before: float | None = None  # when it was due, for a request read back from a job directory
        self._hid = -1  # its host's id in the job directory that handed it out
        if revisit is not None and not isinstance(revisit, RevisitState):
            raise TypeError(f"Request.revisit must be a RevisitState or None, got {type(revisit).__name__}")
        self.revisit: RevisitState | None = revisit

    @classmethod
    def unchecked(
        cls, url: str, method: str, headers: Headers, body: bytes, priority: int,
        meta: dict[str, Any], dont_filter: bool, fingerprint: bytes | None, seq: int | None = None,
        slot: str | None = None, revisit: RevisitState | None = None,
    ) -> Request:
        """A request built from fields that are known to be valid, with no checks at all.

        For codecs and backends only: a request read back from a record (its fields checked by the
        record's decoder, ``request.check_stored``), or rebuilt from another library's request that
        was checked there. Everyone else builds a ``Request()``, which checks every field. The fields
        are taken as they are: ``method`` upper case, ``headers`` as ``Request.headers`` holds them,
        ``body`` bytes; ``fingerprint`` and ``slot`` None to compute them from the request when first
        asked for; ``seq`` is the number the backend calling this gives the request (see ``__slots__``).
        ``attempts`` is 0 and ``not_before`` None, for the caller to set.
        """
        self = cls.__new__(cls)
        self.url, self.method, self.headers, self.body = url, method, headers, body
        self.priority, self.meta, self.dont_filter = priority, meta, dont_filter
        self._fingerprint, self._seq, self._size = fingerprint, seq, 0
        self._slot, self.attempts, self.not_before, self._hid = slot, 0, None, -1
        self.revisit = revisit
        return self

    @property
    def slot(self) -> str:
        """The request's queue key: the ``slot`` it was given, else its URL's host name."""
        if self._slot is None:
            self._slot = host_of(self.url)
        return self._slot

    @property
    def fingerprint(self) -> bytes:
        """The request's 20-byte fingerprint (Scrapy's default ``RequestFingerprinter``)."""
        if self._fingerprint is None:
            fingerprint, host = fingerprint_and_host(self.method, self.url, self.body)
            self._fingerprint = fingerprint
            if self._slot is None and host is not None and len(host) <= MAX_SLOT_BYTES:
                self._slot = host  # read on the way: what host_of(url) would give
            return fingerprint
        return self._fingerprint

    def replace(self, **changes: Any) -> Request:
        """A copy with some fields changed (validated again)."""
        fields: dict[str, Any] = {
            "method": self.method, "headers": self.headers, "body": self.body,
            "priority": self.priority, "meta": self.meta, "dont_filter": self.dont_filter,
            "revisit": self.revisit,
        }
        if "url" not in changes:
            fields["slot"] = self._slot
        url = changes.pop("url", self.url)
        fields.update(changes)
        return Request(url, **fields)

    def to_dict(self) -> dict[str, Any]:
        """The request's fields as a dict (the keyword arguments that rebuild it, plus the URL; ``revisit``
        only when it has a revisit state)."""
        out = {
            "url": self.url, "method": self.method, "headers": self.headers, "body": self.body,
            "priority": self.priority, "meta": self.meta, "dont_filter": self.dont_filter,
        }
        if self.revisit is not None:
            out["revisit"] = self.revisit
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return (
            self.url == other.url and self.method == other.method and self.headers == other.headers
            and self.body == other.body and self.priority == other.priority
            and self.meta == other.meta and self.dont_filter == other.dont_filter and self.revisit == other.revisit
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, like Scrapy's

    def __repr__(self) -> str:
        extra = "" if self.priority == 0 else f" priority={self.priority}"
        return f"<{self.method} {self.url}{extra}>"


def retries_text(attempts: int) -> str:
    """A request's ``attempts`` as people read it: ``0 retries``, ``1 retry``, ``3 retries``."""
    return f"{attempts} {'retry' if attempts == 1 else 'retries'}"
