"""Commands that write to a crawl: push, import, requeue-failed and host (its settings)."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any, TypeVar, cast

import click

from ..contract.protocol import FrontierProtocol
from ..contract.values import HostInfo
from ..core.errors import FrontierError, JobDirLocked
from ..jobdir.delivery import deliver
from ..jobdir.inbox import MAX_URLS
from ..jobdir.reader import HostRow, host_table, published_status
from ..jobdir.recovery import Progress
from ..request.model import Request, check_slot
from ..transfer.copy import REDIS_MAX_BUDGET
from ..transfer.jsonlines import record_from_json
from .hostdoc import from_info, from_row, published_hosts
from .jsonout import echo_json
from .options import EXISTING_JOBDIR, JOBDIR, PRIORITY, SECONDS, TIME, finite, when
from .steer import run_command, wait_options
from .support import (
    CRAWL_OPTION,
    JSON_OPTION,
    SHARDS_OPTION,
    one_line_errors,
    open_crawl,
    progress_bar,
    redis_call_errors,
    redis_crawl,
    require_jobdir,
    table,
)

BATCH = 10_000
T = TypeVar("T")


@click.command()
@EXISTING_JOBDIR
@click.argument("host")
@CRAWL_OPTION
@click.option("--delay", type=SECONDS, default=None, callback=finite, help="Seconds between its requests.")
@click.option("--default-delay", is_flag=True, help="Use the crawl's delay for it again.")
@click.option("--block-for", type=SECONDS, default=None, callback=finite, help="Hand out none of it for S seconds.")
@click.option("--block-until", type=TIME, default=None, callback=finite,
              help="Hand out none of it before this time.time() value.")
@click.option("--block", "block_always", is_flag=True, help="Hand out none of it until --unblock.")
@click.option("--unblock", is_flag=True, help="End a block.")
@click.option("--budget", type=click.IntRange(min=0, max=2**63 - 1), default=None,
              help="At most N of its requests done or in flight, ever.")
@click.option("--no-budget", is_flag=True, help="Remove its budget.")
@wait_options
@JSON_OPTION
@one_line_errors
def host(jobdir: str, host: str, crawl: str | None, delay: float | None, default_delay: bool,
         block_for: float | None, block_until: float | None, block_always: bool, unblock: bool, budget: int | None,
         no_budget: bool, no_wait: bool, timeout: float, as_json: bool) -> None:
    """Change the settings of one HOST of JOBDIR, while a crawl runs or not; with no option, show them.

    A Redis or PostgreSQL crawl (a URL and --crawl) takes the change at once, while its clients run.

    \b
    Example: diskfrontier host crawls/shop shop.example --delay 2 --block-for 600
             diskfrontier host redis://localhost:6379/0 shop.example --crawl news --block
             diskfrontier host postgresql://crawler@db:5432/crawls shop.example --crawl news --delay 2
    """
    name = redis_crawl(jobdir, crawl)
    if name is None:
        require_jobdir(jobdir)
    try:
        check_slot(host, "HOST")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="HOST") from None
    blocks = [block_for is not None, block_until is not None, block_always, unblock]
    if sum(blocks) > 1:
        raise click.UsageError("give at most one of --block-for, --block-until, --block and --unblock")
    if delay is not None and default_delay:
        raise click.UsageError("give --delay or --default-delay, not both")
    if budget is not None and no_budget:
        raise click.UsageError("give --budget or --no-budget, not both")
    if name is not None and budget is not None and budget > REDIS_MAX_BUDGET:
        raise click.BadParameter(f"{budget} is more than a Redis or PostgreSQL crawl keeps (2**53 - 1)",
                                 param_hint="'--budget'")
    changed = any(blocks) or delay is not None or default_delay or budget is not None or no_budget
    args: dict[str, Any] = {"host": host}
    if delay is not None:
        args["delay"] = delay
    if default_delay:
        args["default_delay"] = True
    if block_for is not None:
        args["blocked_until"] = time.time() + block_for
    elif block_until is not None:
        args["blocked_until"] = block_until
    elif block_always:
        args["blocked_until"] = "inf"
    elif unblock:
        args["blocked_until"] = 0
    if budget is not None:
        args["budget"] = budget
    if no_budget:
        args["no_budget"] = True
    lower: HostInfo | None = None
    crawl_delay: float | None = None

    def direct(frontier: FrontierProtocol) -> dict[str, Any]:
        nonlocal lower, crawl_delay
        crawl_delay = getattr(frontier, "delay", None) if name is not None else None
        if delay is not None or default_delay:
            frontier.set_delay(host, delay)
        if block_for is not None or block_until is not None:
            frontier.block(host, args["blocked_until"])
        elif block_always:
            frontier.block(host, math.inf)
        elif unblock:
            frontier.unblock(host)
        if budget is not None or no_budget:
            frontier.set_budget(host, budget)
        found = frontier.host(host)
        if changed and (found is None or not (found.pending or found.in_flight or found.done)) \
                and host.lower() != host:
            lower = frontier.host(host.lower())
        return {"host": None if found is None else found}

    if changed:
        result = run_command(jobdir, name, "host", args, direct, no_wait=no_wait, timeout=timeout)
        if result is None:
            return
    else:
        guard = contextlib.nullcontext() if name is None else redis_call_errors()
        try:
            with open_crawl(jobdir, name) as frontier, guard:
                result = direct(frontier)
        except JobDirLocked:  # a crawl holds it: read what it wrote and what it published, as inspect does
            result = {"host": None}
    info = result["host"]
    if isinstance(info, dict):
        values: dict[str, Any] = {k: math.inf if v == "inf" else v for k, v in info.items()}
        info = HostInfo(**values)
    row = _host_row(jobdir, host) if name is None else None
    unknown = changed and (info is None or not (info.pending or info.in_flight or info.done))
    if unknown:
        hint = (f" (did you mean {lower.host}?)" if lower is not None
                else " (a URL's host is its slot, lower-cased and without port)")
        click.echo(f"note: {host} has no requests in this crawl yet; the setting waits for them{hint}", err=True)
    if info is not None:
        own = (row.delay if row is not None else None) if name is None else (
            None if info.delay == crawl_delay else info.delay)
        document: dict[str, Any] | None = from_info(info, own)
    elif row is not None:
        document = from_row(row, published_hosts(published_status(jobdir)).get(host))
    else:
        document = None
    if as_json:
        echo_json(document)
        return
    if document is None:
        click.echo(f"{host}: no requests and no settings")
        return
    delay_text = f"{info.delay:g}s" if info is not None else (
        "default" if document["delay"] is None else f"{document['delay']:g}s")
    blocked = info.blocked_until if info is not None else None if row is None else row.blocked_until
    click.echo(table([
        ("host", document["host"]), ("pending", f"{document['pending']:,}"), ("done", f"{document['done']:,}"),
        ("delay", delay_text), ("blocked until", when(blocked) if blocked else "-"),
        ("budget", "-" if document["budget"] is None else f"{document['budget']:,}"),
    ]))


def _host_row(jobdir: str, name: str) -> HostRow | None:
    """The row of host ``name`` of the job directory ``jobdir``, read without its lock."""
    return next((row for row in host_table(jobdir) if row.host == name), None)


@click.command(name="requeue-failed")
@EXISTING_JOBDIR
@CRAWL_OPTION
@wait_options
@JSON_OPTION
@one_line_errors
def requeue_failed_command(jobdir: str, crawl: str | None, no_wait: bool, timeout: float, as_json: bool) -> None:
    """Make every failed request of JOBDIR pending again, with attempts 0. Works while a crawl runs.

    Example: diskfrontier requeue-failed crawls/shop
    """
    name = redis_crawl(jobdir, crawl)

    def direct(frontier: FrontierProtocol) -> dict[str, Any]:
        return {"requeued": frontier.requeue_failed(), "pending": len(frontier)}

    result = run_command(jobdir, name, "requeue-failed", {}, direct, no_wait=no_wait, timeout=timeout)
    if result is None:
        return
    requeued, pending = result["requeued"], result["pending"]
    if as_json:
        echo_json({"requeued": requeued, "pending": pending})
    else:
        click.echo(f"requeued {requeued:,} failed requests; {pending:,} pending")


def _numbered(urls: tuple[str, ...], file: IO[str] | None) -> Iterator[tuple[str, int, str]]:
    """(``argument`` or ``line``, its number, the URL) of every URL given, skipping blank and # lines."""
    for i, url in enumerate(urls, 1):
        yield "argument", i, url
    if file is not None:
        for i, line in enumerate(file, 1):
            text = line.strip()
            if text and not text.startswith("#"):
                yield "line", i, text


def _url_request(url: str, priority: int, dont_filter: bool) -> Request:
    """The request of one URL argument or line; ``ValueError`` if it is no URL or holds whitespace."""
    request = Request(url, priority=priority, dont_filter=dont_filter)
    if any(c.isspace() for c in url):
        raise ValueError(f"Request.url {url!r} holds whitespace: give one URL an argument or a line, "
                         f"and write a space inside a URL as %20")
    return request


def _runs(items: Iterable[T], size: int = BATCH) -> Iterator[list[T]]:
    """Consecutive items of the same type, in lists of at most ``size``."""
    batch: list[T] = []
    for item in items:
        if batch and (len(batch) >= size or type(item) is not type(batch[0])):
            yield batch
            batch = []
        batch.append(item)
    if batch:
        yield batch


def _report_counts(queued: int, offered: int, bad: int, as_json: bool, *, via: str = "direct",
                   commands: list[str] | None = None) -> None:
    """``queued N, duplicates N, bad N``, or push's JSON document."""
    counts = {"queued": queued, "duplicates": offered - queued, "bad": bad}
    if as_json:
        echo_json({**counts, "offered": offered, "via": via, "commands": commands or []})
    else:
        click.echo(", ".join(f"{name} {n:,}" for name, n in counts.items()))


@click.command()
@JOBDIR
@click.argument("urls", nargs=-1)
@CRAWL_OPTION
@click.option("--file", "-f", "file", type=click.File("r"), help="URLs one a line; - for stdin.")
@click.option("--priority", type=PRIORITY, default=0, show_default=True)
@click.option("--dont-filter", is_flag=True, help="Queue even URLs seen before.")
@click.option("--strict", is_flag=True, help="Push nothing if any line is bad.")
@SHARDS_OPTION
@wait_options
@JSON_OPTION
@one_line_errors
def push(jobdir: str, urls: tuple[str, ...], crawl: str | None, file: IO[str] | None, priority: int,
         dont_filter: bool, strict: bool, shards: int | None, no_wait: bool, timeout: float, as_json: bool) -> None:
    """Seed URLs into JOBDIR (created if missing or empty); report queued and duplicates.

    URLs are arguments, or one a line of --file; a lone - reads them from stdin. A bad
    line (not a URL, or two words) is reported with its number and the others still go
    in, unless --strict. Exit code 1 when a line was bad. A Redis or PostgreSQL crawl (a
    URL and --crawl) is made if it does not exist. While a crawl holds JOBDIR, the URLs go to it
    through its inbox, and are reported once it applied them.

    \b
    Example: diskfrontier push crawls/shop https://shop.example/ --priority 10
             cat seeds.txt | diskfrontier push crawls/shop -
             diskfrontier push redis://localhost:6379/0 --crawl news https://news.example/
             diskfrontier push postgresql://crawler@db:5432/crawls --crawl news https://news.example/
    """
    name = redis_crawl(jobdir, crawl)
    if urls == ("-",):
        if file is not None:
            raise click.UsageError("give - (stdin) or --file, not both")
        urls, file = (), click.open_file("-")
    elif "-" in urls:
        raise click.UsageError("- (read the URLs from stdin) must be the only URL argument")
    if not urls and file is None:
        raise click.UsageError("give URLs as arguments, - for stdin, or --file F")
    if name is None:
        require_jobdir(jobdir, may_create=True)
    bad = 0
    read = 0  # characters of the URLs read, with their line ends: the bytes of an ASCII file
    size = sum(len(url) + 1 for url in urls) + (0 if file is None else _source_size(file))
    progress: Progress | None = None

    def requests() -> Iterator[Request]:
        nonlocal bad, read
        for source, number, url in _numbered(urls, file):
            read += len(url) + 1
            if progress is not None and number % 1000 == 0:
                progress(read, max(size, read))
            try:
                yield _url_request(url, priority, dont_filter)
            except (TypeError, ValueError) as exc:
                bad += 1
                click.echo(f"{source} {number}: skipped: {exc}", err=True)

    good: Iterable[Request] = requests()
    if strict:
        good = list(good)
        if bad:
            click.echo(f"Error: {bad} bad {'argument' if file is None else 'line'}s; nothing was pushed (--strict)",
                       err=True)
            sys.exit(1)
    queued = offered = 0
    started = time.monotonic()
    frontier: FrontierProtocol | None = None
    held: JobDirLocked | None = None
    sent: list[str] = []
    try:
        with progress_bar("pushing", size) as progress:
            for batch in _runs(good, MAX_URLS if name is None else BATCH):
                if frontier is None and held is None:  # a run with no good line creates nothing
                    try:
                        frontier = open_crawl(jobdir, name, create=True, shards=shards)
                    except JobDirLocked as exc:  # a crawl runs there: its inbox takes the URLs
                        held = exc
                offered += len(batch)
                if frontier is not None:
                    queued += frontier.push_many(batch)
                    continue
                args = {"urls": [r.url for r in batch], "priority": priority, "dont_filter": dont_filter}
                ident, answer = deliver(jobdir, "push", args, wait=not no_wait, timeout=timeout)
                sent.append(ident)
                if answer is not None:
                    if "error" in answer:
                        raise FrontierError(f"the crawl holding {jobdir} refused command {ident}: {answer['error']}")
                    queued += answer["queued"]
    finally:
        if frontier is not None:
            frontier.close()
    if held is not None:
        holder = f"pid {held.pid}" if held.pid else "another process"
        how = "queued" if no_wait else "applied"
        took = "" if no_wait else f" in {time.monotonic() - started:.2f}s"
        click.echo(f"{how} {len(sent)} command{'s' if len(sent) != 1 else ''} by the crawl holding {jobdir} "
                   f"({holder}){took}", err=True)
        if no_wait:
            if as_json:  # queued: not known until the crawl applies the commands
                echo_json({"queued": None, "duplicates": None, "bad": bad, "offered": offered, "via": "inbox",
                           "commands": sent})
            else:
                click.echo(f"sent {offered:,}, bad {bad:,}: applied within a second while that crawl runs")
            sys.exit(1 if bad else 0)
    _report_counts(queued, offered, bad, as_json, via="direct" if held is None else "inbox", commands=sent)
    sys.exit(1 if bad else 0)


def _source_size(source: IO[str]) -> int:
    try:
        return os.fstat(source.fileno()).st_size
    except (OSError, ValueError, AttributeError):  # stdin from a pipe, or CliRunner's stream
        return 0


@click.command(name="import")
@JOBDIR
@click.argument("source", type=click.File("r"))
@CRAWL_OPTION
@SHARDS_OPTION
@JSON_OPTION
@one_line_errors
def import_command(jobdir: str, source: IO[str], crawl: str | None, shards: int | None, as_json: bool) -> None:
    """Push the requests of a JSON-lines file (as written by export); - for stdin.

    JOBDIR is created if missing or empty (a Redis or PostgreSQL crawl, given as a URL and
    --crawl, if it does not exist). {"$seen": ...} lines (export --seen) mark
    their fingerprint seen and queue nothing. A bad line is reported with its number
    and the others still go in (exit code 1).

    \b
    Example: diskfrontier import crawls/new pending.jsonl
             diskfrontier import redis://localhost:6379/0 pending.jsonl --crawl news
    """
    name = redis_crawl(jobdir, crawl)
    if name is None:
        require_jobdir(jobdir, may_create=True)
    bad = 0
    read = 0
    size = _source_size(source)

    def records(progress: Any) -> Iterator[Request | bytes]:
        nonlocal bad, read
        for number, line in enumerate(source, 1):
            read += len(line)
            if progress is not None and number % 1000 == 0:
                progress(read, max(size, read))
            if not line.strip():
                continue
            try:
                yield record_from_json(line)
            except (TypeError, ValueError) as exc:
                bad += 1
                click.echo(f"line {number}: skipped: {exc}", err=True)

    queued = offered = seen = seen_new = 0
    opened = open_crawl(jobdir, name, create=True, shards=shards)
    guard = contextlib.nullcontext() if name is None else redis_call_errors()
    with opened as frontier, guard, progress_bar("importing", size) as progress:
        for batch in _runs(records(progress)):
            if isinstance(batch[0], bytes):
                seen_new += frontier.mark_seen(cast("list[bytes]", batch))
                seen += len(batch)
            else:
                queued += frontier.push_many(cast("list[Request]", batch))
                offered += len(batch)
    # seen: the fingerprints the file held, every one seen now; new: those not seen before (the pending
    # requests' own are marked as they are queued)
    if as_json:
        echo_json({"queued": queued, "duplicates": offered - queued, "bad": bad, "seen": seen, "seen_new": seen_new})
    else:
        fresh = f" ({seen_new:,} not seen before)" if seen_new != seen else ""
        click.echo(f"queued {queued:,}, duplicates {offered - queued:,}, bad {bad:,}, seen {seen:,}{fresh}")
    sys.exit(1 if bad else 0)
