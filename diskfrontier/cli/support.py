"""What every ``diskfrontier`` command shares: one-line errors, exit codes, the job directory
check, crawls on a server (a Redis or PostgreSQL URL and ``--crawl``), tables, sizes, progress bars,
output files written whole."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from ..access.targets import CrawlView, backend_name, is_server_target, open_target, open_view
from ..core.errors import FrontierError
from ..files.safefs import create_exclusive, unique_temp
from ..redisfrontier.connection import check_crawl_name, shown_url
from ..transfer.destination import MARKER

if TYPE_CHECKING:
    from ..contract.protocol import FrontierProtocol
    from ..jobdir.recovery import Progress

F = TypeVar("F", bound=Callable[..., Any])

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
SHARDS_OPTION = click.option(
    "--shards", type=click.IntRange(1, 1024), default=None, metavar="N",
    help="A Redis crawl made here gets N shards (its hosts spread over N hash tags: over the masters of a "
         "Redis Cluster). Fixed when the crawl is made; an existing crawl must have N.")


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
    the frontier creates the job directory in it. Only reads (``lstat``, ``listdir``). The
    folder in which ``copy`` builds a job directory is refused while it holds the copy's marker
    (the copy is running, or was stopped half-way).
    """
    if os.path.lexists(os.path.join(path, MARKER)):
        raise FrontierError(f"{path} is a job directory that 'diskfrontier copy' is building, or was building when "
                            f"it was stopped: it is not complete; run the same copy again to redo it")
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
    handlers = [h for h in (*logging.getLogger().handlers, logging.lastResort)
                if isinstance(h, logging.StreamHandler) and h.stream is sys.stderr]
    clear = _ClearBarLine()
    with click.progressbar(length=max(1, length), label=label, file=sys.stderr, show_eta=True) as bar:

        def report(done: int, total: int) -> None:
            bar.length = max(1, total)
            bar.update(max(0, min(done, bar.length) - bar.pos))

        for handler in handlers:
            handler.addFilter(clear)
        try:
            yield report
        finally:
            for handler in handlers:
                handler.removeFilter(clear)


class _ClearBarLine(logging.Filter):
    """Lets every record through, after clearing the progress bar's line: a log line written during the bar
    (a request failed) starts a line of its own instead of running into the bar, which is drawn again under it."""

    def filter(self, record: logging.LogRecord) -> bool:
        sys.stderr.write("\r\x1b[2K")
        return True


@contextmanager
def whole_file(output: str) -> Iterator[IO[str]]:
    """A text stream to ``output`` (``-``: stdout) that appears there only whole.

    A file is written under a temp name in the same folder (``<output>.tmp-<pid>-<random>``),
    fsynced and renamed over ``output`` at the end; on any exception (a Ctrl-C, a full disk)
    the temp file is removed and ``output`` is as it was.
    """
    if output == "-":
        with click.open_file("-", "w", encoding="utf-8") as out:
            yield out
        return
    tmp = unique_temp(os.path.abspath(output))
    fd = create_exclusive(tmp, 0o666)  # the umask applies, as to any file a command creates
    try:
        with open(fd, "w", encoding="utf-8", closefd=True) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, output)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# ------------------------------------------------------------------ crawls on a server
class TargetUsageError(click.UsageError):
    """A server's URL without its crawl, or a crawl name beside a job directory: bad usage (exit code 2),
    shown as the one line ``Error: ...``."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


class JobDirOrRedis(click.ParamType):
    """A job directory (checked as ``click.Path(file_okay=False)`` checks it) or a server's URL: Redis
    (``redis://``, ``rediss://`` or ``unix://``) or PostgreSQL (``postgresql://``, ``postgres://``), taken as it is."""

    name = "jobdir"

    def __init__(self, *, exists: bool) -> None:
        self.path = click.Path(exists=exists, file_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and is_server_target(value):
            return value
        return self.path.convert(value, param, ctx)


def check_crawl_option(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The callback of a crawl-name option: a valid name, or bad usage saying what one is."""
    if value is None:
        return None
    try:
        return check_crawl_name(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a crawl name: give 1 to 100 letters, digits or '_.:-'") from None


CRAWL_OPTION = click.option(
    "--crawl", metavar="NAME", default=None, callback=check_crawl_option,
    help="The crawl to use when JOBDIR is a Redis URL (redis://host:6379/0) or a PostgreSQL URL "
         "(postgresql://user@host:5432/db); required then.")
# For the commands that work on a job directory's files only: --crawl is accepted so that a
# server's URL is refused with the reason, not with "no such option".
FILES_ONLY_CRAWL_OPTION = click.option("--crawl", default=None, hidden=True)


def redis_crawl(target: str, crawl: str | None) -> str | None:
    """The crawl to use if ``target`` is a server's URL (Redis or PostgreSQL), None if it is a job directory;
    ``TargetUsageError`` if ``--crawl`` is missing for a URL or given for a directory."""
    if is_server_target(target):
        if crawl is None:
            raise TargetUsageError(f"{shown_url(target)} is a {backend_name(target)} URL: name the crawl in it with "
                                   f"--crawl NAME")
        return crawl
    if crawl is not None:
        raise TargetUsageError(f"--crawl names a crawl in Redis, and {target} is a job directory; give a Redis "
                               f"URL (redis://host:6379/0) with --crawl, or leave --crawl out")
    return None


def refuse_redis(target: str, why: str, postgres: str | None = None) -> None:
    """FrontierError (one line, exit code 1) if ``target`` is a server's URL: ``why`` says what the command
    needs that a Redis crawl does not have, ``postgres`` what a PostgreSQL crawl does not have (None: ``why``,
    its words "Redis crawl" made "PostgreSQL crawl")."""
    if is_server_target(target):
        kind = backend_name(target)
        if kind == "PostgreSQL":
            why = postgres if postgres is not None else why.replace("Redis crawl", "PostgreSQL crawl")
        raise FrontierError(f"{shown_url(target)} is a {kind} URL; {why}")


@contextmanager
def redis_call_errors() -> Iterator[None]:
    """A ValueError or TypeError of a server's backend (a setting out of its range) as a FrontierError,
    so that it ends the command with one line."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        raise FrontierError(str(exc)) from None


def open_crawl(target: str, crawl: str | None, *, create: bool = False, shards: int | None = None) -> FrontierProtocol:
    """The frontier of a command's target: the job directory ``target`` (locked: refused while a crawl
    holds it) when ``crawl`` is None, else the crawl ``crawl`` at the Redis or PostgreSQL URL ``target``, keeping
    its settings; ``create``: the crawl is made if it does not exist (else FrontierError naming it), a Redis one
    with ``shards`` shards (None: one; an existing crawl must have that many)."""
    if crawl is None:
        if shards is not None:
            raise TargetUsageError(f"--shards is for a Redis crawl, and {target} is a job directory")
        return open_target(target)
    with redis_call_errors():
        if shards is None:
            return open_target(target, crawl, create=create)
        if backend_name(target) != "Redis":
            raise TargetUsageError(f"--shards is for a Redis crawl, and {shown_url(target)} is a "
                                   f"{backend_name(target)} URL")
        return open_target(target, crawl, create=create, shards=shards)


def open_crawl_view(target: str, crawl: str | None, *, priority: int | None = None,
                    failed: bool = True, pop_order: bool = False) -> CrawlView:
    """A read-only view of a command's target (a job directory read without its lock, or a crawl on a server),
    of one ``priority`` if given; ``failed=False``: a job directory's failed requests are read only if
    asked for; ``pop_order``: its pending requests as ``pop`` would take them (``targets.open_view``)."""
    with redis_call_errors():
        return open_view(target, crawl, priority=priority, failed=failed, pop_order=pop_order)

