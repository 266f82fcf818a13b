"""``ScriptChannel``: a client's scripts on one connection of its own (on a plain server: a call is a write and
a read, without a pool to take the connection from each time), where an acknowledgement may be sent without
waiting for its reply (``ack="pipelined"``).

A pipelined ``done`` writes its ``FINISH`` to the connection and returns once a kill of the process can no
longer keep it from the server (see ``_wait_sent``); its reply is read by the next
script call of this client on the connection (the next ``POP`` goes in the same round trip), by the
renewal thread's next beat, or by ``drain`` (before any read of the crawl on another connection, and at
close). Replies come back in the order the commands went, so each outstanding one is read, in turn, by
whichever call comes next; one lock keeps the threads of the client from interleaving on the connection.

What a reply says is only known then (``AckTally``): a lease found lost is logged and counted (``lost``);
an error (out of memory, damage found by the script's checks) is logged and counted (``failed``), and so
is the loss of the connection with replies outstanding (their outcome is unknown). In each of those cases the
request is still leased in Redis (or was done): it comes back when its lease runs out, never lost.
The scripts are loaded when the channel is made; a ``NOSCRIPT`` (the server's script cache was
flushed) has the script loaded again and the command sent again (it did not run).
"""

from __future__ import annotations

import collections
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .connection import log, script_error


def _packer() -> Callable[[tuple[Any, ...]], bytes] | None:
    """hiredis's packer of a command, or None without hiredis (redis-py's own packer then)."""
    try:
        import hiredis
    except ImportError:
        return None
    return hiredis.pack_command


_pack = _packer()

_SIOCOUTQNSD = 0x894B  # Linux ioctl: the bytes of a TCP socket's send queue not transmitted yet
Sent = tuple[str, str, list[Any]]  # a command sent: script name, its one key (the shard's meta), its arguments


@dataclass
class _Outstanding:
    """A command sent whose reply is still to be read, and what to do with it (None: a script call whose
    caller reads the reply itself)."""

    sent: Sent
    on_reply: Callable[[Any], None] | None


class ScriptChannel:
    """The crawl's scripts (``scripts``: name -> redis-py ``Script``) on one connection taken from the pool
    of ``redis`` (a plain server's client, not a cluster's)."""

    def __init__(self, redis: Any, scripts: dict[str, Any]) -> None:
        self._pool = redis.connection_pool
        self._scripts = scripts
        self._lock = threading.Lock()
        self._outstanding: collections.deque[_Outstanding] = collections.deque()
        self._conn = self._pool.get_connection()
        self._conn.health_check_interval = 0  # a health check's PING would read a reply meant for a step sent before
        try:
            self._load()
        except BaseException:
            self._pool.release(self._conn)
            raise

    @property
    def pending(self) -> int:
        """Commands sent whose replies are not read yet."""
        return len(self._outstanding)

    def _load(self) -> None:
        for script in self._scripts.values():
            self._conn.send_command("SCRIPT", "LOAD", script.script)
        for _script in self._scripts.values():
            self._conn.read_response()

    def _send(self, sent: Sent) -> None:
        name, key, args = sent
        command = ("EVALSHA", self._scripts[name].sha, 1, key, *args)
        if _pack is not None:
            # bytes, str and numbers are written as redis-py's encoder writes them (a str as UTF-8, a number as
            # its repr), without a call of the encoder for each; anything else is left to redis-py (its error)
            try:
                packed = _pack(command)
            except TypeError:
                pass
            else:
                self._conn.send_packed_command([packed], check_health=False)
                return
        self._conn.send_command(*command)

    # ------------------------------------------------------------------ calls
    def call(self, name: str, key: str, args: list[Any]) -> Any:
        """Run script ``name`` on ``key`` and return its reply; the replies outstanding before it are read
        (and seen to) on the way."""
        import redis.exceptions as rx

        sent: Sent = (name, key, args)
        with self._lock:
            redo: list[_Outstanding] = []
            answer: Any = None
            own = False  # the call's own command is to be sent again
            try:
                self._send(sent)
                self._settle(redo)
                try:
                    answer = self._conn.read_response()
                except rx.NoScriptError:
                    redo.append(_Outstanding(sent, None))
                    own = True
            except (rx.ConnectionError, rx.TimeoutError):
                self._broken()
                raise
            if redo:
                again = self._again(redo)
                if own:
                    answer = again
            return answer

    def send(self, name: str, key: str, args: list[Any], on_reply: Callable[[Any], None]) -> None:
        """Send script ``name`` on ``key`` without reading its reply: ``on_reply`` gets it (a reply, or a
        ``redis`` error, or None when the connection was lost before it was read) when a later call reads it.
        Replies already arrived are read first (so few wait unread in the socket)."""
        import redis.exceptions as rx

        with self._lock:
            redo: list[_Outstanding] = []
            try:
                while self._outstanding and self._conn.can_read(timeout=0):
                    self._settle_one(redo)
                self._send((name, key, args))
                self._outstanding.append(_Outstanding((name, key, args), on_reply))
                self._wait_sent(redo)
            except (rx.ConnectionError, rx.TimeoutError):
                self._broken()
                raise
            if redo:
                self._again(redo)

    def _wait_sent(self, redo: list[_Outstanding]) -> None:
        """Return once the kernel has transmitted every byte written to the connection.

        Written is not always enough: Linux resets a connection closed with unread data in its receive
        buffer (a reply not read yet, when the process is killed) and then drops what it had not
        transmitted (so does a closed connection that data arrives at later: a reply on its way), and a
        busy connection holds back small segments while earlier ones are unacknowledged. Transmitted bytes
        reach the server before that reset does. Where the queue cannot be read (not Linux), every reply
        outstanding is read instead. A Unix socket's write is in the server's receive buffer already."""
        import redis.exceptions as rx

        sock = getattr(self._conn, "_sock", None)
        if sock is None or sock.family == socket.AF_UNIX:
            return
        timeout = self._conn.socket_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.0
        while True:
            try:
                left = struct.unpack("i", _ioctl(sock.fileno(), _SIOCOUTQNSD, b"\0\0\0\0"))[0]
            except OSError:
                self._settle(redo)
                return
            if left == 0:
                return
            if deadline is not None and time.monotonic() > deadline:
                raise rx.TimeoutError(f"the kernel did not transmit {left} bytes to Redis in {timeout}s")
            time.sleep(pause)
            pause = min(0.001, pause * 2 or 0.00005)

    def drain(self) -> None:
        """Read every reply outstanding (and see to each)."""
        import redis.exceptions as rx

        with self._lock:
            if not self._outstanding:
                return
            redo: list[_Outstanding] = []
            try:
                self._settle(redo)
            except (rx.ConnectionError, rx.TimeoutError):
                self._broken()
                raise
            if redo:
                self._again(redo)

    def close(self) -> None:
        """Give the connection back to its pool (the outcome of replies still outstanding is unknown)."""
        with self._lock:
            if self._outstanding:
                self._broken()
            self._pool.release(self._conn)

    # ------------------------------------------------------------------ replies
    def _settle(self, redo: list[_Outstanding]) -> None:
        while self._outstanding:
            self._settle_one(redo)

    def _settle_one(self, redo: list[_Outstanding]) -> None:
        import redis.exceptions as rx

        entry = self._outstanding[0]
        try:
            reply: Any = self._conn.read_response()
        except rx.NoScriptError:
            self._outstanding.popleft()
            redo.append(entry)
            return
        except rx.ResponseError as exc:
            reply = exc
        self._outstanding.popleft()
        if entry.on_reply is not None:
            entry.on_reply(reply)

    def _again(self, redo: list[_Outstanding]) -> Any:
        """Load the scripts again and send each command of ``redo`` (refused with ``NOSCRIPT``: none ran) once
        more, in order, each waited for; the last one's reply (the caller's own, if it is there)."""
        import redis.exceptions as rx

        answer: Any = None
        try:
            self._load()
            for entry in redo:
                self._send(entry.sent)
                try:
                    answer = self._conn.read_response()
                except rx.ResponseError as exc:
                    if entry.on_reply is None:
                        raise
                    answer = exc
                if entry.on_reply is not None:
                    entry.on_reply(answer)
        except (rx.ConnectionError, rx.TimeoutError):
            for entry in redo:
                if entry.on_reply is not None:
                    entry.on_reply(None)
            self._broken()
            raise
        return answer

    def _broken(self) -> None:
        """The connection was lost (or is being given up) with replies outstanding: their outcome is unknown."""
        waiting = list(self._outstanding)
        self._outstanding.clear()
        self._conn.disconnect()
        for entry in waiting:
            if entry.on_reply is not None:
                entry.on_reply(None)
        if waiting:
            log.warning("the connection to Redis was lost with %d replies unread: whether those steps were applied "
                        "is unknown (a request not done comes back when its lease runs out)", len(waiting))


def _ioctl(fd: int, request: int, arg: bytes) -> bytes:
    try:
        import fcntl
    except ImportError:  # not a Unix: the caller reads the replies instead
        raise OSError("no fcntl here") from None
    return fcntl.ioctl(fd, request, arg)


class AckTally:
    """What the replies of pipelined acknowledgements said, once read: how many leases were found lost, and
    how many acknowledgements failed (an error, or the connection lost before the reply was read)."""

    def __init__(self) -> None:
        self.lost = 0
        self.failed = 0

    def on_reply(self, what: str, requests: list[Any]) -> Callable[[Any], None]:
        """What to do with the reply of one ``FINISH`` of ``what`` sent for ``requests`` (in its order)."""
        def seen_to(reply: Any) -> None:
            if reply is None:
                self.failed += len(requests)
            elif isinstance(reply, Exception):
                self.failed += len(requests)
                log.error("%s() of %d requests (the first: %r) was sent and refused by Redis (%s); they stay leased "
                          "and come back when their leases run out", what, len(requests), requests[0],
                          script_error(str(reply))[0])
            else:
                for request, ok in zip(requests, reply, strict=True):
                    if not int(ok):
                        self.lost += 1
                        log.warning("%s() of %r: its lease had run out and it was taken back (another client may "
                                    "hold it now); nothing was changed. Renew long work with extend()", what, request)
        return seen_to
