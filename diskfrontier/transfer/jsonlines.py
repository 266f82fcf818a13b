"""The JSON-lines form of requests that ``diskfrontier export`` writes and ``import`` reads.

One JSON object a line: ``{"url", "method", "headers", "body", "priority", "meta",
"dont_filter"}``, and, when they are not the defaults, ``"slot"`` (a queue key other than
the URL's host), ``"attempts"`` (retries so far), ``"not_before"`` (a ``time.time()``
value: not handed out before then) and ``"revisit"`` (the page's revisit state, its fields by
name, the signature in hex). JSON has no bytes, so every bytes value (a body, a header value, bytes
inside ``meta``) is written as ``{"$base64": "..."}`` and turned back into bytes on import. Other values
of ``meta`` that JSON has no type for are written as text, and read back as that text: dates and times
in ISO 8601 (``isoformat()``), a ``Decimal`` or a ``UUID`` as ``str()`` writes it; a ``timedelta`` as
its seconds.
Only ``url`` is required on import; the other fields take the ``Request`` defaults.

``export --seen`` adds one line per seen fingerprint, ``{"$seen": "<40 hex digits>"}``:
on import it marks the fingerprint seen and queues nothing.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import re
import uuid
from typing import Any

from ..files import boundedjson
from ..request.model import MAX_DEPTH, MAX_RECORD_BYTES, Request, host_of
from ..request.revisit import RevisitState

FIELDS = frozenset({"url", "method", "priority", "headers", "body", "meta", "dont_filter", "slot", "attempts",
                    "not_before", "revisit"})
SEEN = "$seen"
_LINE_DEPTH = MAX_DEPTH + 4  # meta's own limit, and the line's object, meta, $base64 and header lists
_LINE_BYTES = 2 * MAX_RECORD_BYTES  # a body as base64 or escaped text is longer than its bytes
_HEX_FINGERPRINT = re.compile(r"[0-9a-fA-F]{40}")


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$base64": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {k if isinstance(k, str) else _plain_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, (datetime.date, datetime.time)):  # a datetime is a date
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    return value


def _plain_key(key: Any) -> str:
    return key.decode("latin-1") if isinstance(key, bytes) else str(key)


def _restore(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$base64"}:
            return base64.b64decode(value["$base64"], validate=True)
        return {k: _restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v) for v in value]
    return value


def request_to_json(request: Request) -> str:
    """One line of JSON for ``request`` (no newline)."""
    fields = request.to_dict()
    fields.pop("revisit", None)
    data = _plain(fields)
    if request.revisit is not None:
        data["revisit"] = request.revisit.to_json()
    if not request.body:
        data["body"] = ""
    if request.slot != host_of(request.url):
        data["slot"] = request.slot
    if request.attempts:
        data["attempts"] = request.attempts
    if request.not_before is not None:
        data["not_before"] = request.not_before
    return json.dumps(data, ensure_ascii=False)


def seen_to_json(fingerprint: bytes) -> str:
    """One line of JSON for a seen fingerprint, ``{"$seen": "<hex>"}`` (no newline)."""
    return json.dumps({SEEN: fingerprint.hex()})


def record_from_json(line: str) -> Request | bytes:
    """A request, or the fingerprint of a ``$seen`` line; ``ValueError``/``TypeError`` saying what is wrong."""
    try:
        data = boundedjson.loads(line, max_depth=_LINE_DEPTH, max_bytes=_LINE_BYTES)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if isinstance(data, dict) and SEEN in data:
        return _fingerprint(data)
    return _request(data)


def request_from_json(line: str) -> Request:
    """The request of one JSON line; ``ValueError``/``TypeError`` saying what is wrong."""
    record = record_from_json(line)
    if isinstance(record, bytes):
        raise ValueError(f'a "{SEEN}" line is a fingerprint, not a request')
    return record


def _fingerprint(data: dict[str, Any]) -> bytes:
    value = data[SEEN]
    if set(data) != {SEEN} or not isinstance(value, str) or not _HEX_FINGERPRINT.fullmatch(value):
        raise ValueError(f'a seen line must be {{"{SEEN}": "<40 hex digits>"}} and nothing else')
    return bytes.fromhex(value)


def _request(data: Any) -> Request:
    if not isinstance(data, dict) or "url" not in data:
        raise ValueError('each line must be a JSON object with at least a "url"')
    unknown = set(data) - FIELDS
    if unknown:
        raise ValueError(f"unknown fields {sorted(unknown)}; the fields are {sorted(FIELDS)}")
    try:
        restored = {k: _restore(v) for k, v in data.items()}
    except (ValueError, TypeError) as exc:
        raise ValueError(f"a {{\"$base64\": ...}} value is not base64 ({exc})") from None
    url = restored.pop("url")
    if not restored.get("body"):
        restored.pop("body", None)
    attempts = restored.pop("attempts", 0)
    not_before = restored.pop("not_before", None)
    revisit = restored.pop("revisit", None)
    if revisit is not None:
        restored["revisit"] = RevisitState.from_json(revisit)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
        raise ValueError(f'"attempts" must be a whole number of at least 0, got {attempts!r}')
    if not_before is not None and (isinstance(not_before, bool) or not isinstance(not_before, (int, float))
                                   or not 0 <= not_before < float("inf")):
        raise ValueError(f'"not_before" must be a time.time() value, got {not_before!r}')
    request = Request(url, **restored)
    request.attempts = attempts
    request.not_before = None if not_before is None else float(not_before)
    return request


__all__ = ["SEEN", "record_from_json", "request_from_json", "request_to_json", "seen_to_json"]
