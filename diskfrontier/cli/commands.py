"""The ``diskfrontier`` command: inspect, peek, hosts, host, verify, compact, failed, requeue-failed,
push, export, import, copy, adopt-scrapy, demo.

Where a command takes JOBDIR it also takes a Redis URL (``redis://``, ``rediss://``, ``unix://``)
with ``--crawl NAME``; the commands that work on a job directory's files refuse one."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import logging
import math
import operator
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, NoReturn, TypeVar, cast

import click

from ..demo import run_demo
from ..files.writeerrors import naming
from ..jobdir.frontier import Frontier
from ..jobdir.journal import MAX_SECONDS, MAX_TIME
from ..jobdir.maintenance.verify import verify
from ..jobdir.reader import (
    HostRow,
    all_seen_fingerprints,
    failed_requests,
    host_table,
    inspect_jobdir,
    pending_requests,
)
from ..jobdir.recovery import Progress
from ..redisfrontier import RedisFrontier, is_redis_url
from ..redisfrontier.verify import verify_crawl
from ..request.model import PRIORITY_MAX, PRIORITY_MIN, Request, check_slot, retries_text
from ..transfer.adopt import adopt_scrapy
from ..transfer.copy import REDIS_MAX_BUDGET, copy_crawl
from ..transfer.jsonlines import record_from_json, request_to_json, seen_to_json
from .support import (
    CRAWL_OPTION,
    EXIT_INTERRUPTED,
    FILES_ONLY_CRAWL_OPTION,
    JSON_OPTION,
    JobDirOrRedis,
    TargetUsageError,
    check_crawl_option,
    human_bytes,
    one_line_errors,
    open_redis,
    progress_bar,
    redis_call_errors,
    redis_crawl,
    refuse_redis,
    require_jobdir,
    shown_url,
    table,
    whole_file,
)

JOBDIR = click.argument("jobdir", type=JobDirOrRedis(exists=False))
EXISTING_JOBDIR = click.argument("jobdir", type=JobDirOrRedis(exists=True))
PRIORITY = click.IntRange(PRIORITY_MIN, PRIORITY_MAX)
BATCH = 10_000
T = TypeVar("T")


@click.group()
@click.version_option(package_name="diskfrontier")
@click.option("-v", "--verbose", is_flag=True, help="Log what the frontier does (recovery, compaction).")
def main(verbose: bool) -> None:
    """Inspect, verify, seed and compact diskfrontier job directories, and Redis crawls.

    Where a command takes JOBDIR, a Redis URL with --crawl NAME names a crawl of the Redis
    backend instead (diskfrontier inspect redis://localhost:6379/0 --crawl news).

    Example: diskfrontier demo crawls/demo && diskfrontier inspect crawls/demo
    """
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(name)s: %(message)s")


@main.command()
@EXISTING_JOBDIR
@CRAWL_OPTION
@JSON_OPTION
@one_line_errors
def inspect(jobdir: str, crawl: str | None, as_json: bool) -> None:
    """Show the state of JOBDIR without changing it (safe on a live crawl).

    With a Redis URL and --crawl: the crawl's counts and settings, its hosts and what
    waits for a time (leases that ran out are given back, as any client's call does).

    \b
    Example: diskfrontier inspect crawls/shop --json
             diskfrontier inspect redis://localhost:6379/0 --crawl news
    """
    name = redis_crawl(jobdir, crawl)
    if name is not None:
        _inspect_redis(jobdir, name, as_json)
        return
    require_jobdir(jobdir)
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
        ("done", f"{info.done:,}"),
        ("failed", f"{info.failed:,}" + (f" (diskfrontier failed {info.path} lists them)" if info.failed else "")),
        ("seen", f"{info.seen:,}" if info.seen_exact else
                 f"at least {info.seen:,} (the journal holds fingerprints that requests.seen may not have yet; "
                 f"the next open counts them all)"),
        ("journal", human_bytes(info.journal_bytes)), ("queues", human_bytes(info.queue_bytes)),
        ("seen file", human_bytes(info.seen_bytes)), ("reclaimable", human_bytes(info.reclaimable_bytes)),
    ]
    rows.append(("hosts", f"{info.hosts:,} with pending requests"))
    if info.delayed:
        rows.append(("delayed", f"{info.delayed:,} waiting for a time; the first is due {when(info.next_due)}"))
    if info.torn_bytes:
        rows.append(("torn tail", f"{info.torn_bytes} bytes (cut at the next open)"))
    if info.holder_pid:
        rows.append(("in flight", f"unknown while pid {info.holder_pid} holds it (counted in pending)"))
    click.echo(table(rows))


def _inspect_redis(url: str, crawl: str, as_json: bool) -> None:
    with open_redis(url, crawl) as frontier:
        stats = frontier.stats()
        ready = frontier.next_ready()
    for own in ("leased_here", "lease"):  # this command's own client, not the crawl's
        stats.pop(own, None)
    if as_json:
        click.echo(json.dumps({"redis": shown_url(url), **stats, "next_ready": ready}, indent=2))
        return
    per_host = "no limit" if stats["per_host"] is None else f"{stats['per_host']:,}"
    rows: list[tuple[str, Any]] = [
        ("redis", shown_url(url)), ("crawl", crawl), ("order", stats["order"]),
        ("settings", f"delay {stats['delay']:g}s, per host {per_host}, prefer {stats['prefer']}"),
        ("pending", f"{stats['pending']:,}"), ("in flight", f"{stats['in_flight']:,} leased by clients"),
        ("done", f"{stats['done']:,}"), ("seen", f"{stats['seen']:,}"),
        ("hosts", f"{stats['hosts']:,} ({stats['ready_hosts']:,} ready now)"),
    ]
    if stats["delayed"]:
        rows.append(("delayed", f"{stats['delayed']:,} waiting for a time"))
    if ready is not None:
        rows.append(("next ready", "now" if ready <= time.time() else when(ready)))
    elif stats["pending"]:
        rows.append(("next ready", "not by waiting (blocked until unblocked, or held by per-host or budget limits)"))
    click.echo(table(rows))


@main.command()
@EXISTING_JOBDIR
@CRAWL_OPTION
@click.option("-n", "count", type=click.IntRange(min=0), default=20, show_default=True,
              help="How many (0: all, as for hosts and failed).")
@click.option("--priority", type=PRIORITY, default=None, help="Only this priority.")
@JSON_OPTION
@one_line_errors
def peek(jobdir: str, crawl: str | None, count: int, priority: int | None, as_json: bool) -> None:
    """Show the next requests in queue order, without consuming them.

    Queue order is priority, then LIFO/FIFO, with the requests waiting for a time last (each
    with its time). It is the pop order while no host rule holds a request back; a delay,
    per_host, a block or a budget may hand them out in another order (see `hosts`).

    A Redis crawl (a URL and --crawl) hands out the best request of a host that is ready,
    so its pending requests (not those leased) are shown by priority, highest first,
    which is not always the order they are handed out in.

    Example: diskfrontier peek crawls/shop -n 5 --priority 10
    """
    name = redis_crawl(jobdir, crawl)
    if name is not None:
        _peek_redis(jobdir, name, count, priority, as_json)
        return
    require_jobdir(jobdir)
    pending = pending_requests(jobdir, priority=priority)
    shown: list[Request] = []
    for request in pending:
        if count and len(shown) >= count:
            break
        shown.append(request)
    if as_json:
        for request in shown:
            click.echo(request_to_json(request))
        return
    if not pending:
        others = len(pending_requests(jobdir)) if priority is not None else 0
        where = f" at priority {priority} ({others:,} pending at other priorities)" if others else ""
        click.echo(f"nothing pending{where}")
        return
    if not shown:
        return
    _show_requests(shown)


def _show_requests(shown: list[Request]) -> None:
    width = max(len(str(r.priority)) for r in shown)
    for request in shown:
        ready = "" if request.not_before is None else f"  (not before {when(request.not_before)})"
        click.echo(f"{request.priority:>{width}}  {request.method:<4} {request.url}{ready}")


def _peek_redis(url: str, crawl: str, count: int, priority: int | None, as_json: bool) -> None:
    matching = others = 0

    def wanted(requests: Iterable[Request]) -> Iterator[Request]:
        nonlocal matching, others
        for request in requests:
            if priority is None or request.priority == priority:
                matching += 1
                yield request
            else:
                others += 1

    with open_redis(url, crawl) as frontier:
        found = wanted(frontier.pending_requests(leased=False))
        by_priority = operator.attrgetter("priority")
        shown = heapq.nlargest(count, found, key=by_priority) if count else sorted(found, key=by_priority, reverse=True)
    if as_json:
        for request in shown:
            click.echo(request_to_json(request))
        return
    if not matching:
        where = f" at priority {priority} ({others:,} pending at other priorities)" if others else ""
        click.echo(f"nothing pending{where}")
        return
    if not shown:
        return
    click.echo(f"{len(shown):,} of {matching:,} pending, by priority (highest first): a Redis crawl hands out the "
               f"best request of a ready host, so this is not always pop order")
    _show_requests(shown)


def when(moment: float | None) -> str:
    """A time.time() value as local time, and how far from now."""
    if moment is None:
        return "-"
    if math.isinf(moment):
        return "never (until unblocked)"
    ahead = moment - time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment))
    if ahead <= 0:
        return f"{stamp} (passed)"
    return f"{stamp} (in {ahead:,.0f}s)"


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds or a time")
    return value


def _json_host(row: dict[str, Any]) -> dict[str, Any]:
    """A host as JSON: a block for ever is the string "forever" (JSON has no infinity)."""
    if row.get("blocked_until") == math.inf:
        return {**row, "blocked_until": "forever"}
    return row


SECONDS = click.FloatRange(min=0, max=MAX_SECONDS)
TIME = click.FloatRange(min=0, max=MAX_TIME)
HOST_SORTS = {"pending": lambda r: (-r.pending, r.host), "done": lambda r: (-r.done, r.host),
              "host": lambda r: r.host, "blocked": lambda r: (-(r.blocked_until or 0), r.host)}


@main.command()
@EXISTING_JOBDIR
@CRAWL_OPTION
@click.option("--sort", type=click.Choice(sorted(HOST_SORTS)), default="pending", show_default=True,
              help="Order of the list (most first).")
@click.option("-n", "count", type=click.IntRange(min=0), default=20, show_default=True,
              help="How many (0: all, as for peek and failed).")
@JSON_OPTION
@one_line_errors
def hosts(jobdir: str, crawl: str | None, sort: str, count: int, as_json: bool) -> None:
    """List the hosts of JOBDIR: pending and done requests, delay, block and budget (read-only).

    With a Redis URL and --crawl, the JSON form also gives each host's requests in flight.

    Example: diskfrontier hosts crawls/shop --sort done -n 10
    """
    name = redis_crawl(jobdir, crawl)
    in_flight: dict[str, int] | None = None
    if name is None:
        require_jobdir(jobdir)
        found = host_table(jobdir)
    else:
        with open_redis(jobdir, name) as frontier:
            infos, crawl_delay = frontier.hosts(), frontier.delay
        found = [HostRow(i.host, i.pending, i.done, None if i.delay == crawl_delay else i.delay, i.blocked_until,
                         i.budget) for i in infos]
        in_flight = {i.host: i.in_flight for i in infos}
    rows = sorted(found, key=HOST_SORTS[sort])
    shown = rows[:count] if count else rows
    if as_json:
        listed = [row.as_dict() if in_flight is None else {**row.as_dict(), "in_flight": in_flight[row.host]}
                  for row in shown]
        click.echo(json.dumps([_json_host(row) for row in listed], indent=2))
        return
    if not rows:
        click.echo("no hosts")
        return
    width = max(len(r.host) for r in shown)
    click.echo(f"{'host':<{width}}  {'pending':>9}  {'done':>9}  {'delay':>7}  {'budget':>7}  blocked until")
    for r in shown:
        delay = "default" if r.delay is None else f"{r.delay:g}s"
        budget = "-" if r.budget is None else f"{r.budget:,}"
        click.echo(f"{r.host:<{width}}  {r.pending:>9,}  {r.done:>9,}  {delay:>7}  {budget:>7}  "
                   f"{when(r.blocked_until) if r.blocked_until else '-'}")
    if len(shown) < len(rows):
        click.echo(f"... and {len(rows) - len(shown):,} more (-n 0 shows all)")


@main.command()
@EXISTING_JOBDIR
@click.argument("host")
@CRAWL_OPTION
@click.option("--delay", type=SECONDS, default=None, callback=_finite, help="Seconds between its requests.")
@click.option("--default-delay", is_flag=True, help="Use the crawl's delay for it again.")
@click.option("--block-for", type=SECONDS, default=None, callback=_finite, help="Hand out none of it for S seconds.")
@click.option("--block-until", type=TIME, default=None, callback=_finite,
              help="Hand out none of it before this time.time() value.")
@click.option("--block", "block_always", is_flag=True, help="Hand out none of it until --unblock.")
@click.option("--unblock", is_flag=True, help="End a block.")
@click.option("--budget", type=click.IntRange(min=0, max=2**63 - 1), default=None,
              help="At most N of its requests done or in flight, ever.")
@click.option("--no-budget", is_flag=True, help="Remove its budget.")
@JSON_OPTION
@one_line_errors
def host(jobdir: str, host: str, crawl: str | None, delay: float | None, default_delay: bool,
         block_for: float | None, block_until: float | None, block_always: bool, unblock: bool, budget: int | None,
         no_budget: bool, as_json: bool) -> None:
    """Change the settings of one HOST of JOBDIR (not while a crawl holds it); with no option, show them.

    A Redis crawl (a URL and --crawl) takes the change at once, while its clients run.

    \b
    Example: diskfrontier host crawls/shop shop.example --delay 2 --block-for 600
             diskfrontier host redis://localhost:6379/0 shop.example --crawl news --block
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
        raise click.BadParameter(f"{budget} is more than a Redis crawl keeps (2**53 - 1)", param_hint="'--budget'")
    opened = Frontier(jobdir) if name is None else open_redis(jobdir, name)
    guard = contextlib.nullcontext() if name is None else redis_call_errors()
    with opened as frontier, guard:
        if delay is not None or default_delay:
            frontier.set_delay(host, delay)
        if block_for is not None:
            frontier.block(host, time.time() + block_for)
        elif block_until is not None:
            frontier.block(host, block_until)
        elif block_always:
            frontier.block(host, math.inf)
        elif unblock:
            frontier.unblock(host)
        if budget is not None or no_budget:
            frontier.set_budget(host, budget)
        info = frontier.host(host)
        changed = any(blocks) or delay is not None or default_delay or budget is not None or no_budget
        unknown = changed and (info is None or not (info.pending or info.in_flight or info.done))
        lower = frontier.host(host.lower()) if unknown and host.lower() != host else None
    if unknown:
        hint = (f" (did you mean {lower.host}?)" if lower is not None
                else " (a URL's host is its slot, lower-cased and without port)")
        click.echo(f"note: {host} has no requests in this crawl yet; the setting waits for them{hint}", err=True)
    if as_json:
        click.echo(json.dumps(None if info is None else _json_host(info.to_dict()), indent=2))
        return
    if info is None:
        click.echo(f"{host}: no requests and no settings")
        return
    click.echo(table([
        ("host", info.host), ("pending", f"{info.pending:,}"), ("done", f"{info.done:,}"),
        ("delay", f"{info.delay:g}s"), ("blocked until", when(info.blocked_until) if info.blocked_until else "-"),
        ("budget", "-" if info.budget is None else f"{info.budget:,}"),
    ]))


@main.command(name="verify")
@EXISTING_JOBDIR
@CRAWL_OPTION
@click.option("--repair", is_flag=True, help="Rewrite damaged files keeping every intact record (Redis: rebuild "
                                             "the crawl's indexes from its stored requests).")
@JSON_OPTION
@one_line_errors
def verify_command(jobdir: str, crawl: str | None, repair: bool, as_json: bool) -> None:
    """Check every record of every file; exit 1 if damage is found.

    A Redis crawl (a URL and --crawl): check its queues, leases, hosts and counters against
    its stored requests (best with its clients stopped); --repair rebuilds them from the stored
    requests (stop the crawl's clients first) and sets aside, in the crawl's 'bad' hash, what
    cannot be decoded.

    Example: diskfrontier verify crawls/shop --repair
             diskfrontier verify redis://localhost:6379/0 --crawl news --repair
    """
    name = redis_crawl(jobdir, crawl)
    if name is not None:
        _verify_redis(jobdir, name, repair, as_json)
    require_jobdir(jobdir)
    with progress_bar("verifying") as progress:
        report = verify(jobdir, repair=repair, progress=progress)
    if as_json:
        click.echo(json.dumps({
            "sound": report.sound, "records": report.records, "repaired": report.repaired,
            "dropped_bytes": report.dropped_bytes, "notes": report.notes, "set_aside": report.set_aside,
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


def _verify_redis(url: str, crawl: str, repair: bool, as_json: bool) -> NoReturn:
    report = verify_crawl(url, crawl, repair=repair)
    if as_json:
        click.echo(json.dumps({
            "sound": report.sound, "requests": report.requests, "repaired": report.repaired, "kept": report.kept,
            "set_aside": report.set_aside, "notes": report.notes,
            "findings": [{"key": f.key, "problem": f.problem} for f in report.findings],
        }, indent=2))
    else:
        for finding in report.findings:
            click.echo(f"damaged: {finding}")
        for note in report.notes:
            click.echo(f"note: {note}")
        if report.sound:
            click.echo(f"sound: {report.requests:,} stored requests checked")
        elif report.repaired:
            aside = f"; set aside: {', '.join(report.set_aside)}" if report.set_aside else ""
            click.echo(f"repaired: rebuilt the indexes and counts of crawl {crawl!r} from its "
                       f"{report.kept:,} stored requests{aside}")
    sys.exit(0 if report.sound else 1)


@main.command()
@EXISTING_JOBDIR
@FILES_ONLY_CRAWL_OPTION
@JSON_OPTION
@one_line_errors
def compact(jobdir: str, crawl: str | None, as_json: bool) -> None:
    """Rewrite the journal and queues to hold only what is pending (atomic).

    A job directory only: a Redis crawl keeps no journal (a done request's keys are deleted at once).

    Example: diskfrontier compact crawls/shop
    """
    refuse_redis(jobdir, "compact rewrites the journal of a job directory, and a Redis crawl has none (it deletes "
                         "a done request's keys at once)")
    redis_crawl(jobdir, crawl)
    require_jobdir(jobdir)
    with Frontier(jobdir) as frontier, progress_bar("compacting") as progress:
        result = frontier.compact(progress)
        pending = len(frontier)
    if as_json:
        click.echo(json.dumps({"bytes_before": result.bytes_before, "bytes_after": result.bytes_after,
                               "pending": pending, "dropped_records": result.dropped_records}))
    else:
        click.echo(f"journal: {result.bytes_before:,} -> {result.bytes_after:,} bytes; "
                   f"{pending:,} pending kept, {result.dropped_records:,} finished records dropped")


@main.command(name="failed")
@EXISTING_JOBDIR
@CRAWL_OPTION
@click.option("-n", "count", type=click.IntRange(min=0), default=20, show_default=True,
              help="How many, oldest failure first (0: all, as for peek and hosts).")
@JSON_OPTION
@one_line_errors
def failed_command(jobdir: str, crawl: str | None, count: int, as_json: bool) -> None:
    """List the failed requests of JOBDIR (Frontier.fail), oldest first: URL, retries, when, error.

    A request's retries are its attempts (Request.attempts): how many times it was given
    back with retry() before it failed, as the crawl log counts them ("failed after 3
    retries"); the first try is not one.

    Read-only: safe on a directory a live crawl holds (its failures up to now). --json
    writes one object a line: the request as export writes it (with "attempts") plus
    "error" and "failed_at" (a time.time() value). 'diskfrontier requeue-failed' makes
    them pending again.

    \b
    Example: diskfrontier failed crawls/shop -n 50 --json
             diskfrontier failed redis://localhost:6379/0 --crawl shop
    """
    name = redis_crawl(jobdir, crawl)
    failed: Any
    if name is None:
        require_jobdir(jobdir)
        failed = failed_requests(jobdir)
    else:
        with open_redis(jobdir, name) as frontier:
            failed = frontier.failed()
    shown = list(itertools.islice(failed, count or None))
    if as_json:
        for entry in shown:
            data = json.loads(request_to_json(entry.request))
            data["attempts"] = entry.request.attempts
            data["error"], data["failed_at"] = entry.error, entry.failed_at
            click.echo(json.dumps(data, ensure_ascii=False))
        return
    if not shown:
        click.echo("no failed requests")
        return
    for entry in shown:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.failed_at))
        click.echo(f"{stamp}  {retries_text(entry.request.attempts):>11}  {entry.request.method:<4} "
                   f"{entry.request.url}")
        click.echo(f"    {_one_line(entry.error) or '(no error text)'}")
    if len(shown) < len(failed):
        click.echo(f"... and {len(failed) - len(shown):,} more (-n 0 shows all)")


def _one_line(text: str, width: int = 300) -> str:
    """``text`` on one line (its whitespace runs made single spaces), cut to ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 3] + "..."


@main.command(name="requeue-failed")
@EXISTING_JOBDIR
@CRAWL_OPTION
@JSON_OPTION
@one_line_errors
def requeue_failed_command(jobdir: str, crawl: str | None, as_json: bool) -> None:
    """Make every failed request of JOBDIR pending again, with attempts 0 (not while a crawl holds it).

    Example: diskfrontier requeue-failed crawls/shop
    """
    name = redis_crawl(jobdir, crawl)
    if name is None:
        require_jobdir(jobdir)
    with (Frontier(jobdir) if name is None else open_redis(jobdir, name)) as frontier:
        requeued = frontier.requeue_failed()
        pending = len(frontier)
    if as_json:
        click.echo(json.dumps({"requeued": requeued, "pending": pending}))
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


def _report_counts(queued: int, offered: int, bad: int, as_json: bool, *, seen: int | None = None) -> None:
    """``queued N, duplicates N, bad N`` (and ``seen N`` after an import), or the same as JSON."""
    counts = {"queued": queued, "duplicates": offered - queued, "bad": bad}
    if seen is not None:
        counts["seen"] = seen
    if as_json:
        click.echo(json.dumps(counts))
    else:
        click.echo(", ".join(f"{name} {n:,}" for name, n in counts.items()))


@main.command()
@JOBDIR
@click.argument("urls", nargs=-1)
@CRAWL_OPTION
@click.option("--file", "-f", "file", type=click.File("r"), help="URLs one a line; - for stdin.")
@click.option("--priority", type=PRIORITY, default=0, show_default=True)
@click.option("--dont-filter", is_flag=True, help="Queue even URLs seen before.")
@click.option("--strict", is_flag=True, help="Push nothing if any line is bad.")
@JSON_OPTION
@one_line_errors
def push(jobdir: str, urls: tuple[str, ...], crawl: str | None, file: IO[str] | None, priority: int,
         dont_filter: bool, strict: bool, as_json: bool) -> None:
    """Seed URLs into JOBDIR (created if missing or empty); report queued and duplicates.

    URLs are arguments, or one a line of --file; a lone - reads them from stdin. A bad
    line (not a URL, or two words) is reported with its number and the others still go
    in, unless --strict. Exit code 1 when a line was bad. A Redis crawl (a URL and
    --crawl) is made if it does not exist.

    \b
    Example: diskfrontier push crawls/shop https://shop.example/ --priority 10
             cat seeds.txt | diskfrontier push crawls/shop -
             diskfrontier push redis://localhost:6379/0 --crawl news https://news.example/
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
    frontier: Frontier | RedisFrontier | None = None
    try:
        with progress_bar("pushing", size) as progress:
            for batch in _runs(good):
                if frontier is None:  # a run with no good line creates nothing
                    frontier = Frontier(jobdir) if name is None else open_redis(jobdir, name, create=True)
                queued += frontier.push_many(batch)
                offered += len(batch)
    finally:
        if frontier is not None:
            frontier.close()
    _report_counts(queued, offered, bad, as_json)
    sys.exit(1 if bad else 0)


@main.command(name="export")
@EXISTING_JOBDIR
@CRAWL_OPTION
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="File to write (default stdout).")
@click.option("--priority", type=PRIORITY, default=None, help="Only this priority.")
@click.option("--seen", "with_seen", is_flag=True,
              help="Also write every seen fingerprint, so that what was done stays done after import.")
@one_line_errors
def export_command(jobdir: str, crawl: str | None, output: str, priority: int | None, with_seen: bool) -> None:
    """Write the pending requests as JSON lines (read-only).

    Priorities highest first and, within each, in the order they were pushed: importing
    the file into a job directory of the same order (LIFO or FIFO) pops them in the same
    order as here. --seen then adds a {"$seen": "<hex>"} line per seen fingerprint,
    which import marks seen without queueing anything. From a Redis crawl (a URL and
    --crawl) the requests leased to clients are written too, in no particular order.
    -o FILE is written under a temp name beside it and renamed at the end: stopped
    half-way, the export leaves no file (an older FILE stays as it was).

    \b
    Example: diskfrontier export crawls/shop -o pending.jsonl --seen
             diskfrontier export redis://localhost:6379/0 --crawl news -o news.jsonl --seen
    """
    name = redis_crawl(jobdir, crawl)
    if name is None:
        require_jobdir(jobdir)
        pending = pending_requests(jobdir, priority=priority, push_order=True)
        seen_of = (lambda: all_seen_fingerprints(jobdir)) if with_seen else None
        count, seen = _export(output, pending, len(pending), seen_of)
    else:
        with open_redis(jobdir, name) as frontier:
            stats = frontier.stats()
            requests: Iterable[Request] = frontier.pending_requests()
            if priority is not None:
                requests = (r for r in requests if r.priority == priority)
            count, seen = _export(output, requests, stats["pending"] + stats["in_flight"],
                                  frontier.seen_fingerprints if with_seen else None)
    if output != "-":
        also = f" and {seen:,} seen fingerprints" if with_seen else ""
        click.echo(f"exported {count:,} pending requests{also}", err=True)


def _export(output: str, requests: Iterable[Request], total: int,
            fingerprints: Callable[[], Iterable[bytes]] | None) -> tuple[int, int]:
    """Write ``requests`` (about ``total`` of them) and then, if asked, the seen fingerprints as JSON lines;
    return how many of each were written."""
    count = seen = 0
    target, rerun = "<stdout>" if output == "-" else output, "run the export again: what it wrote is incomplete"
    with naming(target, rerun), whole_file(output) as out, progress_bar("exporting", total) as progress:
        for request in requests:
            out.write(request_to_json(request) + "\n")
            count += 1
            if progress is not None and count % 1000 == 0:
                progress(count, total)
        if fingerprints is not None:
            for fingerprint in fingerprints():
                out.write(seen_to_json(fingerprint) + "\n")
                seen += 1
        out.flush()
    return count, seen


def _source_size(source: IO[str]) -> int:
    try:
        return os.fstat(source.fileno()).st_size
    except (OSError, ValueError, AttributeError):  # stdin from a pipe, or CliRunner's stream
        return 0


@main.command(name="import")
@JOBDIR
@click.argument("source", type=click.File("r"))
@CRAWL_OPTION
@JSON_OPTION
@one_line_errors
def import_command(jobdir: str, source: IO[str], crawl: str | None, as_json: bool) -> None:
    """Push the requests of a JSON-lines file (as written by export); - for stdin.

    JOBDIR is created if missing or empty (a Redis crawl, given as a URL and --crawl, if
    it does not exist). {"$seen": ...} lines (export --seen) mark
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

    queued = offered = seen = 0
    opened = Frontier(jobdir) if name is None else open_redis(jobdir, name, create=True)
    guard = contextlib.nullcontext() if name is None else redis_call_errors()
    with opened as frontier, guard, progress_bar("importing", size) as progress:
        for batch in _runs(records(progress)):
            if isinstance(batch[0], bytes):
                seen += frontier.mark_seen(cast("list[bytes]", batch))
            else:
                queued += frontier.push_many(cast("list[Request]", batch))
                offered += len(batch)
    _report_counts(queued, offered, bad, as_json, seen=seen)
    sys.exit(1 if bad else 0)


def _copy_crawl_name(side: str, target: str, own: str | None, shared: str | None, own_option: str) -> str | None:
    """The crawl of one side of ``copy``: None for a job directory; UsageError if a name does not fit."""
    if is_redis_url(target):
        name = own if own is not None else shared
        if name is None:
            raise TargetUsageError(f"{side} {shown_url(target)} is a Redis URL: name its crawl with {own_option} NAME "
                                   f"(or --crawl NAME for every Redis side)")
        return name
    if own is not None:
        raise TargetUsageError(f"{own_option} names a crawl in Redis, and {side} {target} is a job directory")
    return None


@main.command(name="copy")
@click.argument("src", type=JobDirOrRedis(exists=True))
@click.argument("dst", type=JobDirOrRedis(exists=False))
@click.option("--from-crawl", metavar="NAME", default=None, callback=check_crawl_option,
              help="The crawl to copy, when SRC is a Redis URL.")
@click.option("--to-crawl", metavar="NAME", default=None, callback=check_crawl_option,
              help="The crawl to make, when DST is a Redis URL.")
@click.option("--crawl", metavar="NAME", default=None, callback=check_crawl_option,
              help="The crawl name on every side that is a Redis URL (--from-crawl and --to-crawl override it).")
@JSON_OPTION
@one_line_errors
def copy_command(src: str, dst: str, from_crawl: str | None, to_crawl: str | None, crawl: str | None,
                 as_json: bool) -> None:
    """Copy a crawl from SRC to DST, each a job directory or a Redis URL.

    A Redis side is a URL (redis://, rediss:// or unix://) and a crawl name: --from-crawl
    for SRC, --to-crawl for DST, or --crawl for both. DST must be new or empty (a missing
    or empty folder, or a crawl that does not exist or holds nothing); the copy has its
    source's order (LIFO or FIFO).

    DST appears only when the copy is complete: a job directory is built in a hidden folder
    beside it (.NAME.diskfrontier-copy) and renamed at the end; a Redis crawl is marked
    unfinished until the end, and refused by every command meanwhile. A copy stopped
    half-way (Ctrl-C, kill -9) is redone by running the same command again.

    Copied: every pending request, with its priority, slot, attempts and not_before (those
    a job directory had in flight at a crash or at its close, and those leased to Redis
    clients, come over as pending); every failed request with its error, attempts and
    time; every seen fingerprint, done requests' included; each host's delay, block,
    budget and done count. A Redis crawl's delay, per-host limit and
    preference go with it to another Redis crawl (a job directory keeps none: the copy
    says what to pass to Frontier()).

    SRC is only read: a job directory without taking its lock (a crawl may be running on
    it; what it does meanwhile may be left out), a Redis crawl with scans (stop its clients
    first for an exact copy).

    \b
    Example: diskfrontier copy crawls/shop redis://localhost:6379/0 --to-crawl shop
             diskfrontier copy redis://localhost:6379/0 crawls/shop-back --from-crawl shop
             diskfrontier copy redis://a:6379/0 redis://b:6379/0 --from-crawl shop --to-crawl shop2
    """
    src_crawl = _copy_crawl_name("SRC", src, from_crawl, crawl, "--from-crawl")
    dst_crawl = _copy_crawl_name("DST", dst, to_crawl, crawl, "--to-crawl")
    if crawl is not None and src_crawl is None and dst_crawl is None:
        raise TargetUsageError("--crawl names a crawl in Redis, and SRC and DST are both job directories")
    if src_crawl is None:
        require_jobdir(src)
    with progress_bar("copying") as progress, redis_call_errors():
        report = copy_crawl(src, dst, from_crawl=src_crawl, to_crawl=dst_crawl, progress=progress)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
        return
    click.echo(f"copied {report.source} to {report.destination} ({report.order})")
    click.echo(table([
        ("pending", f"{report.queued:,} requests"
                    + (f" ({report.duplicates:,} more left out: each shared its fingerprint with another pending "
                       f"request)" if report.duplicates else "")),
        ("failed", f"{report.failed:,} requests"),
        ("seen", f"{report.seen:,} fingerprints"),
        ("hosts", f"{report.host_settings:,} with settings, {report.host_done:,} with done counts "
                  f"({report.done:,} done)"),
    ]))
    for note in report.notes:
        click.echo(f"note: {note}")


@main.command(name="adopt-scrapy")
@EXISTING_JOBDIR
@FILES_ONLY_CRAWL_OPTION
@click.option("--trust-pickle", is_flag=True,
              help="Also import the requests of Scrapy's queue by unpickling them (runs code: trusted JOBDIRs only).")
@JSON_OPTION
@one_line_errors
def adopt_scrapy_command(jobdir: str, crawl: str | None, trust_pickle: bool, as_json: bool) -> None:
    """Make a JOBDIR of Scrapy's own scheduler a diskfrontier job directory, in place.

    Scrapy's requests.seen is kept (every URL it saw stays seen) and its queue folder is
    set aside, not read. With --trust-pickle its pending requests are imported too, by
    unpickling them; the queue of a Scrapy crawl killed with kill -9 is recovered as well.
    To bring such a crawl to Redis, adopt it, then 'diskfrontier copy' it.

    Example: diskfrontier adopt-scrapy crawls/shop --trust-pickle
    """
    refuse_redis(jobdir, "adopt-scrapy converts the files of a Scrapy JOBDIR in place, and a Redis crawl has no "
                         "files: adopt the JOBDIR, then 'diskfrontier copy JOBDIR URL --to-crawl NAME'")
    redis_crawl(jobdir, crawl)
    if trust_pickle:
        click.echo("warning: --trust-pickle unpickles Scrapy's queue files, and unpickling runs whatever code "
                   "they hold: use it only on a job directory your own crawl wrote", err=True)
    with progress_bar("importing") as progress:
        report = adopt_scrapy(jobdir, trust_pickle=trust_pickle, progress=progress)
    if as_json:
        click.echo(json.dumps(report.__dict__, indent=2))
    else:
        click.echo(f"adopted {jobdir}: {report.seen:,} seen fingerprints kept")
        if report.aside is None:
            click.echo("Scrapy's queue: none")
        else:
            click.echo(f"Scrapy's queue: {report.queues} queue(s), {report.counted:,} requests by their headers, "
                       f"set aside in {report.aside}")
        if trust_pickle:
            earlier = f" ({report.earlier:,} by an earlier run)" if report.earlier else ""
            click.echo(f"imported {report.imported + report.earlier:,} of {report.found:,} requests found{earlier}; "
                       f"skipped {len(report.skipped):,}")
            for problem in report.skipped[:20]:
                click.echo(f"  skipped: {problem}", err=True)
        elif report.aside is not None and report.queues:
            click.echo(f"its requests were not imported: run 'diskfrontier adopt-scrapy {jobdir} --trust-pickle' "
                       f"to import them (unpickling runs code), or they will not be crawled")
    sys.exit(1 if report.skipped else 0)


@main.command()
@JOBDIR
@FILES_ONLY_CRAWL_OPTION
@click.option("--pages", type=click.IntRange(min=1), default=300, show_default=True,
              help="Pages of the synthetic site.")
@click.option("--workers", type=click.IntRange(min=1), default=8, show_default=True, help="Worker threads.")
@click.option("--duration", "--for", "seconds", type=click.FloatRange(min=0), default=None,
              help="Stop each run cleanly after this many seconds.")
@click.option("--every", type=click.FloatRange(min=0), default=None, help="Start a run every this many seconds.")
@click.option("--times", type=click.IntRange(min=1), default=1, show_default=True, help="How many runs.")
@JSON_OPTION
@one_line_errors
def demo(jobdir: str, crawl: str | None, pages: int, workers: int, seconds: float | None, every: float | None,
         times: int, as_json: bool) -> None:
    """Crawl a synthetic site into JOBDIR with crawl(); run again to resume.

    JOBDIR is a job directory, or a missing or empty folder (made one, as push does).

    The site is served on 127.0.0.2 to 127.0.0.5 (half the pages on the first), so
    politeness shows (diskfrontier hosts JOBDIR); a few pages answer 503 the first time,
    so retries show. Ctrl-C finishes the pages in hand and stops (exit code 130; a second
    Ctrl-C stops at once); --duration stops each run cleanly; kill -9 is survived too.
    A job directory only (the demo keeps its fetch log in it).

    \b
    Example: diskfrontier demo crawls/demo --pages 500 --duration 2
             diskfrontier demo crawls/demo --workers 16 --every 5 --times 3 --duration 2
    """
    refuse_redis(jobdir, "the demo crawls into a job directory (it keeps its fetch log there): give a folder, "
                         "then 'diskfrontier copy' it to Redis if you like")
    redis_crawl(jobdir, crawl)
    require_jobdir(jobdir, may_create=True)
    with progress_bar("crawling", pages) as progress:
        result = run_demo(jobdir, pages=pages, seconds=seconds, workers=workers, every=every, times=times,
                          on_page=None if progress is None else lambda done, _pending: progress(done, pages))
    if as_json:
        click.echo(json.dumps(result.__dict__))
    else:
        runs = f" in {result.runs} runs" if result.runs > 1 else ""
        click.echo(f"{result.stopped_by}: fetched {result.fetched:,} pages{runs} in {result.seconds:.1f}s "
                   f"({result.retried:,} retries, {result.failed:,} failed); {result.pending:,} pending, "
                   f"{result.seen:,} seen. Inspect it: diskfrontier inspect {jobdir}")
    if result.stopped_by == "interrupted":
        sys.exit(EXIT_INTERRUPTED)
