"""What every ``diskfrontier`` command shares: one-line errors, tables, sizes, progress bars."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from .errors import FrontierError
from .recovery import Progress

F = TypeVar("F", bound=Callable[..., Any])

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


def one_line_errors(func: F) -> F:
    """Turn a FrontierError or an OSError into one line on stderr and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except FrontierError as exc:
            raise SystemExit(_fail(str(exc))) from None
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            raise SystemExit(_fail(f"{exc.strerror or exc}{where}")) from None

    return wrapper  # type: ignore[return-value]


def _fail(message: str) -> int:
    click.echo(f"Error: {message}", err=True)
    return 1


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
