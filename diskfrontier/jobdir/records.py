"""The stored request: a ``Request`` as the body of a PUSH, RETRY or REFETCH record, and back.

The one place the job directory's frontier builds and reads request-carrying records
(their byte layout is ``journal.py``'s, the request record inside them is
``request/codec.py``'s msgpack). Everything that stores a request, gives one back,
requeues a failed one or asks a stored request for its slot or priority goes through
here. The values it is given are checked by its caller (``attempts`` and ``not_before`` as the
journal holds them).
"""

from __future__ import annotations

import struct
import zlib

from ..request.codec import decode_request
from ..request.model import Request
from .journal import FLAG_DONT_FILTER, FRAME, PUSH, PUSH_HEAD, RETRY, frame, push_body

_UNPACK = PUSH_HEAD.unpack_from
_PACK_HEAD = PUSH_HEAD.pack
_PACK_FRAME = FRAME.pack
_PACK_U32 = struct.Struct(">I").pack
_crc32 = zlib.crc32
_HEAD = PUSH_HEAD.size
_FRAME = FRAME.size


def framed(offset: int, request: Request, slot: bytes, record: bytes, salt: int, *, attempts: int = 0,
           not_before: float = 0.0, kind: int = PUSH, target: int | None = None) -> bytes:
    """The record storing ``request`` (its ``slot`` as UTF-8, its msgpack ``record``), framed to be written at
    ``offset`` of the journal whose salt is ``salt``.

    The same bytes as ``frame(offset, push_body(...), salt)``; a PUSH of a request due now and never
    tried (every usual push) is framed in one step here.
    """
    if kind == PUSH and not attempts and not not_before:
        fingerprint = request.fingerprint
        stored = _PACK_HEAD(PUSH, request.priority, FLAG_DONT_FILTER if request.dont_filter else 0, len(fingerprint),
                            len(slot), 0, 0.0) + fingerprint + slot + record
        length = len(stored)
        seed = (offset ^ (offset >> 32) ^ salt) & 0xFFFFFFFF  # journal.identity(offset, salt), inline
        return _PACK_FRAME(length, _crc32(stored, seed), _crc32(_PACK_U32(length), seed) & 0xFFFF) + stored
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
    kind, priority, flags, fplen, slotlen, _attempts, _not_before = _UNPACK(stored)
    start = _HEAD + fplen
    slot = bytes(stored[start:start + slotlen])
    record = bytes(stored[start + slotlen:len(stored) if kind == PUSH else len(stored) - 8])
    new = push_body(priority, bool(flags & FLAG_DONT_FILTER), bytes(stored[_HEAD:start]), record, slot=slot,
                    kind=RETRY, target=target)
    return new, priority, slot


def load(stored: bytes | memoryview, offset: int) -> tuple[Request, bytes]:
    """The request stored at ``offset`` as ``stored`` (its body), and its slot as UTF-8.

    The request's ``_seq`` is ``offset`` and its ``_size`` the record's; ``attempts`` and ``not_before``
    are set as stored. Raises ``ValueError`` for a record that cannot be decoded.
    """
    kind, priority, flags, fplen, slotlen, attempts, not_before = _UNPACK(stored)
    start = _HEAD + fplen
    end = len(stored) if kind == PUSH else len(stored) - 8
    slot = bytes(stored[start:start + slotlen])
    request = decode_request(stored[start + slotlen:end], priority, bool(flags & FLAG_DONT_FILTER),
                             bytes(stored[_HEAD:start]), offset, slot.decode("utf-8"))
    if attempts:
        request.attempts = attempts
    if not_before:
        request.not_before = not_before
    request._size = _FRAME + len(stored)
    return request, slot


def slot_of(stored: bytes | memoryview) -> bytes:
    """The slot (UTF-8) of a stored request's body."""
    _, _, _, fplen, slotlen, _, _ = _UNPACK(stored)
    start = _HEAD + fplen
    return bytes(stored[start:start + slotlen])


def priority_of(stored: bytes | memoryview) -> int:
    """The priority of a stored request's body."""
    return int(_UNPACK(stored)[1])
