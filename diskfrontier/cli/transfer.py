"""Commands that move a crawl's requests elsewhere: export (to JSON lines) and copy (to another backend)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import click

from ..access.targets import backend_name, is_server_target
from ..files.writeerrors import naming
from ..request.model import Request
from ..transfer.copy import copy_crawl
from ..transfer.jsonlines import request_to_json, seen_to_json
from .jsonout import echo_json
from .options import EXISTING_JOBDIR, PRIORITY
from .support import (
    CRAWL_OPTION,
    JSON_OPTION,
    SHARDS_OPTION,
    JobDirOrRedis,
    TargetUsageError,
    check_crawl_option,
    one_line_errors,
    open_crawl_view,
    progress_bar,
    redis_call_errors,
    redis_crawl,
    require_jobdir,
    shown_url,
    table,
    whole_file,
)


@click.command(name="export")
@EXISTING_JOBDIR
@CRAWL_OPTION
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="File to write (default stdout).")
@click.option("--priority", type=PRIORITY, default=None, help="Only this priority.")
@click.option("--seen", "with_seen", is_flag=True,
              help="Also write every seen fingerprint, so that what was done stays done after import.")
@click.option("--json", "as_json", is_flag=True,
              help="Print a summary as JSON once the file is written (needs -o FILE: stdout holds the requests).")
@one_line_errors
def export_command(jobdir: str, crawl: str | None, output: str, priority: int | None, with_seen: bool,
                   as_json: bool) -> None:
    """Write the pending requests as JSON lines (read-only).

    Priorities highest first and, within each, in the order they were pushed: importing
    the file into a job directory of the same order (LIFO or FIFO) pops them in the same
    order as here. --seen then adds a {"$seen": "<hex>"} line per seen fingerprint,
    which import marks seen without queueing anything. From a Redis or PostgreSQL crawl
    (a URL and --crawl) the requests leased to clients are written too, in no particular
    order (a PostgreSQL crawl's seen set: each fingerprint's 64-bit key, then zero bytes).
    -o FILE is written under a temp name beside it and renamed at the end: stopped
    half-way, the export leaves no file (an older FILE stays as it was).

    \b
    Example: diskfrontier export crawls/shop -o pending.jsonl --seen
             diskfrontier export redis://localhost:6379/0 --crawl news -o news.jsonl --seen
             diskfrontier export postgresql://crawler@db:5432/crawls --crawl news -o news.jsonl
    """
    name = redis_crawl(jobdir, crawl)
    if as_json and output == "-":
        raise click.UsageError("--json prints a summary on stdout, where the requests go without -o: "
                               "give -o FILE")
    if name is None:
        require_jobdir(jobdir)
    with open_crawl_view(jobdir, name, priority=priority, failed=False) as view:
        count, seen = _export(output, view.pending_requests(), view.pending_count(),
                              view.seen_fingerprints if with_seen else None)
    if as_json:
        echo_json({"output": output, "requests": count, "seen": seen if with_seen else None})
    elif output != "-":
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


def _copy_crawl_name(side: str, target: str, own: str | None, shared: str | None, own_option: str) -> str | None:
    """The crawl of one side of ``copy``: None for a job directory; UsageError if a name does not fit."""
    if is_server_target(target):
        name = own if own is not None else shared
        if name is None:
            raise TargetUsageError(f"{side} {shown_url(target)} is a {backend_name(target)} URL: name its crawl with "
                                   f"{own_option} NAME (or --crawl NAME for every Redis or PostgreSQL side)")
        return name
    if own is not None:
        raise TargetUsageError(f"{own_option} names a crawl in Redis, and {side} {target} is a job directory")
    return None


@click.command(name="copy")
@click.argument("src", type=JobDirOrRedis(exists=True))
@click.argument("dst", type=JobDirOrRedis(exists=False))
@click.option("--from-crawl", metavar="NAME", default=None, callback=check_crawl_option,
              help="The crawl to copy, when SRC is a Redis or PostgreSQL URL.")
@click.option("--to-crawl", metavar="NAME", default=None, callback=check_crawl_option,
              help="The crawl to make, when DST is a Redis or PostgreSQL URL.")
@click.option("--crawl", metavar="NAME", default=None, callback=check_crawl_option,
              help="The crawl name on every side that is a Redis or PostgreSQL URL (--from-crawl and --to-crawl "
                   "override it).")
@SHARDS_OPTION
@JSON_OPTION
@one_line_errors
def copy_command(src: str, dst: str, from_crawl: str | None, to_crawl: str | None, crawl: str | None,
                 shards: int | None, as_json: bool) -> None:
    """Copy a crawl from SRC to DST, each a job directory, a Redis URL or a PostgreSQL URL.

    A Redis side is a URL (redis://, rediss:// or unix://) and a crawl name, a PostgreSQL
    side a URL (postgresql://user@host:5432/db) and a crawl name: --from-crawl for SRC,
    --to-crawl for DST, or --crawl for both. DST must be new or empty (a missing
    or empty folder, or a crawl that does not exist or holds nothing); the copy has its
    source's order (LIFO or FIFO). --shards N makes a Redis DST of N shards (see
    'diskfrontier push --help'); a Redis Cluster is found by its URL (any node's).

    DST appears only when the copy is complete: a job directory is built in a hidden folder
    beside it (.NAME.diskfrontier-copy) and renamed at the end; a Redis crawl is marked
    unfinished until the end, and refused by every command meanwhile; a PostgreSQL crawl is
    built as the crawl NAME.diskfrontier-copy and renamed at the end. A copy stopped
    half-way (Ctrl-C, kill -9) is redone by running the same command again.

    Copied: every pending request, with its priority, slot, attempts and not_before (those
    a job directory had in flight at a crash or at its close, and those leased to Redis
    clients, come over as pending); every failed request with its error, attempts and
    time; every seen fingerprint, done requests' included; each host's delay, block,
    budget and done count. A Redis crawl's delay, per-host limit and
    preference go with it to another Redis crawl, and its delay and per-host limit to a
    PostgreSQL crawl (and back; a job directory keeps none: the copy says what to pass to
    Frontier()).

    SRC is only read: a job directory without taking its lock (a crawl may be running on
    it; what it does meanwhile may be left out), a Redis crawl with scans and a PostgreSQL
    crawl page by page (stop its clients
    first for an exact copy).

    \b
    Example: diskfrontier copy crawls/shop redis://localhost:6379/0 --to-crawl shop
             diskfrontier copy redis://localhost:6379/0 crawls/shop-back --from-crawl shop
             diskfrontier copy redis://a:6379/0 redis://b:6379/0 --from-crawl shop --to-crawl shop2
             diskfrontier copy crawls/shop redis://node1:7000 --to-crawl shop --shards 3
             diskfrontier copy redis://localhost:6379/0 postgresql://crawler@db:5432/crawls --crawl shop
    """
    src_crawl = _copy_crawl_name("SRC", src, from_crawl, crawl, "--from-crawl")
    dst_crawl = _copy_crawl_name("DST", dst, to_crawl, crawl, "--to-crawl")
    if crawl is not None and src_crawl is None and dst_crawl is None:
        raise TargetUsageError("--crawl names a crawl in Redis or PostgreSQL, and SRC and DST are both job "
                               "directories")
    if src_crawl is None:
        require_jobdir(src)
    with progress_bar("copying") as progress, redis_call_errors():
        report = copy_crawl(src, dst, from_crawl=src_crawl, to_crawl=dst_crawl, progress=progress, shards=shards)
    if as_json:
        echo_json(report.as_dict())
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
