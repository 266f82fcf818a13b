"""What a run prints while it works when nobody watches a terminal: a plain line every few seconds on a
pipe (no carriage return, no escape code), under crawl(), acrawl() and the demo; and on a terminal the demo's
failure lines each on a line of their own, not run into its progress bar."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

import pytest
from servekit import script

CHILD = """
import asyncio, sys, time
from diskfrontier import AsyncFrontier, Frontier, Request, acrawl, crawl

path, mode = sys.argv[1], sys.argv[2]
print("crawling", flush=True)
if mode == "crawl":
    with Frontier(path) as frontier:
        frontier.push_many(Request(f"https://a.example/{i}") for i in range(100_000))
        crawl(frontier, lambda request, frontier: time.sleep(0.01), workers=2, progress_every=0.3)
else:
    async def handler(request, frontier):
        await asyncio.sleep(0.01)

    async def main():
        async with AsyncFrontier(path) as frontier:
            await frontier.push_many(Request(f"https://a.example/{i}") for i in range(100_000))
            await acrawl(frontier, handler, workers=2, progress_every=0.3)

    asyncio.run(main())
"""

LINE = re.compile(r"(progress|ended) (\d+):(\d\d): pending (\d+), in hand (\d+), done (\d+), retried (\d+), "
                  r"failed (\d+), ([0-9.]+)/s over the last (\d+)s")


def read_line(stream, deadline: float) -> str:
    """The next line of ``stream`` (a pipe), waiting until ``deadline`` (monotonic) at most."""
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        assert left > 0, f"no whole line in time; got {line!r}"
        ready, _, _ = select.select([stream], [], [], left)
        if ready:
            byte = os.read(stream.fileno(), 1)
            assert byte, f"the stream ended; got {line!r}"
            line += byte
    return line.decode()


@pytest.mark.parametrize("mode", ["crawl", "acrawl"])
def test_a_run_on_a_pipe_prints_a_plain_line_every_few_seconds(tmp_path, mode):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "job"), mode], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stderr is not None
        deadline = time.monotonic() + 120
        assert read_line(child.stdout, deadline) == "crawling\n"
        lines = [read_line(child.stderr, deadline) for _ in range(3)]  # while it runs: nothing ends it
        child.send_signal(signal.SIGINT)  # the pages in hand are finished, then the last line
        rest = child.communicate(timeout=120)[1].decode()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    text = "".join(lines) + rest
    assert "\r" not in text and "\x1b" not in text
    figures = [LINE.fullmatch(line) for line in text.splitlines() if line.startswith(("progress", "ended"))]
    assert all(figures) and len(figures) >= 4, text
    assert [m.group(1) for m in figures] == ["progress"] * (len(figures) - 1) + ["ended"]  # type: ignore[union-attr]
    done = [int(m.group(6)) for m in figures]  # type: ignore[union-attr]
    assert done == sorted(done) and done[-1] > 0
    assert any(float(m.group(9)) > 0 for m in figures[:-1])  # type: ignore[union-attr]


def test_the_demo_on_a_pipe_prints_plain_lines(tmp_path):
    result = subprocess.run([script(), "demo", str(tmp_path / "demo"), "--pages", "400", "--progress-every", "0.2"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr and "\x1b" not in result.stderr
    ended = [line for line in result.stderr.splitlines() if line.startswith("ended ")]
    assert len(ended) == 1 and LINE.fullmatch(ended[0]) and "done 400," in ended[0], result.stderr
    assert "failed at once" in result.stderr  # the broken links' lines still come
    assert result.stdout.startswith("finished: fetched 400 pages")


def test_the_demo_on_a_terminal_prints_each_failure_on_a_line_of_its_own(tmp_path):
    """The demo's broken links fail during its progress bar: each such line starts a line (the bar's is
    cleared first), never right after the bar's text."""
    main, child_end = pty.openpty()
    child = subprocess.Popen([script(), "demo", str(tmp_path / "demo"), "--pages", "400"], stdin=child_end,
                             stdout=child_end, stderr=child_end, close_fds=True)
    os.close(child_end)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        assert child.wait(120) == 0, out[-2000:]
    finally:
        os.close(main)
        if child.poll() is None:
            child.kill()
            child.wait()
    assert b"crawling  [" in out  # the bar was drawn
    starts = [m.start() for m in re.finditer(rb"diskfrontier: failed at once", out)]
    assert len(starts) == 2, out[-2000:]
    for start in starts:
        before = out[:start]
        assert before.endswith((b"\n", b"\r\x1b[2K")), before[-80:]
