"""JSON read from a file that may be hostile: bounded in size and in nesting depth, numbers range-checked.

``json.loads`` of ``[[[[...`` 100,000 levels deep raises ``RecursionError``, which no
caller expects. ``loads`` here refuses a document longer than ``max_bytes`` or nesting
arrays and objects deeper than ``max_depth`` with a ``ValueError`` saying so, before
parsing it; each caller already turns a ``ValueError`` into the error that names its
file (``frontier.json``, ``requests.cursor``, ``active.json``, ``info.json``, a line of
an import).
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_JSON_BYTES = 1 << 20
"""The longest JSON document read from a job directory."""
MAX_JSON_DEPTH = 16
"""How deep arrays and objects may nest in a job directory's JSON files (they use 3 levels)."""

MAX_SIZE = 2**63 - 1
"""The largest file size, offset or count a job directory's files may state (what an ``off_t`` holds)."""
MAX_CRC = 2**32 - 1
"""The largest crc32."""

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class OutOfRange(ValueError):
    """A number read from a file lies outside what its field can hold."""


def check_int(name: str, value: Any, low: int = 0, high: int = MAX_SIZE) -> int:
    """``value`` if it is an int (not a bool) from ``low`` to ``high``; else ``ValueError`` naming ``name``.

    Every number read from a file goes through a check like this one before it reaches
    ``struct``, ``os.pread`` or an array, which raise ``OverflowError`` on a value too large.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} is {value!r:.80}, not an integer")
    if not low <= value <= high:
        shown = str(value) if value.bit_length() <= 256 else f"a {value.bit_length()}-bit number"
        raise OutOfRange(f"{name} is {shown}, outside {low}..{high}")
    return value


def nesting_depth(text: str) -> int:
    """How deep arrays and objects nest in the JSON ``text`` (brackets inside strings not counted)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for char in brackets:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def loads(data: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """``json.loads`` of ``data``, or ``ValueError`` for a document too long or nested too deep."""
    if len(data) > max_bytes:
        raise ValueError(f"it is longer than {max_bytes:,} bytes")
    text = data.decode("utf-8") if isinstance(data, bytes) else data  # UnicodeDecodeError is a ValueError
    if text.count("[") + text.count("{") > max_depth and nesting_depth(text) > max_depth:
        raise ValueError(f"its arrays and objects nest more than {max_depth} levels deep")
    try:
        return json.loads(text)
    except RecursionError:  # not reached after the check above; kept so that none can escape
        raise ValueError(f"its arrays and objects nest more than {max_depth} levels deep") from None
