"""What the tests' servers (redis-server, PostgreSQL) share about their process: a free loopback port, a child
that dies with the thread that started it, and the wait until a server just started takes clients."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

PORT_TRIES = 20  # new ports tried when the one found free was taken before the server bound it


def free_port() -> int:
    """A loopback port free now (another process may take it before the server binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent() -> Callable[[], None] | None:
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


def wait_until_up(proc: subprocess.Popen, log: str, begun: int, answers: Callable[[], bool], *,
                  taken: tuple[str, ...], name: str, never: str, timeout: float, poll: float) -> bool:
    """Wait until the server ``proc`` just started answers (``answers()``): True; False if it exited because its
    port was taken (one of ``taken`` in what its ``log`` says from offset ``begun``). Any other exit, or no
    answer in ``timeout`` seconds (``never`` says which), is a RuntimeError naming the server ``name``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(log) as f:
                f.seek(begun)
                said = f.read()
            if any(text in said for text in taken):
                return False
            raise RuntimeError(f"{name} exited at start: {said[-2000:]}")
        if answers():
            return True
        time.sleep(poll)
    raise RuntimeError(f"{name} {never}")
