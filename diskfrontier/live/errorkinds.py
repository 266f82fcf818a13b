"""Failures grouped by what went wrong: the dashboard's "Error kinds" panel.

A failure's error text is the handler's exception as ``crawl()`` records it (``"TimeoutError: timed
out"``, ``"RuntimeError: HTTP 503 from shop.example"``) or a runner's word (``"robots.txt"``). Its kind
is the exception's name, with the HTTP status when the text gives one; the rest of the text (a URL, a
number) would make every failure a kind of its own.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

TOP_KINDS = 12
"""Kinds listed by name; the rest are counted together as ``OTHER``."""
OTHER = "other kinds"
_NAME = re.compile(r"([A-Za-z_][\w.]*)(?::\s|$)")
_HTTP = re.compile(r"\bHTTP(?:/[\d.]+)?\s*(?:status\s*)?([1-5]\d\d)\b", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")


def error_kind(error: str) -> str:
    """The kind of the error text ``error``: ``"RuntimeError · HTTP 503"``, ``"TimeoutError"``, ``"robots.txt"``;
    a text without an exception's name is cut at its first colon, its numbers as ``N``."""
    text = error.strip()
    name = _NAME.match(text)
    status = _HTTP.search(text)
    http = f"HTTP {status.group(1)}" if status else None
    if name and (name.end() < len(text) or "." not in name.group(1) or name.group(1)[0].isupper()):
        kind = name.group(1)
        return f"{kind} · {http}" if http else kind
    if http:
        return http
    head = text.split(":", 1)[0].strip() or "(no error text)"
    return _DIGITS.sub("N", head)[:60]


def count_kinds(errors: Iterable[str]) -> dict[str, int]:
    """How many of ``errors`` are of each kind: the ``TOP_KINDS`` most frequent, most first, and the rest
    as ``OTHER``."""
    counts = Counter(error_kind(error) for error in errors)
    top = dict(counts.most_common(TOP_KINDS))
    rest = sum(counts.values()) - sum(top.values())
    if rest:
        top[OTHER] = rest
    return top
