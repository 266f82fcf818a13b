"""queuelib's disk queues read as files, without opening them as queues (which would change them).

* ``LifoDiskQueue``: one file; a 4-byte big-endian count at offset 0, written only when
  the queue is closed; then entries, each its bytes followed by its 4-byte length.
  ``pop`` reads the last entry and truncates it away.
* ``FifoDiskQueue``: a folder of chunk files ``q00000``, ``q00001``, ... each a run of
  entries prefixed by their 4-byte length, and ``info.json`` (head, tail and size),
  written only when the queue is closed.

After a clean close the headers say where the entries are. After a crash they do not:
``lifo_entries(..., trust_header=False)`` then walks the file back from its end, and
``fifo_entries`` without an ``info.json`` reads every chunk from the start.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Any

from ..files import boundedjson
from ..files.boundedjson import check_int
from ..files.safefs import open_file

_SIZE = struct.Struct(">L")


@dataclass
class Entries:
    """The entries of a queue in pop order, and what stopped the read early, if anything."""

    items: list[bytes] = field(default_factory=list)
    problem: str | None = None


def lifo_header(path: str) -> int:
    """The entry count a LIFO queue file's header gives (0 if the file is too short)."""
    with open_file(path) as f:
        head = f.read(_SIZE.size)
    return _SIZE.unpack(head)[0] if len(head) == _SIZE.size else 0


def lifo_entries(path: str, *, trust_header: bool = True) -> Entries:
    """A LIFO queue file's entries, newest first (pop order).

    ``trust_header``: read as many as the header counts; otherwise as many as the file
    holds, walking back from its end until the header is reached.
    """
    with open_file(path) as f:
        data = f.read()
    out = Entries()
    if len(data) < _SIZE.size:
        return out
    wanted = _SIZE.unpack_from(data)[0] if trust_header else None
    end = len(data)
    while end > _SIZE.size and (wanted is None or len(out.items) < wanted):
        if end - _SIZE.size < _SIZE.size:
            out.problem = f"{end - _SIZE.size} stray bytes after the header"
            break
        size = _SIZE.unpack_from(data, end - _SIZE.size)[0]
        start = end - _SIZE.size - size
        if start < _SIZE.size:
            out.problem = f"an entry length of {size} at byte {end - _SIZE.size} runs past the header"
            break
        out.items.append(data[start:end - _SIZE.size])
        end = start
    if wanted is not None and len(out.items) < wanted and out.problem is None:
        out.problem = f"the header counts {wanted} entries, the file holds {len(out.items)}"
    return out


MAX_CHUNKS = 1 << 31  # chunk numbers queuelib may have reached (q00000 onwards)


def read_fifo_info(path: str) -> dict[str, Any]:
    """A FIFO queue folder's ``info.json``, checked: ``ValueError`` (or ``OSError``) saying what is wrong.

    Every number is range-checked, so that none reaches queuelib's seek or a chunk loop
    out of range: ``chunksize``, ``size``, ``head`` = [chunk, entries in it] and ``tail`` =
    [chunk, entries popped from it, byte offset in it].
    """
    with open_file(os.path.join(path, "info.json")) as f:
        info = boundedjson.loads(f.read(boundedjson.MAX_JSON_BYTES + 1))
    if not isinstance(info, dict) or not isinstance(info.get("head"), list) or not isinstance(info.get("tail"), list):
        raise ValueError("it is not an object with a head and a tail list")
    if len(info["head"]) != 2 or len(info["tail"]) != 3:
        raise ValueError("its head is not [chunk, count] or its tail not [chunk, count, offset]")
    chunksize = check_int("chunksize", info["chunksize"], 1, MAX_CHUNKS) if "chunksize" in info else MAX_CHUNKS
    check_int("size", info.get("size"))
    hnum = check_int("head's chunk", info["head"][0], 0, MAX_CHUNKS)
    check_int("head's count", info["head"][1], 0, chunksize)
    check_int("tail's chunk", info["tail"][0], 0, hnum)
    check_int("tail's count", info["tail"][1], 0, chunksize)
    check_int("tail's offset", info["tail"][2])
    return info


def fifo_info(path: str) -> dict[str, Any] | None:
    """A FIFO queue folder's ``info.json``, or None if it is missing or unreadable."""
    try:
        return read_fifo_info(path)
    except (OSError, ValueError):
        return None


def fifo_entries(path: str) -> Entries:
    """A FIFO queue folder's entries, oldest first (pop order).

    With ``info.json``: the ``size`` entries from its tail. Without: every entry of every
    chunk (entries popped before a crash cannot be told apart from the others).
    """
    info = fifo_info(path)
    if info is not None:
        first, _, offset = info["tail"]
        last = info["head"][0]
    else:
        numbers = sorted(int(n[1:]) for n in os.listdir(path) if n.startswith("q") and n[1:].isdigit())
        first, offset, last = (numbers[0], 0, numbers[-1]) if numbers else (0, 0, -1)
    out = Entries()
    present = sorted(int(n[1:]) for n in os.listdir(path) if n.startswith("q") and n[1:].isdigit())
    for number in (n for n in present if first <= n <= last):  # not every number of a huge range
        chunk = os.path.join(path, f"q{number:05d}")
        with open_file(chunk) as f:
            data = f.read()
        pos = offset if number == first else 0
        while pos + _SIZE.size <= len(data):
            size = _SIZE.unpack_from(data, pos)[0]
            if pos + _SIZE.size + size > len(data):
                out.problem = f"{chunk}: an entry at byte {pos} is cut short"
                break
            out.items.append(data[pos + _SIZE.size:pos + _SIZE.size + size])
            pos += _SIZE.size + size
    if info is not None:
        del out.items[int(info["size"]):]
    return out
