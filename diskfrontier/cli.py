"""The ``diskfrontier`` command: inspect, peek, verify, compact, push, export, import, demo."""

from __future__ import annotations

import base64
import functools
import json
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from .demo import run_demo
from .errors import FrontierError
from .frontier import Frontier
from .jobinfo import inspect_jobdir, pending_requests
from .request import Request
from .verify import verify

F = TypeVar("F", bound=Callable[..., Any])

JOBDIR = click.argument("jobdir", type=click.Path(file_okay=False))
EXISTING_JOBDIR = click.argument("jobdir", type=click.Path(exists=True, file_okay=False))
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


def frontier_errors(func: F) -> F:
    """Turn a FrontierError (or a bad request) into one line on stderr and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except FrontierError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def _table(rows: list[tuple[str, Any]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{n} B"


@click.group()
@click.version_option(package_name="diskfrontier")
@click.option("-v", "--verbose", is_flag=True, help="Log what the frontier does (recovery, compaction).")
def main(verbose: bool) -> None:
    """Inspect, verify, seed and compact diskfrontier job directories.

    Example: diskfrontier demo crawls/demo && diskfrontier inspect crawls/demo
    """
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(name)s: %(message)s")


@main.command()
@EXISTING_JOBDIR
@JSON_OPTION
@frontier_errors
def inspect(jobdir: str, as_json: bool) -> None:
    """Show the state of JOBDIR without changing it (safe on a live crawl).

    Example: diskfrontier inspect crawls/shop --json
    """
    info = inspect_jobdir(jobdir)
    if as_json:
        data = info.as_dict()
        data["pending_by_priority"] = {str(k): v for k, v in info.pending_by_priority.items()}
        click.echo(json.dumps(data, indent=2))
        return
    rows = [
        ("job directory", info.path), ("state", info.state), ("format", f"v{info.format_version}, {info.order}"),
        ("created", info.created), ("pending", f"{info.pending:,}"),
    ]
    rows += [(f"  priority {p}", f"{n:,}") for p, n in info.pending_by_priority.items()]
    rows += [
        ("done", f"{info.done:,} (since the last compaction)"), ("seen", f"{info.seen:,}"),
        ("journal", _human_bytes(info.journal_bytes)), ("queues", _human_bytes(info.queue_bytes)),
        ("seen file", _human_bytes(info.seen_bytes)), ("reclaimable", _human_bytes(info.reclaimable_bytes)),
    ]
    if info.torn_bytes:
        rows.append(("torn tail", f"{info.torn_bytes} bytes (cut at the next open)"))
    if info.holder_pid:
        rows.append(("in flight", f"unknown while pid {info.holder_pid} holds it (counted in pending)"))
    click.echo(_table(rows))


def _request_json(request: Request) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if isinstance(value, bytes):
            return {"$base64": base64.b64encode(value).decode()}
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    data = plain(request.to_dict())
    if not request.body:
        data["body"] = ""
    return data


def _request_from_json(data: Any) -> Request:
    def restore(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"$base64"}:
                return base64.b64decode(value["$base64"])
            return {k: restore(v) for k, v in value.items()}
        if isinstance(value, list):
            return [restore(v) for v in value]
        return value

    if not isinstance(data, dict) or "url" not in data:
        raise ValueError("each line must be a JSON object with at least a \"url\"")
    unknown = set(data) - {"url", "method", "priority", "headers", "body", "meta", "dont_filter"}
    if unknown:
        raise ValueError(f"unknown fields {sorted(unknown)}")
    return Request(
        data["url"], method=data.get("method", "GET"), priority=data.get("priority", 0),
        headers=restore(data.get("headers")), body=restore(data.get("body")) or None,
        meta=restore(data.get("meta")), dont_filter=data.get("dont_filter", False),
    )


@main.command()
@EXISTING_JOBDIR
@click.option("-n", "count", type=click.IntRange(min=0), default=20, show_default=True, help="How many.")
@click.option("--priority", type=int, default=None, help="Only this priority.")
@JSON_OPTION
@frontier_errors
def peek(jobdir: str, count: int, priority: int | None, as_json: bool) -> None:
    """Show the next requests in pop order, without consuming them.

    Example: diskfrontier peek crawls/shop -n 5 --priority 10
    """
    shown = []
    for request in pending_requests(jobdir, priority=priority):
        if len(shown) >= count:
            break
        shown.append(request)
    if as_json:
        for request in shown:
            click.echo(json.dumps(_request_json(request)))
        return
    if not shown:
        click.echo("nothing pending")
        return
    width = max(len(str(r.priority)) for r in shown)
    for request in shown:
        click.echo(f"{request.priority:>{width}}  {request.method:<4} {request.url}")


@main.command(name="verify")
@EXISTING_JOBDIR
@click.option("--repair", is_flag=True, help="Rewrite damaged files keeping every intact record.")
@JSON_OPTION
@frontier_errors
def verify_command(jobdir: str, repair: bool, as_json: bool) -> None:
    """Check every record of every file; exit 1 if damage is found.

    Example: diskfrontier verify crawls/shop --repair
    """
    report = verify(jobdir, repair=repair)
    if as_json:
        click.echo(json.dumps({
            "sound": report.sound, "records": report.records, "repaired": report.repaired,
            "dropped_bytes": report.dropped_bytes, "notes": report.notes,
            "findings": [{"file": f.file, "offset": f.offset, "problem": f.problem} for f in report.findings],
        }, indent=2))
    else:
        for finding in report.findings:
            click.echo(f"damaged: {finding}")
        for note in report.notes:
            click.echo(f"note: {note}")
        if report.sound:
            click.echo(f"sound: {report.records:,} journal records checked")
        elif report.repaired:
            click.echo(f"repaired: kept every intact record, dropped {report.dropped_bytes:,} damaged bytes; "
                       f"the queues are rebuilt at the next open")
    sys.exit(0 if report.sound else 1)


@main.command()
@EXISTING_JOBDIR
@JSON_OPTION
@frontier_errors
def compact(jobdir: str, as_json: bool) -> None:
    """Rewrite the journal and queues to hold only what is pending (atomic).

    Example: diskfrontier compact crawls/shop
    """
    with Frontier(jobdir) as frontier:
        result = frontier.compact(_progress("compacting") if sys.stderr.isatty() else None)
        pending = len(frontier)
    if as_json:
        click.echo(json.dumps({"bytes_before": result.bytes_before, "bytes_after": result.bytes_after,
                               "pending": pending, "dropped_records": result.dropped_records}))
    else:
        click.echo(f"journal: {result.bytes_before:,} -> {result.bytes_after:,} bytes; "
                   f"{pending:,} pending kept, {result.dropped_records:,} finished records dropped")


def _progress(label: str) -> Callable[[int, int], None]:
    def report(done: int, total: int) -> None:
        percent = 100 * done // max(1, total)
        click.echo(f"\r{label}: {percent:3d}%", nl=done >= total, err=True)

    return report


def _lines(urls: tuple[str, ...], file: Any) -> Iterator[tuple[int, str]]:
    for i, url in enumerate(urls, 1):
        yield i, url
    if file is not None:
        for i, line in enumerate(file, 1):
            text = line.strip()
            if text and not text.startswith("#"):
                yield i, text


@main.command()
@JOBDIR
@click.argument("urls", nargs=-1)
@click.option("--file", "-f", "file", type=click.File("r"), help="URLs one a line; - for stdin.")
@click.option("--priority", type=int, default=0, show_default=True)
@click.option("--dont-filter", is_flag=True, help="Queue even URLs seen before.")
@click.option("--strict", is_flag=True, help="Push nothing if any line is bad.")
@JSON_OPTION
@frontier_errors
def push(jobdir: str, urls: tuple[str, ...], file: Any, priority: int, dont_filter: bool, strict: bool,
         as_json: bool) -> None:
    """Seed URLs into JOBDIR (created if missing); report queued and duplicates.

    Example: diskfrontier push crawls/shop https://shop.example/ --priority 10
             cat seeds.txt | diskfrontier push crawls/shop -f -
    """
    if not urls and file is None:
        raise click.UsageError("give URLs as arguments or --file F (- for stdin)")
    good: list[Request] = []
    bad: list[tuple[int, str, str]] = []
    for number, url in _lines(urls, file):
        try:
            good.append(Request(url, priority=priority, dont_filter=dont_filter))
        except (TypeError, ValueError) as exc:
            bad.append((number, url, str(exc)))
    source = "argument" if file is None else "line"
    for number, url, reason in bad:
        click.echo(f"{source} {number}: skipped: {reason}", err=True)
    if bad and strict:
        click.echo(f"Error: {len(bad)} bad {source}s; nothing was pushed (--strict)", err=True)
        sys.exit(1)
    with Frontier(jobdir) as frontier:
        queued = frontier.push_many(good)
    result = {"queued": queued, "duplicates": len(good) - queued, "bad": len(bad)}
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(f"queued {queued:,}, duplicates {len(good) - queued:,}, bad {len(bad):,}")
    sys.exit(1 if bad else 0)


@main.command(name="export")
@EXISTING_JOBDIR
@click.option("-o", "--output", type=click.File("w"), default="-", help="File to write (default stdout).")
@frontier_errors
def export_command(jobdir: str, output: Any) -> None:
    """Write the pending requests as JSON lines, in pop order.

    Example: diskfrontier export crawls/shop -o pending.jsonl
    """
    count = 0
    for request in pending_requests(jobdir):
        output.write(json.dumps(_request_json(request)) + "\n")
        count += 1
    if output is not sys.stdout:
        click.echo(f"exported {count:,} pending requests", err=True)


@main.command(name="import")
@JOBDIR
@click.argument("source", type=click.File("r"))
@JSON_OPTION
@frontier_errors
def import_command(jobdir: str, source: Any, as_json: bool) -> None:
    """Push the requests of a JSON-lines file (as written by export); - for stdin.

    Example: diskfrontier import crawls/new pending.jsonl
    """
    good: list[Request] = []
    bad = 0
    for number, line in enumerate(source, 1):
        if not line.strip():
            continue
        try:
            good.append(_request_from_json(json.loads(line)))
        except (TypeError, ValueError) as exc:
            bad += 1
            click.echo(f"line {number}: skipped: {exc}", err=True)
    with Frontier(jobdir) as frontier:
        queued = frontier.push_many(good)
    result = {"queued": queued, "duplicates": len(good) - queued, "bad": bad}
    click.echo(json.dumps(result) if as_json else f"queued {queued:,}, duplicates {len(good) - queued:,}, bad {bad:,}")
    sys.exit(1 if bad else 0)


@main.command()
@JOBDIR
@click.option("--pages", type=click.IntRange(min=1), default=300, show_default=True, help="Pages of the synthetic site.")
@click.option("--for", "seconds", type=click.FloatRange(min=0), default=None, help="Stop cleanly after this many seconds.")
@JSON_OPTION
@frontier_errors
def demo(jobdir: str, pages: int, seconds: float | None, as_json: bool) -> None:
    """Crawl a synthetic site served on 127.0.0.1 into JOBDIR; run again to resume.

    Ctrl-C or --for stops it cleanly; kill -9 is survived too.

    Example: diskfrontier demo crawls/demo --pages 500 --for 2
    """
    show = sys.stderr.isatty() and not as_json

    def on_page(done: int, pending: int) -> None:
        if show:
            click.echo(f"\rfetched {done:,} pages, {pending:,} pending", nl=False, err=True)

    result = run_demo(jobdir, pages=pages, seconds=seconds, on_page=on_page)
    if show:
        click.echo("", err=True)
    if as_json:
        click.echo(json.dumps(result.__dict__))
    else:
        click.echo(f"{result.stopped_by}: fetched {result.fetched:,} pages in {result.seconds:.1f}s; "
                   f"{result.pending:,} pending, {result.seen:,} seen. Inspect it: diskfrontier inspect {jobdir}")
