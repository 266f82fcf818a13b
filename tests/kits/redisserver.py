"""A real redis-server for the tests: started on a free loopback port in a temporary folder."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest


def redis_server_binary() -> str | None:
    """The redis-server to run, or None (the tests that need it are skipped, or fail under CI)."""
    return os.environ.get("DISKFRONTIER_REDIS_SERVER") or shutil.which("redis-server")


def require_redis_server() -> str:
    binary = redis_server_binary()
    if binary is None:
        if os.environ.get("DISKFRONTIER_REQUIRE_REDIS"):
            pytest.fail("redis-server is not installed (DISKFRONTIER_REQUIRE_REDIS is set: .ci/run installs it)")
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    return binary


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn that has the child killed when this thread ends (Linux's PR_SET_PDEATHSIG),
    or None where that does not exist. Only for the main thread: the signal comes when the
    thread that started the child ends, not the process."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the line above
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server process, killed when the process that started it ends; ``kill()`` is a
    real SIGKILL and ``start()`` brings it back on the same port and folder (its AOF is read
    again)."""

    def __init__(self, folder: str, *, aof: bool = True, fsync: str = "everysec",
                 extra: tuple[str, ...] = ()) -> None:
        self.binary = require_redis_server()
        self.folder = folder
        self.aof, self.fsync, self.extra = aof, fsync, extra
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        os.makedirs(folder, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.folder,
                "--save", "", "--appendonly", "yes" if self.aof else "no", "--appendfsync", self.fsync,
                "--daemonize", "no", "--logfile", os.path.join(self.folder, "redis.log"),
                "--protected-mode", "no", *self.extra]
        # Killed with this process however it ends, even by SIGKILL (the conftest's watchdog
        # also kills it; this holds where that is not loaded).
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=_die_with_parent())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                with open(os.path.join(self.folder, "redis.log")) as f:
                    log = f.read()[-2000:]
                raise RuntimeError(f"redis-server exited at start: {log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError("redis-server did not answer PING")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def client(self):
        import redis

        return redis.Redis(port=self.port)
