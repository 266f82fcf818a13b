"""A real redis-server for the tests: started on a free loopback port in a temporary folder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable

import pytest
from serverprocess import PORT_TRIES, die_with_parent, free_port, wait_until_up


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


class RedisServer:
    """One redis-server process, killed when the process that started it ends; ``kill()`` is a
    real SIGKILL and ``start()`` brings it back on the same port and folder (its AOF is read
    again)."""

    def __init__(self, folder: str, *, aof: bool = True, fsync: str = "everysec",
                 extra: tuple[str, ...] = (), choose_port: Callable[[], int] | None = None) -> None:
        self.binary = require_redis_server()
        self.folder = folder
        self.aof, self.fsync, self.extra = aof, fsync, extra
        self._choose_port = choose_port or free_port  # a free port, each call
        self.port = self._choose_port()
        self.proc: subprocess.Popen | None = None
        os.makedirs(folder, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> None:
        """Start the server and wait until it answers PING. At its first start, a port that another
        process took since it was found free (another test run on this machine, a worker of this
        one) is given up for a new one; a restart keeps its port, as a crashed server would."""
        for _ in range(PORT_TRIES if self.proc is None else 1):
            if self._start(timeout):
                return
            self.port = self._choose_port()
        raise RuntimeError(f"redis-server found no free port in {PORT_TRIES} tries")

    def _start(self, timeout: float) -> bool:
        """Start the server on ``self.port``; False if that port was taken."""
        log = os.path.join(self.folder, "redis.log")
        with open(log, "a") as f:
            f.write(f"-- start on port {self.port}\n")
            start_of_this_run = f.tell()
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.folder,
                "--save", "", "--appendonly", "yes" if self.aof else "no", "--appendfsync", self.fsync,
                "--daemonize", "no", "--logfile", log, "--protected-mode", "no", *self.extra]
        # Killed with this process however it ends, even by SIGKILL (the conftest's watchdog
        # also kills it; this holds where that is not loaded).
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=die_with_parent())
        return wait_until_up(self.proc, log, start_of_this_run, self._answers, taken=("Address already in use",),
                             name="redis-server", never="did not answer PING", timeout=timeout, poll=0.02)

    def _answers(self) -> bool:
        """Whether the server on ``self.port`` is this one (not another that holds the port) and
        has loaded its data."""
        import redis

        assert self.proc is not None
        client = redis.Redis(port=self.port, socket_timeout=5, socket_connect_timeout=1)
        try:
            return client.info("server")["process_id"] == self.proc.pid and client.ping()
        except redis.RedisError:  # not listening yet, or loading its AOF
            return False
        finally:
            client.close()

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
