"""A journal record, both ways: the one codec of what ``requests.urls`` holds.

The layout of a frame and of each record type (PUSH, DONE, HOST, RETRY, REFETCH, FAIL, PAUSE,
DROP, MARK), the older formats read to upgrade them and what a well-formed body is
(``body_ok_v3``) are described once, in ``docs/format.md`` ("requests.urls — the journal");
this module is that description in code. In short: a frame is ``length:u32 crc32:u32
check:u16`` with both checksums seeded by the record's identity (its byte offset folded to 32
bits and mixed with the directory's salt, ``jobdir.salt_of``), so a record is only valid where it was
written, in the directory that wrote it; a body's first byte is its type.

Everything that builds or reads a record goes through here: the frames and bodies of
every type, and the ``Request`` a request-carrying record (PUSH, RETRY, REFETCH) stores.
How records follow one another in the file, and which of them are intact, is
``journal.py``'s; what they mean together (pending, done, failed) is ``replay.py``'s.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass

from ..contract.checks import MAX_ERROR, MAX_SECONDS, MAX_TIME
from ..contract.checks import cap_error as cap_error  # a FAIL record's text: the rule both backends apply
from ..request.codec import decode_request
from ..request.model import Request

FRAME = struct.Struct(">IIH")
FRAME_V1 = struct.Struct(">II")
PUSH_HEAD = struct.Struct(">BiBBBHd")  # type, priority, flags, fplen, slotlen, attempts, not_before
PUSH_HEAD_V2 = struct.Struct(">BiBB")
DONE_BODY = struct.Struct(">BQ")
HOST_HEAD = struct.Struct(">BBddqQ")  # type, namelen, delay, blocked_until, budget, done
OFFSET = struct.Struct(">Q")  # a journal offset: a RETRY's or REFETCH's last 8 bytes name the request it finishes
TARGET_AT = 1  # where a DONE or FAIL body holds the request it names (an OFFSET)
FAIL_HEAD = struct.Struct(">BQd")  # type, target, failed_at; the error text follows
# A frame and the head of a request-carrying body, read in one call by a scan: (length, crc, check, type,
# priority, flags, fplen, slotlen, attempts, not_before).
FRAMED_HEAD = struct.Struct(">IIHBiBBBHd")
PAUSE_BODY = struct.Struct(">BBd")  # type, paused, at
MARK_HEAD = struct.Struct(">BBB")  # type, phase, idlen; the id and (phase 1) the result follow
PUSH, DONE, HOST, RETRY, REFETCH, FAIL, PAUSE, DROP, MARK = 1, 2, 3, 4, 5, 6, 7, 8, 9
MARK_BEGIN, MARK_END = 0, 1
MAX_RESULT = 1 << 16
BODY_SIZE = {DONE: DONE_BODY.size, DROP: DONE_BODY.size}  # the types whose bodies have one size (and no value to check)
REQUEUES = (RETRY, REFETCH)  # records that finish one request and make it pending again
CARRIES_REQUEST = (PUSH, RETRY, REFETCH)
FLAG_DONT_FILTER = 1
MAX_BODY = 1 << 30

_crc32 = zlib.crc32
_U32_PACK = struct.Struct(">I").pack
_FRAME_PACK = FRAME.pack
_HEADER = FRAME.size
_PUSH_SIZE = PUSH_HEAD.size
_PUSH_UNPACK = PUSH_HEAD.unpack_from
_PUSH_HEAD_PACK = PUSH_HEAD.pack
_DONE_PACK = DONE_BODY.pack
_DONE_SIZE = DONE_BODY.size
_DONE_LENGTH = _U32_PACK(DONE_BODY.size)
_TARGET = OFFSET.unpack_from


# ------------------------------------------------------------------ frames

def identity(offset: int, salt: int) -> int:
    """The 32-bit value a record's checksums start from: its offset folded to 32 bits, xor the
    directory's salt (``salt_of`` its id in ``frontier.json``; 0 for a format-2 or -3 journal).

    crc32 continued from two different values gives two different results for the same
    bytes, so a record checks only at its own offset of its own job directory.
    """
    return (offset ^ (offset >> 32) ^ salt) & 0xFFFFFFFF


def record_crc(offset: int, body: bytes | memoryview, salt: int) -> int:
    """The crc32 of a record's body, continued from its identity."""
    return _crc32(body, identity(offset, salt))


def header_check(offset: int, length: int, salt: int) -> int:
    """The 16-bit check of a frame's length field at ``offset``."""
    return _crc32(_U32_PACK(length), identity(offset, salt)) & 0xFFFF


def frame(offset: int, body: bytes, salt: int) -> bytes:
    """The record ``body`` framed to be written at ``offset`` of the journal whose salt is ``salt``."""
    seed = (offset ^ (offset >> 32) ^ salt) & 0xFFFFFFFF  # identity(offset, salt), inline
    length = len(body)
    return _FRAME_PACK(length, _crc32(body, seed), _crc32(_U32_PACK(length), seed) & 0xFFFF) + body


def done_frame(offset: int, target: int, salt: int) -> bytes:
    """``frame(offset, done_body(target), salt)`` in one step."""
    body = _DONE_PACK(DONE, target)
    seed = (offset ^ (offset >> 32) ^ salt) & 0xFFFFFFFF  # identity(offset, salt), inline
    return _FRAME_PACK(_DONE_SIZE, _crc32(body, seed), _crc32(_DONE_LENGTH, seed) & 0xFFFF) + body


def frame_all(offset: int, bodies: list[bytes], salt: int) -> tuple[bytes, list[int]]:
    """Frame ``bodies`` to be written one after the other from ``offset``; (bytes, each offset)."""
    out = []
    offsets = []
    for body in bodies:
        offsets.append(offset)
        out.append(frame(offset, body, salt))
        offset += _HEADER + len(body)
    return b"".join(out), offsets


# ------------------------------------------------------------------ well-formed bodies

def request_fits(kind: int, size: int, fplen: int, slotlen: int, not_before: float) -> bool:
    """Whether a PUSH, RETRY or REFETCH body of ``size`` bytes whose head holds ``fplen``, ``slotlen`` and
    ``not_before`` is well-formed: its fingerprint, slot, a request record and (RETRY, REFETCH) a target fit in
    it, and its time is 0 or in range."""
    return (size > _PUSH_SIZE + fplen + slotlen + (0 if kind == PUSH else 8)
            and (not not_before or 0.0 < not_before <= MAX_TIME))


def body_ok_v3(body: bytes | memoryview) -> bool:
    """A record of a known type whose size fits its own length fields and whose values are in range (format 3)."""
    size = len(body)
    if not size:
        return False
    kind = body[0]
    if kind in CARRIES_REQUEST:
        if size < _PUSH_SIZE:
            return False
        _, _, _, fplen, slotlen, _, not_before = _PUSH_UNPACK(body)
        return request_fits(kind, size, fplen, slotlen, not_before)
    if kind in BODY_SIZE:
        return size == BODY_SIZE[kind]
    if kind == PAUSE:
        return size == PAUSE_BODY.size and _pause_ok(body)
    if kind == FAIL:
        return _fail_ok(body, size)
    if kind == MARK:
        return parse_mark(body) is not None
    if kind != HOST or size <= HOST_HEAD.size or size != HOST_HEAD.size + body[1]:
        return False
    _, _, delay, blocked_until, budget, _ = HOST_HEAD.unpack_from(body)
    return ((delay != delay or 0.0 <= delay <= MAX_SECONDS) and budget >= -1
            and (0.0 <= blocked_until <= MAX_TIME or blocked_until == math.inf))


def _fail_ok(body: bytes | memoryview, size: int) -> bool:
    """A FAIL body: its head, a time in range and at most ``MAX_ERROR`` bytes of UTF-8 text."""
    if not FAIL_HEAD.size <= size <= FAIL_HEAD.size + MAX_ERROR:
        return False
    failed_at = FAIL_HEAD.unpack_from(body)[2]
    if not 0.0 <= failed_at <= MAX_TIME:
        return False
    try:
        bytes(body[FAIL_HEAD.size:]).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _pause_ok(body: bytes | memoryview) -> bool:
    _, paused, at = PAUSE_BODY.unpack_from(body)
    return paused in (0, 1) and 0.0 <= at <= MAX_TIME


def body_ok_v2(body: bytes | memoryview) -> bool:
    """A PUSH long enough for its header, fingerprint and a record, or a DONE of 9 bytes (formats 1, 2)."""
    kind = body[0]
    if kind == PUSH:
        return len(body) >= PUSH_HEAD_V2.size and len(body) > PUSH_HEAD_V2.size + body[PUSH_HEAD_V2.size - 1]
    return kind == DONE and len(body) == _DONE_SIZE


# ------------------------------------------------------------------ bodies built

def push_body(
    priority: int, dont_filter: bool, fingerprint: bytes, record: bytes, *, slot: bytes = b"", attempts: int = 0,
    not_before: float = 0.0, kind: int = PUSH, target: int | None = None,
) -> bytes:
    """The body of a PUSH (or RETRY/REFETCH, with ``target``) record, framed by ``frame`` once its offset is known."""
    flags = FLAG_DONT_FILTER if dont_filter else 0
    head = _PUSH_HEAD_PACK(kind, priority, flags, len(fingerprint), len(slot), attempts, not_before)
    tail = b"" if target is None else OFFSET.pack(target)
    return head + fingerprint + slot + record + tail


def host_body(name: bytes, delay: float, blocked_until: float, budget: int, done: int) -> bytes:
    """The body of a HOST record (see the module docstring for the field values)."""
    return HOST_HEAD.pack(HOST, len(name), delay, blocked_until, budget, done) + name


def done_body(offset: int) -> bytes:
    """The body of the DONE record for the PUSH at ``offset``."""
    return DONE_BODY.pack(DONE, offset)


def fail_body(target: int, failed_at: float, error: bytes) -> bytes:
    """The body of the FAIL record for the request at ``target`` (``error``: UTF-8, at most ``MAX_ERROR`` bytes)."""
    return FAIL_HEAD.pack(FAIL, target, failed_at) + error


def pause_body(paused: bool, at: float) -> bytes:
    """The body of a PAUSE record: paused (or running again) from ``at`` (a ``time.time()`` value)."""
    return PAUSE_BODY.pack(PAUSE, int(paused), at)


def drop_body(target: int) -> bytes:
    """The body of the DROP record for the pending request at ``target``."""
    return DONE_BODY.pack(DROP, target)


def mark_body(phase: int, ident: str, result: bytes = b"") -> bytes:
    """The body of a MARK record: ``MARK_BEGIN`` or ``MARK_END`` (with ``result``) of inbox command ``ident``."""
    name = ident.encode("ascii")
    return MARK_HEAD.pack(MARK, phase, len(name)) + name + result


def as_push(body: bytes | memoryview) -> bytes:
    """The PUSH body of the request a PUSH, RETRY or REFETCH body stores (format 3 or 4): a RETRY or REFETCH
    without its target, so that it finishes nothing."""
    if body[0] == PUSH:
        return bytes(body)
    return bytes([PUSH]) + bytes(body[1:-8])


def retargeted(body: bytes | memoryview, target: int) -> bytes:
    """A RETRY or REFETCH body naming ``target`` instead of the request it named."""
    return bytes(body[:-8]) + OFFSET.pack(target)


# ------------------------------------------------------------------ bodies read

def kind_of(body: bytes | memoryview) -> int:
    """The type of a record's body (``PUSH`` ... ``FAIL``)."""
    return body[0]


@dataclass(frozen=True)
class Pushed:
    """The fields of a PUSH, RETRY or REFETCH body."""

    kind: int
    priority: int
    dont_filter: bool
    fingerprint: bytes
    slot: bytes  # empty in a format-2 record: the URL's host
    attempts: int
    not_before: float
    record: memoryview
    target: int | None  # the request a RETRY or REFETCH finishes

    def request(self) -> Request:
        """The request its record stores, with this head's priority, flag, fingerprint and slot (none kept by
        a format-1 or 2 journal: its URL's host; no attempts, time or journal offset); ``ValueError`` if the
        record cannot be decoded (a slot that is not UTF-8 included)."""
        slot = self.slot.decode("utf-8") if self.slot else None
        return decode_request(self.record, self.priority, self.dont_filter, self.fingerprint, None, slot)


def parse_push(body: bytes | memoryview, version: int = 3) -> Pushed:
    """The fields of a request-carrying body (of a format-3 journal, or a format-1/2 PUSH)."""
    view = memoryview(body)
    if version < 3:
        _, priority, flags, fplen = PUSH_HEAD_V2.unpack_from(body)
        start = PUSH_HEAD_V2.size
        return Pushed(PUSH, priority, bool(flags & FLAG_DONT_FILTER), bytes(view[start:start + fplen]), b"", 0, 0.0,
                      view[start + fplen:], None)
    kind, priority, flags, fplen, slotlen, attempts, not_before = _PUSH_UNPACK(body)
    fp_end = _PUSH_SIZE + fplen
    slot_end = fp_end + slotlen
    if kind == PUSH:
        return Pushed(kind, priority, bool(flags & FLAG_DONT_FILTER), bytes(view[_PUSH_SIZE:fp_end]),
                      bytes(view[fp_end:slot_end]), attempts, not_before, view[slot_end:], None)
    return Pushed(kind, priority, bool(flags & FLAG_DONT_FILTER), bytes(view[_PUSH_SIZE:fp_end]),
                  bytes(view[fp_end:slot_end]), attempts, not_before, view[slot_end:-8],
                  _TARGET(body, len(body) - 8)[0])


def priority_and_time(body: bytes | memoryview) -> tuple[int, float]:
    """The priority and not_before of a PUSH, RETRY or REFETCH body (format 3 or 4)."""
    _, priority, _, _, _, _, not_before = _PUSH_UNPACK(body)
    return priority, not_before


def requeue_target(body: bytes | memoryview) -> int:
    """The request a RETRY or REFETCH body finishes."""
    return int(_TARGET(body, len(body) - 8)[0])


@dataclass(frozen=True)
class HostRecord:
    """The fields of a HOST body."""

    name: bytes
    delay: float  # NaN: the frontier's default
    blocked_until: float
    budget: int  # -1: none
    done: int


def parse_host(body: bytes | memoryview) -> HostRecord:
    """The fields of a HOST body."""
    _, namelen, delay, blocked_until, budget, done = HOST_HEAD.unpack_from(body)
    return HostRecord(bytes(body[HOST_HEAD.size:HOST_HEAD.size + namelen]), delay, blocked_until, budget, done)


@dataclass(frozen=True)
class FailRecord:
    """The fields of a FAIL body."""

    target: int
    failed_at: float
    error: str


def parse_fail(body: bytes | memoryview) -> FailRecord:
    """The fields of a FAIL body (checked by the scan or ``read_fail``)."""
    _, target, failed_at = FAIL_HEAD.unpack_from(body)
    return FailRecord(target, failed_at, bytes(body[FAIL_HEAD.size:]).decode("utf-8"))


@dataclass(frozen=True)
class MarkRecord:
    """The fields of a MARK body."""

    phase: int  # MARK_BEGIN or MARK_END
    ident: str
    result: str  # JSON text; "" for a MARK_BEGIN


def parse_mark(body: bytes | memoryview) -> MarkRecord | None:
    """The fields of a MARK body; None if it is malformed."""
    size = len(body)
    if size < MARK_HEAD.size:
        return None
    _, phase, idlen = MARK_HEAD.unpack_from(body)
    end = MARK_HEAD.size + idlen
    if phase not in (MARK_BEGIN, MARK_END) or not 1 <= idlen <= 64 or size < end or size - end > MAX_RESULT:
        return None
    ident = bytes(body[MARK_HEAD.size:end])
    if not all(c in _ID_BYTES for c in ident) or (phase == MARK_BEGIN and size != end):
        return None
    try:
        result = bytes(body[end:]).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return MarkRecord(phase, ident.decode("ascii"), result)


_ID_BYTES = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz._-")


def parse_pause(body: bytes | memoryview) -> tuple[bool, float]:
    """(paused, at) of a PAUSE body."""
    _, paused, at = PAUSE_BODY.unpack_from(body)
    return bool(paused), at


def push_priority(body: bytes | memoryview) -> int:
    """The priority of a PUSH body."""
    return int.from_bytes(body[1:5], "big", signed=True)


def done_target(body: bytes | memoryview) -> int:
    """The PUSH offset a DONE body names."""
    return int(_TARGET(body, TARGET_AT)[0])


def fail_target(body: bytes | memoryview) -> int:
    """The request a FAIL body names."""
    return int(_TARGET(body, TARGET_AT)[0])


# ------------------------------------------------------------------ the stored request

def framed(offset: int, request: Request, slot: bytes, record: bytes, salt: int, *, attempts: int = 0,
           not_before: float = 0.0, kind: int = PUSH, target: int | None = None) -> bytes:
    """The record storing ``request`` (its ``slot`` as UTF-8, its msgpack ``record``), framed to be written at
    ``offset`` of the journal whose salt is ``salt``.

    The same bytes as ``frame(offset, push_body(...), salt)``; a PUSH of a request due now and never
    tried (every usual push) is framed in one step here.
    """
    if kind == PUSH and not attempts and not not_before:
        fingerprint = request.fingerprint
        stored = _PUSH_HEAD_PACK(PUSH, request.priority, FLAG_DONT_FILTER if request.dont_filter else 0,
                                 len(fingerprint), len(slot), 0, 0.0) + fingerprint + slot + record
        length = len(stored)
        seed = (offset ^ (offset >> 32) ^ salt) & 0xFFFFFFFF  # identity(offset, salt), inline
        return _FRAME_PACK(length, _crc32(stored, seed), _crc32(_U32_PACK(length), seed) & 0xFFFF) + stored
    return frame(offset, push_body(request.priority, request.dont_filter, request.fingerprint, record, slot=slot,
                                   attempts=attempts, not_before=not_before, kind=kind, target=target), salt)


def body(request: Request, record: bytes, *, attempts: int = 0, not_before: float = 0.0, kind: int = PUSH,
         target: int | None = None) -> bytes:
    """The (unframed) body of the record storing ``request``."""
    return push_body(request.priority, request.dont_filter, request.fingerprint, record, slot=request.slot.encode(),
                     attempts=attempts, not_before=not_before, kind=kind, target=target)


def retried(stored: bytes | memoryview, target: int) -> tuple[bytes, int, bytes]:
    """A RETRY body naming ``target`` for the request whose stored body is ``stored``, pending again now with
    ``attempts`` 0; with its priority and slot."""
    kind, priority, flags, fplen, slotlen, _attempts, _not_before = _PUSH_UNPACK(stored)
    start = _PUSH_SIZE + fplen
    slot = bytes(stored[start:start + slotlen])
    record = bytes(stored[start + slotlen:len(stored) if kind == PUSH else len(stored) - 8])
    new = push_body(priority, bool(flags & FLAG_DONT_FILTER), bytes(stored[_PUSH_SIZE:start]), record, slot=slot,
                    kind=RETRY, target=target)
    return new, priority, slot


def returned(stored: bytes | memoryview, target: int) -> bytes:
    """A RETRY body naming ``target`` for the request whose stored body is ``stored``, pending again now with
    its attempts as they are: a request in flight given back at a close, which takes its place at the
    journal's end as it does at the queues' (so that the journal's order stays the queues')."""
    kind, priority, flags, fplen, _slotlen, attempts, _not_before = _PUSH_UNPACK(stored)
    end = len(stored) if kind == PUSH else len(stored) - 8
    head = _PUSH_HEAD_PACK(RETRY, priority, flags, fplen, _slotlen, attempts, 0.0)
    return head + bytes(stored[_PUSH_SIZE:end]) + OFFSET.pack(target)


def load(stored: bytes | memoryview, offset: int) -> tuple[Request, bytes]:
    """The request stored at ``offset`` as ``stored`` (its body), and its slot as UTF-8.

    The request's ``_seq`` is ``offset`` and its ``_size`` the record's; ``attempts`` and ``not_before``
    are set as stored. Raises ``ValueError`` for a record that cannot be decoded.
    """
    kind, priority, flags, fplen, slotlen, attempts, not_before = _PUSH_UNPACK(stored)
    start = _PUSH_SIZE + fplen
    end = len(stored) if kind == PUSH else len(stored) - 8
    slot = bytes(stored[start:start + slotlen])
    request = decode_request(stored[start + slotlen:end], priority, bool(flags & FLAG_DONT_FILTER),
                             bytes(stored[_PUSH_SIZE:start]), offset, slot.decode("utf-8"))
    if attempts:
        request.attempts = attempts
    if not_before:
        request.not_before = not_before
    request._size = _HEADER + len(stored)
    return request, slot


def request_of(stored: bytes | memoryview, version: int = 4) -> Request:
    """The request stored as ``stored`` (a body of a format-``version`` journal) as a read-only view shows it:
    its slot, attempts and not_before (None for "now") as stored, no journal offset.

    Raises ``ValueError`` for a record that cannot be decoded (a slot that is not UTF-8 included).
    """
    pushed = parse_push(stored, version)
    request = pushed.request()
    request.attempts = pushed.attempts
    request.not_before = pushed.not_before or None
    return request


def slot_of(stored: bytes | memoryview) -> bytes:
    """The slot (UTF-8) of a stored request's body."""
    _, _, _, fplen, slotlen, _, _ = _PUSH_UNPACK(stored)
    start = _PUSH_SIZE + fplen
    return bytes(stored[start:start + slotlen])


def priority_of(stored: bytes | memoryview) -> int:
    """The priority of a stored request's body."""
    return int(_PUSH_UNPACK(stored)[1])
