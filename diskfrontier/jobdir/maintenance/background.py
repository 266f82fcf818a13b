"""Running a maintenance job (a checkpoint, a compaction) beside a live frontier: in a child process or a thread.

A job is a function of files only: the journal up to an offset the frontier chose (which no
write changes any more: the journal only grows), the saved state it starts from, and the
names of the new files it writes. So it can run anywhere. By default it runs in a child
process (``python`` started anew, importing this very package by its path), on another
core, so that the frontier's own calls never wait for it, not even for the interpreter lock;
where no child can be started it runs in a thread of the frontier's process, and costs
its calls that share of the interpreter instead.

The child reads its job as one JSON line on its standard input and writes its result as
one JSON line on its standard output. It writes only new files under names nobody else
uses (created exclusively) and never renames or removes one: what it made becomes part of
the job directory only when the frontier, which holds the lock, says so (``upkeep.py``).
It ignores Ctrl-C (the frontier stops it at its close) and exits at once when its
standard input reaches its end: the frontier that started it is gone, killed or not, and
a later holder removes whatever it left.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from .jobs import Cancelled

log = logging.getLogger("diskfrontier")

RUNNERS = ("process", "thread")
_BOOT = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location(\n"
    "    'diskfrontier', sys.argv[1], submodule_search_locations=[sys.argv[2]])\n"
    "module = importlib.util.module_from_spec(spec)\n"
    "sys.modules['diskfrontier'] = module\n"
    "spec.loader.exec_module(module)\n"
    "from diskfrontier.jobdir.maintenance import background\n"
    "background.worker_main()\n"
)
_MAX_OUTPUT = 1 << 20


def run_job(params: dict[str, Any], cancelled: Callable[[], bool],
            progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run the job ``params`` describe here, in this process; its result (a JSON-ready dict). ``progress``:
    called as ``progress(done, total)`` while it reads the journal (a job run in the caller's thread)."""
    # the job functions import the journal's modules: only when a job runs
    kind = params.get("job")
    if kind == "checkpoint":
        from .jobs import checkpoint

        return checkpoint(params, cancelled, progress)
    if kind == "compact":
        from .compaction import compact_beside

        return compact_beside(params, cancelled, progress)
    raise ValueError(f"unknown job {kind!r}")


def worker_main() -> None:
    """The child process: one job from standard input, its result to standard output."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    line = sys.stdin.buffer.readline()
    params = json.loads(line)

    def watch_parent() -> None:
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(3)  # the frontier is gone: what this job wrote is removed by the next holder

    threading.Thread(target=watch_parent, daemon=True).start()
    try:
        result = run_job(params, lambda: False)
    except BaseException as exc:  # the parent is told, whatever it was
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=8)}
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)


class Job:
    """One job running in the background; ``poll`` gives its result once it is over."""

    def __init__(self, params: dict[str, Any], runner: str) -> None:
        if runner not in RUNNERS:
            raise ValueError(f"runner must be one of {RUNNERS}, got {runner!r}")
        self.params = params
        self.started = time.monotonic()
        self.runner = runner
        self._result: dict[str, Any] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        if runner == "process":
            try:
                self._start_process()
                return
            except OSError as exc:
                log.warning("a maintenance process could not be started (%s): maintenance runs in a thread", exc)
                self.runner = "thread"
        self._thread = threading.Thread(target=self._in_thread, name="diskfrontier-maintenance", daemon=True)
        self._thread.start()

    def _start_process(self) -> None:
        import diskfrontier

        package = os.path.dirname(os.path.abspath(diskfrontier.__file__))
        executable = sys.executable
        if not executable:
            raise OSError("sys.executable is empty")
        self._proc = subprocess.Popen(  # noqa: S603 - this interpreter, this package's own code, no shell
            [executable, "-c", _BOOT, os.path.join(package, "__init__.py"), package],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True)
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(self.params).encode() + b"\n")
        self._proc.stdin.flush()

    def _in_thread(self) -> None:
        try:
            self._result = run_job(self.params, self._cancel.is_set)
        except Cancelled:
            self._result = {"ok": False, "error": "cancelled"}
        except Exception as exc:
            self._result = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(8)}

    @property
    def pid(self) -> int | None:
        """The child process's pid (None for a job in a thread)."""
        return None if self._proc is None else self._proc.pid

    def poll(self) -> dict[str, Any] | None:
        """The job's result once it is over (``{"ok": False, "error": ...}`` if it failed), else None."""
        if self._result is not None:
            return self._result
        if self._thread is not None:
            return None
        proc = self._proc
        assert proc is not None
        if proc.poll() is None:
            return None
        self._result = self._collect(proc)
        return self._result

    def _collect(self, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
        assert proc.stdout is not None and proc.stderr is not None
        out = proc.stdout.read(_MAX_OUTPUT)
        err = proc.stderr.read(_MAX_OUTPUT).decode("utf-8", "replace").strip()
        self._close_pipes(proc)
        try:
            result = json.loads(out)
            if isinstance(result, dict):
                return result
        except ValueError:
            pass
        last = err.splitlines()[-1] if err else "no output"
        return {"ok": False, "error": f"the maintenance process ended with status {proc.returncode} ({last})"}

    @staticmethod
    def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def cancel(self) -> None:
        """Stop the job and wait for it: the child is killed, the thread told to stop (at its next step)."""
        self._cancel.set()
        if self._proc is not None and self._result is None:
            with contextlib.suppress(OSError):
                self._proc.kill()
            self._proc.wait()
            self._close_pipes(self._proc)
            self._result = {"ok": False, "error": "cancelled"}
        if self._thread is not None:
            self._thread.join()

    def forget(self) -> None:
        """In a forked child of the frontier's process: let go of the job without touching it."""
        self._proc = None
        self._thread = None
        self._result = {"ok": False, "error": "forked"}
