"""``diskfrontier serve`` for the tests: started as a child process on a free loopback port, and
an aiohttp test client of a ``DashboardServer`` in this process."""

from __future__ import annotations

import asyncio
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

CHROMIUM = "/usr/bin/chromium"


def script() -> str:
    """The installed diskfrontier command beside this interpreter."""
    path = os.path.join(os.path.dirname(sys.executable), "diskfrontier")
    return path if os.path.exists(path) else shutil.which("diskfrontier") or path


class Lines:
    """A child's stdout read line by line on a thread, so that a test can wait for a line with a timeout."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line matching {pattern!r} in {timeout:g}s; got {self.seen!r}")
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"the process ended (exit {self.process.wait()}) before a line matching "
                                     f"{pattern!r}; got {self.seen!r}")
            self.seen.append(line)
            match = re.search(pattern, line)
            if match:
                return match


class Served:
    """``diskfrontier serve ARGS --port 0`` running: its URL, its printed lines and its token."""

    def __init__(self, *args: str, timeout: float = 60.0, cwd: str | None = None) -> None:
        self.process = subprocess.Popen([script(), "serve", *args, "--port", "0"], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, cwd=cwd)
        self.lines = Lines(self.process)
        self.url = self.lines.wait_for(r"at (http://\S+/) ", timeout).group(1)
        self.token: str | None = None
        if "--allow-control" in args:
            self.token = self.lines.wait_for(r"control token: (\S+)", timeout).group(1)

    def stop(self) -> tuple[int, str]:
        """SIGTERM, then its exit code and stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        assert self.process.stderr is not None
        return code, self.process.stderr.read()

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def with_client(app_factory: Callable[[], Any], check: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``check(client)`` with an aiohttp test client of the application ``app_factory()`` makes."""
    from aiohttp.test_utils import TestClient, TestServer

    async def main() -> Any:
        async with TestClient(TestServer(app_factory())) as client:
            return await check(client)

    return asyncio.run(main())
