"""Every descriptor is closed exactly once, whatever instruction a Ctrl-C lands on.

A KeyboardInterrupt is raised at each bytecode instruction, one run per instruction, of
the Python code that opens a file of a job directory (``safefs.open_file``, ``open_fd``,
``read_meta``) through an opcode trace: that is where a real SIGINT is turned into an
exception. Each run must end with the KeyboardInterrupt itself (never an ``OSError(EBADF)``
from a second close, never a "damaged" error), and the process must hold exactly the
descriptors it held before.
"""

from __future__ import annotations

import contextlib
import dis
import errno
import io
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest
from popkit import take

import diskfrontier
from diskfrontier import Frontier, Request
from diskfrontier.core.errors import FrontierError
from diskfrontier.files.safefs import open_fd, open_file
from diskfrontier.jobdir.layout import Layout, read_meta

_MAX_RUNS = 5000


def _open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


_TRACED = (os.path.dirname(os.path.abspath(diskfrontier.__file__)), os.path.abspath(os.__file__),
           os.path.abspath(contextlib.__file__))
_CALL_NAMES = ("CALL", "CALL_KW", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_METHOD", "CALL_FUNCTION_EX")
_CALLS = {dis.opmap[name] for name in _CALL_NAMES if name in dis.opmap}  # every Python since 3.10
_CHECKS = {dis.opmap[name] for name in ("RESUME", "JUMP_BACKWARD", "JUMP_ABSOLUTE") if name in dis.opmap}


class _Interrupt:
    """An opcode trace that raises KeyboardInterrupt at the ``at``-th point a signal can be handled.

    CPython runs a signal handler where it checks for pending work: after a call returns,
    at a function's start and at a loop's backward jump. Only the code of diskfrontier and of
    the standard modules it opens files through (``os.fdopen``, ``contextlib``) is traced.
    """

    def __init__(self, at: int) -> None:
        self.at = at
        self.seen = 0
        self.fired = False
        self.last: dict[int, int] = {}

    def trace(self, frame: Any, event: str, arg: Any) -> Any:
        if not frame.f_code.co_filename.startswith(_TRACED):
            return None
        frame.f_trace_opcodes = True
        if event == "opcode" and not self.fired:
            op = frame.f_code.co_code[frame.f_lasti]
            previous = self.last.get(id(frame))
            self.last[id(frame)] = op
            if previous in _CALLS or op in _CHECKS:
                self.seen += 1
                if self.seen == self.at:
                    self.fired = True
                    raise KeyboardInterrupt
        return self.trace


def _interrupt_everywhere(call: Callable[[], Any], close: Callable[[Any], None]) -> int:
    """Run ``call`` once per instruction it executes, interrupted there; return the number of runs."""
    closes: list[int] = []
    real_close = os.close

    def counting_close(fd: int) -> None:
        closes.append(fd)
        real_close(fd)

    for at in range(1, _MAX_RUNS):
        before = _open_fds()
        interrupt = _Interrupt(at)
        closes.clear()
        os.close = counting_close
        sys.settrace(interrupt.trace)
        try:
            result = call()
        except KeyboardInterrupt:
            result = None
        except BaseException as exc:  # any other exception is the failure under test
            sys.settrace(None)
            os.close = real_close
            raise AssertionError(f"interrupt at instruction {at}: {type(exc).__name__}: {exc}") from exc
        finally:
            sys.settrace(None)
            os.close = real_close
        if result is not None:
            close(result)
        assert len(closes) == len(set(closes)), f"interrupt at instruction {at}: closed {closes}"
        assert _open_fds() == before, f"interrupt at instruction {at}: descriptors leaked or lost"
        if not interrupt.fired:
            assert result is not None
            return at
    raise AssertionError("the call never completed")


def test_open_file_closes_its_descriptor_once_when_interrupted_anywhere(tmp_path):
    path = str(tmp_path / "frontier.json")
    with open(path, "wb") as f:
        f.write(b"{}")
    for mode in ("rb", "r+b", "ab", "r"):
        def opening(mode: str = mode) -> Any:
            return open_file(path, mode)

        runs = _interrupt_everywhere(opening, lambda f: f.close())
        assert runs > 3


def test_open_fd_closes_its_descriptor_once_when_interrupted_anywhere(tmp_path):
    path = str(tmp_path / "requests.urls")
    runs = _interrupt_everywhere(lambda: open_fd(path, os.O_RDWR | os.O_CREAT), os.close)
    assert runs > 3


def test_reading_frontier_json_under_an_interrupt_reports_no_damage(tmp_path):
    job = str(tmp_path / "job")
    with Frontier(job) as frontier:
        frontier.push(Request("https://a.example/"))
    layout = Layout(job)
    runs = _interrupt_everywhere(lambda: read_meta(layout), lambda meta: None)
    assert runs > 3
    with Frontier(job) as frontier:
        assert take(frontier).url == "https://a.example/"


@pytest.mark.parametrize("step", ["fstat", "fcntl"])
def test_an_interrupt_after_the_open_closes_the_descriptor_once(tmp_path, monkeypatch, step):
    """The simple case of the above, by patching: the interrupt comes out, the fd is closed once."""
    path = str(tmp_path / "frontier.json")
    with open(path, "wb") as f:
        f.write(b"{}")
    closes: list[int] = []
    real_close = os.close

    def counting_close(fd: int) -> None:
        closes.append(fd)
        real_close(fd)

    def interrupted(*args: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "close", counting_close)
    if step == "fstat":
        monkeypatch.setattr(os, "fstat", interrupted)
    else:
        import fcntl
        monkeypatch.setattr(fcntl, "fcntl", interrupted)
    before = _open_fds()
    with pytest.raises(KeyboardInterrupt):
        open_file(path)
    monkeypatch.undo()
    assert len(closes) == 1
    assert _open_fds() == before
    with pytest.raises(OSError) as raised:
        os.fstat(closes[0])
    assert raised.value.errno == errno.EBADF


def test_a_file_object_dropped_by_an_interrupt_is_not_closed_again(tmp_path, monkeypatch):
    """An interrupt right after the file object exists: it closes its own descriptor, nothing else does."""
    import builtins

    real_open = builtins.open

    def open_then_interrupt(*args: Any, **kwargs: Any) -> Any:
        real_open(*args, **kwargs)  # dropped at once: its finaliser closes the descriptor
        raise KeyboardInterrupt

    job = str(tmp_path / "job")
    Frontier(job).close()
    before = _open_fds()
    monkeypatch.setattr(builtins, "open", open_then_interrupt)
    monkeypatch.setattr(io, "open", open_then_interrupt)
    import diskfrontier.jobdir.layout as jobdir
    with pytest.raises(KeyboardInterrupt):
        try:
            jobdir.read_meta(Layout(job))
        except FrontierError as exc:  # pragma: no cover - the failure under test
            raise AssertionError(f"an interrupt reported as {exc}") from exc
    monkeypatch.undo()
    assert _open_fds() == before
