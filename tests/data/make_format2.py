"""Make the format-2 fixtures (tests/data/format2-*), with the release that wrote format 2.

    PYTHONPATH=<a checkout of diskfrontier 3a421fe> python tests/data/make_format2.py

Three hosts, 300 requests, a third of them done; "killed" directories are left by a
child process killed with SIGKILL while holding requests in flight, "clean" by a close.
``<name>.expected.json`` holds the URLs that draining the directory with that release
popped and the URLs that were done, each sorted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal

from diskfrontier import Frontier, Request

HERE = os.path.dirname(os.path.abspath(__file__))


def fill(path: str, order: str, killed: bool) -> list[str]:
    done = []
    frontier = Frontier(path, order=order)
    for i in range(300):
        frontier.push(Request(f"https://h{i % 3}.example/p/{i}", priority=i % 2))
    for i in range(150):
        request = frontier.pop()
        if i % 3 != 2 or not killed:  # a clean close puts what is in flight back on top: none is left
            frontier.done(request)
            done.append(request.url)
    if not killed:
        frontier.close()
    return done


def make(name: str, order: str, killed: bool) -> None:
    path = os.path.join(HERE, name)
    shutil.rmtree(path, ignore_errors=True)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        frontier_done = fill(path, order, killed)
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
    done = json.loads(data)
    scratch = path + ".drain"
    shutil.copytree(path, scratch)
    pending = []
    with Frontier(scratch) as frontier:
        while (request := frontier.pop()) is not None:
            pending.append(request.url)
            frontier.done(request)
    shutil.rmtree(scratch)
    with open(path + ".expected.json", "w") as f:
        json.dump({"pending": sorted(pending), "done": sorted(done), "order": order}, f, indent=0)


if __name__ == "__main__":
    make("format2-killed-lifo", "lifo", True)
    make("format2-killed-fifo", "fifo", True)
    make("format2-clean-lifo", "lifo", False)
