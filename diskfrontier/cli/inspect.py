"""Commands that read a crawl without changing it: inspect, peek, hosts, failed."""

from __future__ import annotations

import heapq
import itertools
import json
import operator
import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

import click

from ..access.servers import crawl_clients
from ..access.targets import backend_of
from ..core.errors import JobDirCorrupt
from ..jobdir.hostmeta import HEALTH_NAME, read_health
from ..jobdir.inbox import Survey, survey
from ..jobdir.layout import FORMAT_VERSION
from ..jobdir.reader import failed_requests, inspect_jobdir, published_status
from ..request.model import Request, retries_text
from ..request.revisit import RevisitSummary, overdue
from ..transfer.jsonlines import request_to_json
from .hostdoc import from_row, published_hosts
from .inspectdoc import jobdir_state, live_document, redis_document, stopped_document
from .jsonout import echo_json
from .options import EXISTING_JOBDIR, PRIORITY, when
from .revisits import AUTO_LIMIT, next_visits, revisit_rows, revisit_summary, revisits_by_host, seconds_text
from .support import (
    CRAWL_OPTION,
    JSON_OPTION,
    human_bytes,
    one_line_errors,
    open_crawl,
    open_crawl_view,
    redis_crawl,
    require_jobdir,
    shown_url,
    table,
)


@click.command()
@EXISTING_JOBDIR
@CRAWL_OPTION
@click.option("--revisits/--no-revisits", default=None,
              help="Count the revisits (due, overdue, intervals): reads every pending request. By default "
                   f"counted up to {AUTO_LIMIT:,} pending requests.")
@JSON_OPTION
@one_line_errors
def inspect(jobdir: str, crawl: str | None, revisits: bool | None, as_json: bool) -> None:
    """Show the state of JOBDIR without changing it (safe on a live crawl).

    With a Redis or PostgreSQL URL and --crawl: the crawl's counts and settings, its hosts and
    what waits for a time (leases that ran out are given back, as any client's call does).

    \b
    Example: diskfrontier inspect crawls/shop --json
             diskfrontier inspect redis://localhost:6379/0 --crawl news
             diskfrontier inspect postgresql://crawler@db:5432/crawls --crawl news
    """
    name = redis_crawl(jobdir, crawl)
    if name is not None:
        _inspect_server(jobdir, name, revisits, as_json)
        return
    require_jobdir(jobdir)
    live = published_status(jobdir)
    if live is not None:
        _inspect_live(jobdir, live, revisits, as_json)
        return
    info = inspect_jobdir(jobdir)
    failing = failing_hosts(jobdir)
    held = survey(jobdir)
    state, state_text = jobdir_state(info.state)
    try:
        counted = _revisits(jobdir, None, revisits, info.pending)
    except JobDirCorrupt as exc:  # its checkpoint says clean, and a record it holds is not
        counted, state, state_text = None, "damaged", str(exc)
    if as_json:
        echo_json(stopped_document(info, state, state_text, failing, held, counted))
        sys.exit(1 if state == "damaged" else 0)
    shown_state = state_text if state == "damaged" else info.state
    rows = [
        ("job directory", info.path), ("state", shown_state), ("format", f"v{info.format_version}, {info.order}" + (
            f" (upgraded to v{FORMAT_VERSION} at the next open)" if info.format_version < FORMAT_VERSION else "")),
        ("created", info.created), ("pending", f"{info.pending:,}"),
    ]
    rows += [(f"  priority {p}", f"{n:,}") for p, n in info.pending_by_priority.items()]
    rows += [
        ("done", f"{info.done:,}"),
        ("failed", f"{info.failed:,}" + (f" (diskfrontier failed {info.path} lists them)" if info.failed else "")),
        ("seen", f"{info.seen:,}" if info.seen_exact else
                 f"at least {info.seen:,} (the journal holds fingerprints that requests.seen may not have yet; "
                 f"the next open counts them all)"),
        ("journal", _journal_row(info.journal_bytes, info.live_bytes)), ("queues", human_bytes(info.queue_bytes)),
        ("seen file", human_bytes(info.seen_bytes)), ("reclaimable", human_bytes(info.reclaimable_bytes)),
        ("checkpoint", _checkpoint_row(info.checkpoint_at, info.checkpoint_time)),
        ("compactions", f"{info.compactions:,} since it was made"),
    ]
    rows.append(("hosts", f"{info.hosts:,} with pending requests"))
    if info.delayed:
        rows.append(("delayed", f"{info.delayed:,} waiting for a time; the first is due {when(info.next_due)}"))
    if info.torn_bytes:
        rows.append(("torn tail", f"{info.torn_bytes} bytes (cut at the next open)"))
    if info.holder_pid:
        rows.append(("in flight", f"unknown while pid {info.holder_pid} holds it (counted in pending)"))
    if info.paused_since is not None:
        rows.append(("paused", f"since {_local(info.paused_since)}: nothing is handed out until resume"))
    rows += revisit_rows(counted, info.pending, AUTO_LIMIT) if revisits is not False else []
    rows += _failing_rows(failing)
    rows += _inbox_rows(held, "the next open")
    click.echo(table(rows))
    sys.exit(1 if state == "damaged" else 0)


def _revisits(target: str, crawl: str | None, asked: bool | None, pending: int) -> RevisitSummary | None:
    """The revisits of the pending requests, if asked for (``None``: when there are few enough to read)."""
    if asked is False or (asked is None and pending > AUTO_LIMIT):
        return None
    return revisit_summary(target, crawl)


def _inbox_rows(held: Survey, next_look: str) -> list[tuple[str, Any]]:
    """The inbox's row, when it holds anything: what waits, what was set aside, what else is there."""
    if not held:
        return []
    parts = []
    if held.waiting:
        parts.append(f"{held.waiting:,} command{'s' * (held.waiting != 1)} waiting")
    if held.answers:
        parts.append(f"{held.answers:,} answer{'s' * (held.answers != 1)} not collected")
    if held.set_aside:
        parts.append(f"{held.set_aside:,} set aside (NAME.refused: never applied)")
    if held.other:
        shown = ", ".join(f"{name!r} ({kind})" for name, kind in held.other[:3])
        more = f" and {len(held.other) - 3:,} more" if len(held.other) > 3 else ""
        parts.append(f"{len(held.other):,} not a command: {shown}{more} (set aside at {next_look}, or left "
                     f"in place if it cannot be: its log names them)")
    return [("inbox", "; ".join(parts))]


def failing_hosts(path: str) -> dict[str, int]:
    """The hosts of a job directory with consecutive failures (its ``hosts.health``), most first."""
    counts = read_health(os.path.join(path, HEALTH_NAME))
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _failing_rows(failing: dict[str, int]) -> list[tuple[str, Any]]:
    if not failing:
        return []
    worst = ", ".join(f"{host} ({count})" for host, count in list(failing.items())[:3])
    return [("failing hosts", f"{len(failing):,} with consecutive failures: {worst} (see hosts --sort failures)")]


def _local(moment: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment))


def _inspect_live(path: str, live: dict[str, Any], revisits: bool | None, as_json: bool) -> None:
    """``inspect`` of a directory a crawl holds: what that crawl published, without reading the journal."""
    stats = live["stats"]
    age = max(0.0, time.time() - live["taken"])
    state = f"running, held by pid {live['pid']} on {live.get('machine', '?')} (published {age:.1f}s ago)"
    failing = failing_hosts(path)
    held = survey(path)
    counted = _revisits(path, None, revisits, stats.get("pending", 0))
    if as_json:
        echo_json(live_document(path, live, state, failing, held, counted))
        return
    rows: list[tuple[str, Any]] = [("job directory", path), ("state", state),
                                   ("pending", f"{stats.get('pending', 0):,}")]
    by_priority = stats.get("pending_by_priority") or {}
    rows += [(f"  priority {p}", f"{n:,}") for p, n in by_priority.items()]
    rows += [
        ("in flight", f"{stats.get('in_flight', 0):,}"),
        ("this run", f"pushed {stats.get('pushed', 0):,}, duplicates {stats.get('duplicates', 0):,}, "
                     f"done {stats.get('done', 0):,}, dropped {stats.get('dropped', 0):,}"),
        ("failed", f"{stats.get('failed', 0):,}"),
        ("seen", f"{stats.get('seen', 0):,}"),
        ("hosts", f"{live.get('hosts_total', 0):,} ({live.get('hosts_ready', 0):,} ready now, "
                  f"{live.get('hosts_waiting', 0):,} waiting)"),
    ]
    if stats.get("delayed"):
        rows.append(("delayed", f"{stats['delayed']:,} waiting for a time"))
    if live.get("paused_since") is not None:
        rows.append(("paused", f"since {_local(live['paused_since'])}: nothing is handed out until resume"))
    elif live.get("next_ready") is not None:
        ready = live["next_ready"]
        rows.append(("next ready", "now" if ready <= max(live["taken"], time.time()) else when(ready)))
    if stats.get("journal_bytes") is not None:
        rows.append(("journal", _journal_row(stats["journal_bytes"], stats.get("live_bytes"))))
    if "checkpoints" in stats:
        last = stats.get("last_checkpoint")
        rows.append(("checkpoint", f"{max(0.0, time.time() - last):.0f}s ago ({stats['checkpoints']:,} this run)"
                                   if last is not None else "none yet in this run"))
        rows.append(("compactions", f"{stats.get('compactions_total', 0):,} since it was made, "
                                    f"{stats.get('compactions', 0):,} this run"))
    rows += revisit_rows(counted, stats.get("pending", 0), AUTO_LIMIT) if revisits is not False else []
    rows += _failing_rows(failing)
    rows += _inbox_rows(held, "the crawl's next look")
    click.echo(table(rows))


def _journal_row(size: int, live: int | None) -> str:
    """The journal's size, and what share of it a compaction keeps."""
    if live is None or size <= 0:
        return human_bytes(size)
    return f"{human_bytes(size)}, {min(100.0, 100.0 * live / size):.0f}% live"


def _checkpoint_row(at: int | None, written: float | None) -> str:
    """Where a recovery or a read of the directory starts."""
    if at is None:
        return "none: a recovery reads the journal from its start"
    age = "" if written is None else f", written {max(0.0, time.time() - written):.0f}s ago"
    return f"at byte {at:,}{age}: a recovery reads only the journal after it"


def _seen_layout(stats: dict[str, Any]) -> str:
    """How a Redis or PostgreSQL crawl keeps its seen set, in a few words."""
    if stats.get("backend") == "postgres":
        return "64-bit keys in the seen table"
    if stats.get("seen_layout") == "bloom":
        return f"Bloom filters: {stats.get('bloom_filters', 0)}; a new URL may be taken for seen"
    kind = "64-bit keys" if stats.get("seen_layout") == "set64" else "whole fingerprints, earlier layout"
    return f"{kind} in {stats.get('seen_buckets', 0):,} buckets"


def _inspect_server(url: str, crawl: str, revisits: bool | None, as_json: bool) -> None:
    with open_crawl(url, crawl) as frontier:
        stats = frontier.stats()
        ready = frontier.next_ready()
        failing = dict(sorted(((h.host, h.failures) for h in frontier.hosts() if h.failures),
                              key=lambda item: (-item[1], item[0])))
    live_clients = sum(1 for client in crawl_clients(url, crawl) if client.live)
    for own in ("leased_here", "lease", "prefetched", "acks_lost", "acks_failed"):  # this command's own client
        stats.pop(own, None)
    counted = _revisits(url, crawl, revisits, stats["pending"])
    if as_json:
        echo_json(redis_document(url, crawl, stats, ready, live_clients, failing, counted))
        return
    per_host = "no limit" if not stats["per_host"] else f"{stats['per_host']:,}"
    prefer = f", prefer {stats['prefer']}" if "prefer" in stats else ""
    rows: list[tuple[str, Any]] = [
        (backend_of(url), shown_url(url)), ("crawl", crawl), ("order", stats["order"]),
        ("settings", f"delay {stats['delay']:g}s, per host {per_host}{prefer}"),
        ("pending", f"{stats['pending']:,}"), ("in flight", f"{stats['in_flight']:,} leased by clients"),
        ("done", f"{stats['done']:,}"),
        ("failed", f"{stats['failed']:,}" + (f" (diskfrontier failed {shown_url(url)} --crawl {crawl} lists them)"
                                             if stats["failed"] else "")),
        ("seen", f"{stats['seen']:,} ({_seen_layout(stats)})"),
        ("hosts", f"{stats['hosts']:,} ({stats['ready_hosts']:,} ready now)"),
    ]
    if stats["delayed"]:
        rows.append(("delayed", f"{stats['delayed']:,} waiting for a time"))
    if stats["dropped"]:
        rows.append(("dropped", f"{stats['dropped']:,} pending requests removed by drop"))
    if stats["paused_since"] is not None:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stats["paused_since"]))
        rows.append(("paused", f"since {since}: nothing is handed out until the crawl is resumed"))
    elif ready is not None:
        rows.append(("next ready", "now" if ready <= time.time() else when(ready)))
    elif stats["pending"]:
        rows.append(("next ready", "not by waiting (blocked until unblocked, or held by per-host or budget limits)"))
    rows += revisit_rows(counted, stats["pending"], AUTO_LIMIT) if revisits is not False else []
    rows += _failing_rows(failing)
    click.echo(table(rows))


@click.command()
@EXISTING_JOBDIR
@CRAWL_OPTION
@click.option("-n", "count", type=click.IntRange(min=0), default=20, show_default=True,
              help="How many (0: all, as for hosts and failed).")
@click.option("--priority", type=PRIORITY, default=None, help="Only this priority.")
@click.option("--due", is_flag=True, help="The next visits of the pages revisited: soonest first, each with its "
                                          "time, interval, visits and changes (reads every pending request).")
@JSON_OPTION
@one_line_errors
def peek(jobdir: str, crawl: str | None, count: int, priority: int | None, due: bool, as_json: bool) -> None:
    """Show the next requests in queue order, without consuming them.

    Queue order is priority, then LIFO/FIFO, with the requests waiting for a time last (each
    with its time). It is the pop order while no host rule holds a request back; a delay,
    per_host, a block or a budget may hand them out in another order (see `hosts`).

    A Redis or PostgreSQL crawl (a URL and --crawl) hands out the best request of a host
    that is ready, so its pending requests (not those leased) are shown by priority,
    highest first, which is not always the order they are handed out in.

    Example: diskfrontier peek crawls/shop -n 5 --priority 10
             diskfrontier peek crawls/news --due -n 10
    """
    name = redis_crawl(jobdir, crawl)
    if due:
        if priority is not None:
            raise click.UsageError("--due lists the next visits of every priority: leave out --priority")
        if name is None:
            require_jobdir(jobdir)
        _peek_due(jobdir, name, count, as_json)
        return
    if name is not None:
        _peek_redis(jobdir, name, count, priority, as_json)
        return
    require_jobdir(jobdir)
    with open_crawl_view(jobdir, None, priority=priority, failed=False, pop_order=True) as view:
        shown: list[Request] = []
        for request in view.pending_requests():
            if count and len(shown) >= count:
                break
            shown.append(request)
        pending = view.pending_count()
    if as_json:
        for request in shown:
            click.echo(request_to_json(request))
        return
    if not pending:
        others = _pending_count(jobdir) if priority is not None else 0
        where = f" at priority {priority} ({others:,} pending at other priorities)" if others else ""
        click.echo(f"nothing pending{where}")
        return
    if not shown:
        return
    _show_requests(shown)


def _peek_due(target: str, crawl: str | None, count: int, as_json: bool) -> None:
    shown = next_visits(target, crawl, count)
    if as_json:
        for request in shown:
            click.echo(request_to_json(request))
        return
    if not shown:
        click.echo("no pending request has a revisit state (a crawl with revisit=Revisit(...) gives them one)")
        return
    now = time.time()
    for request in shown:
        state = request.revisit
        assert state is not None
        late = "  overdue" if overdue(state, now) else ""
        click.echo(f"{when(state.next_visit)}  every {seconds_text(state.interval):>6}  visits {state.visits:,}  "
                   f"changed {state.changes:,}  {request.url}{late}")


def _pending_count(jobdir: str) -> int:
    """Requests pending in the job directory ``jobdir``, of every priority."""
    with open_crawl_view(jobdir, None, failed=False, pop_order=True) as view:
        return view.pending_count()


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

    with open_crawl_view(url, crawl, failed=False, pop_order=True) as view:
        found = wanted(view.pending_requests())
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
    kind = "a PostgreSQL" if backend_of(url) == "postgres" else "a Redis"
    click.echo(f"{len(shown):,} of {matching:,} pending, by priority (highest first): {kind} crawl hands out the "
               f"best request of a ready host, so this is not always pop order")
    _show_requests(shown)


HOST_SORTS = {"pending": lambda r: (-r.pending, r.host), "done": lambda r: (-r.done, r.host),
              "host": lambda r: r.host, "blocked": lambda r: (-(r.blocked_until or 0), r.host),
              "failures": lambda r: (-r.failures, r.host)}


@click.command()
@EXISTING_JOBDIR
@CRAWL_OPTION
@click.option("--sort", type=click.Choice(sorted(HOST_SORTS)), default="pending", show_default=True,
              help="Order of the list (most first).")
@click.option("-n", "count", type=click.IntRange(min=0), default=20, show_default=True,
              help="How many (0: all, as for peek and failed).")
@click.option("--revisits", is_flag=True, help="Add each host's revisits: pages, due now, overdue, median "
                                               "interval (reads every pending request).")
@JSON_OPTION
@one_line_errors
def hosts(jobdir: str, crawl: str | None, sort: str, count: int, revisits: bool, as_json: bool) -> None:
    """List the hosts of JOBDIR: pending and done requests, delay, budget, consecutive failures and block
    (read-only).

    With a Redis or PostgreSQL URL and --crawl, the JSON form also gives each host's requests in flight.

    Example: diskfrontier hosts crawls/shop --sort done -n 10
    """
    name = redis_crawl(jobdir, crawl)
    if name is None:
        require_jobdir(jobdir)
    with open_crawl_view(jobdir, name, failed=False) as view:
        found = view.host_rows()
    rows = sorted(found, key=HOST_SORTS[sort])
    shown = rows[:count] if count else rows
    by_host = revisits_by_host(jobdir, name) if revisits else {}
    if as_json:
        published = published_hosts(published_status(jobdir)) if name is None else {}
        out = [from_row(row, published.get(row.host)) for row in shown]
        for entry, row in zip(out, shown, strict=True):
            summary = by_host.get(row.host)
            entry["revisits"] = summary.as_dict() if summary is not None else None
        echo_json(out)
        return
    if not rows:
        click.echo("no hosts")
        return
    width = max(len(r.host) for r in shown)
    extra = f"  {'revisits':>8}  {'due':>7}  {'overdue':>7}  {'median':>6}" if revisits else ""
    click.echo(f"{'host':<{width}}  {'pending':>9}  {'done':>9}  {'delay':>7}  {'budget':>7}  {'failures':>8}"
               f"{extra}  blocked until")
    for r in shown:
        delay = "default" if r.delay is None else f"{r.delay:g}s"
        budget = "-" if r.budget is None else f"{r.budget:,}"
        summary = by_host.get(r.host)
        more = ""
        if revisits:
            median = seconds_text(summary.intervals["median"]) if summary is not None else "-"
            pages, due, late = (summary.pages, summary.due, summary.overdue) if summary is not None else (0, 0, 0)
            more = f"  {pages:>8,}  {due:>7,}  {late:>7,}  {median:>6}"
        click.echo(f"{r.host:<{width}}  {r.pending:>9,}  {r.done:>9,}  {delay:>7}  {budget:>7}  {r.failures:>8,}"
                   f"{more}  {when(r.blocked_until) if r.blocked_until else '-'}")
    if len(shown) < len(rows):
        click.echo(f"... and {len(rows) - len(shown):,} more (-n 0 shows all)")


@click.command(name="failed")
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
             diskfrontier failed postgresql://crawler@db:5432/crawls --crawl shop
    """
    name = redis_crawl(jobdir, crawl)
    failed: Any
    if name is None:
        require_jobdir(jobdir)
        failed = failed_requests(jobdir)
    else:
        with open_crawl(jobdir, name) as frontier:
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
