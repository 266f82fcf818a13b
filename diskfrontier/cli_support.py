"""What every ``diskfrontier`` command shares: one-line errors, exit codes, the job directory
check, tables, sizes, progress bars."""

from __future__ import annotations

import functools
import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from .errors import FrontierError
from .recovery import Progress

F = TypeVar("F", bound=Callable[..., Any])

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a Unix tool killed by a closed pipe (``| head``)


def one_line_errors(func: F) -> F:
    """Give every command the same endings.

    A FrontierError or an OSError is one line on stderr and exit code 1; Ctrl-C is
    ``Aborted.`` and exit code 130; a reader that closed our stdout (``| head``) ends
    the command quietly with exit code 141. Never a traceback.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except KeyboardInterrupt:
            click.echo("Aborted.", err=True)
            raise SystemExit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            _silence_stdout()
            raise SystemExit(EXIT_BROKEN_PIPE) from None
        except FrontierError as exc:
            raise SystemExit(_fail(str(exc))) from None
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            raise SystemExit(_fail(f"{exc.strerror or exc}{where}")) from None

    return wrapper  # type: ignore[return-value]


def _silence_stdout() -> None:
    """Point stdout's file descriptor at /dev/null, so that flushing what is still
    buffered at exit does not fail again (Python would print "Exception ignored")."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (CliRunner's stream)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _fail(message: str) -> int:
    click.echo(f"Error: {message}", err=True)
    return 1


_NOT_A_JOBDIR_HINT = (
    "give the directory of a crawl (the one holding frontier.json); 'diskfrontier push DIR URL' "
    "creates one in a new or empty directory, and 'diskfrontier adopt-scrapy DIR' takes over a "
    "JOBDIR of Scrapy's own scheduler"
)


def is_jobdir(path: str) -> bool:
    """Whether ``path`` is a diskfrontier job directory: its ``frontier.json`` is a regular
    file (not a symlink, not a folder)."""
    try:
        return stat.S_ISREG(os.lstat(os.path.join(path, "frontier.json")).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False


def require_jobdir(path: str, *, may_create: bool = False) -> None:
    """Raise FrontierError unless ``path`` is a job directory, before anything is written there.

    With ``may_create`` (push, import) a missing or empty directory will do as well:
    the frontier creates the job directory in it. Only reads (``lstat``, ``listdir``).
    """
    if is_jobdir(path):
        return
    if may_create:
        try:
            if not os.listdir(path):
                return
        except (FileNotFoundError, NotADirectoryError):
            return  # missing: created by the frontier (or one-line error if it cannot be)
    meta = os.path.join(path, "frontier.json")
    why = "its frontier.json is not a regular file" if os.path.lexists(meta) else "no frontier.json"
    where = " and is not empty" if may_create else ""
    raise FrontierError(f"{path} is not a diskfrontier job directory ({why}){where}; {_NOT_A_JOBDIR_HINT}")


def table(rows: list[tuple[str, Any]]) -> str:
    """Rows of (label, value) as two aligned columns."""
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def human_bytes(n: int) -> str:
    """``1,234 B``, ``5.6 KiB``, ``7.8 MiB``, ``9.0 GiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"


def stderr_is_terminal() -> bool:
    """Progress bars are drawn only for a person watching (stderr is a terminal)."""
    return sys.stderr.isatty()


@contextmanager
def progress_bar(label: str, length: int = 0) -> Iterator[Progress | None]:
    """A ``progress(done, total)`` callback drawing a bar on stderr, or None when nobody watches.

    ``done`` and ``total`` are absolute (bytes, records, pages); ``total`` may change
    as the work learns its size.
    """
    if not stderr_is_terminal():
        yield None
        return
    with click.progressbar(length=max(1, length), label=label, file=sys.stderr, show_eta=True) as bar:

        def report(done: int, total: int) -> None:
            bar.length = max(1, total)
            bar.update(max(0, min(done, bar.length) - bar.pos))

        yield report
