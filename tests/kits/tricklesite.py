"""A loopback HTTP server that answers one byte at a time: a robots.txt no socket timeout ends (a timeout
bounds each read, and a byte comes before each read times out)."""

from __future__ import annotations

import socket
import socketserver
import threading
import time

ROBOTS = b"User-agent: *\nDisallow:" + b" " * 200 + b"/\n"  # cut anywhere before its end, it allows everything


class TrickleSite:
    """A loopback server that answers every connection one byte every ``interval`` seconds, for at most
    ``seconds``, then hangs up. ``phase``: "headers" (from the status line on) or "body" (the headers at
    once, then a robots.txt that disallows everything, slowly). ``asked`` counts the connections."""

    def __init__(self, phase: str = "headers", interval: float = 2.0, seconds: float = 60.0) -> None:
        self.phase, self.interval, self.seconds = phase, interval, seconds
        self.asked = 0
        self.closing = threading.Event()
        site = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                site.serve(self.request)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def payload(self) -> tuple[bytes, int]:
        """What is sent, and how much of it at once."""
        head = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {len(ROBOTS)}\r\n\r\n".encode()
        return head + ROBOTS, len(head) if self.phase == "body" else 0

    def serve(self, connection: socket.socket) -> None:
        self.asked += 1
        connection.recv(65536)  # the request (one GET of a few hundred bytes)
        data, at_once = self.payload()
        end = time.monotonic() + self.seconds
        try:
            connection.sendall(data[:at_once])
            for n in range(at_once, len(data)):
                if self.closing.wait(self.interval) or time.monotonic() > end:
                    return
                connection.sendall(data[n:n + 1])
        except OSError:  # the client hung up
            return

    def __enter__(self) -> TrickleSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()
