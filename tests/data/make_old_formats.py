"""Make the fixtures of older job directory formats (tests/data/format2-*, format3-*), each with the
release that wrote that format:

    PYTHONPATH=<a checkout of diskfrontier 3a421fe> python tests/data/make_old_formats.py 2
    PYTHONPATH=<a checkout of diskfrontier bb50193> python tests/data/make_old_formats.py 3

Three hosts, 300 requests, some done (format 3: some failed too, and one host with a delay of
its own); "killed" directories are left by a child process killed with SIGKILL while holding
requests in flight, "clean" by a close. ``<name>.expected.json`` holds the URLs that draining
the directory with that release popped and the URLs that were done, each sorted (format 3:
also the failed requests, URL and error, and the host delays).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from typing import Any

from diskfrontier import Frontier, Request

HERE = os.path.dirname(os.path.abspath(__file__))


def fill(path: str, order: str, killed: bool, version: int) -> list[str]:
    done = []
    frontier = Frontier(path, order=order)
    if version >= 3:
        frontier.set_delay("h1.example", 0.5)
    for i in range(300):
        frontier.push(Request(f"https://h{i % 3}.example/p/{i}", priority=i % 2))
    for i in range(150):
        request = frontier.pop()
        assert request is not None
        if version >= 3 and i % 9 == 4:
            frontier.fail(request, f"boom {request.url}")
        elif i % 3 != 2 or not killed:  # a clean close puts what is in flight back on top: none is left
            frontier.done(request)
            done.append(request.url)
    if not killed:
        frontier.close()
    return done


def drain(path: str, version: int) -> dict[str, Any]:
    """What the release that wrote ``path`` gives back from a copy of it."""
    scratch = path + ".drain"
    shutil.copytree(path, scratch)
    out: dict[str, Any] = {}
    pending = []
    with Frontier(scratch) as frontier:
        if version >= 3:
            out["failed"] = sorted([item.request.url, item.error] for item in frontier.failed())
            out["delays"] = {info.host: info.delay for info in frontier.hosts() if info.delay}
            while not frontier.finished:  # a host with a delay of its own holds its requests back a while
                request = frontier.pop(timeout=5)
                assert request is not None
                pending.append(request.url)
                frontier.done(request)
        else:
            while (request := frontier.pop()) is not None:
                pending.append(request.url)
                frontier.done(request)
    shutil.rmtree(scratch)
    out["pending"] = sorted(pending)
    return out


def make(name: str, order: str, killed: bool, version: int) -> None:
    path = os.path.join(HERE, name)
    shutil.rmtree(path, ignore_errors=True)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        frontier_done = fill(path, order, killed, version)
        os.write(write, json.dumps(frontier_done).encode())
        os.close(write)
        if killed:
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 16):
        data += chunk
    os.waitpid(pid, 0)
    expected = drain(path, version)
    expected.update(done=sorted(json.loads(data)), order=order)
    with open(path + ".expected.json", "w") as f:
        json.dump(expected, f, indent=0)


if __name__ == "__main__":
    format_version = int(sys.argv[1])
    make(f"format{format_version}-killed-lifo", "lifo", True, format_version)
    make(f"format{format_version}-killed-fifo", "fifo", True, format_version)
    make(f"format{format_version}-clean-lifo", "lifo", False, format_version)
