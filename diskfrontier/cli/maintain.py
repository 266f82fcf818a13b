"""Commands that look after a crawl's storage: verify, compact, adopt-scrapy."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager

import click

from ..access.checking import Verified, verify_target
from ..jobdir.frontier import Frontier
from ..jobdir.maintenance.compaction import Compacted
from ..jobdir.replay import Progress
from ..redisfrontier.connection import shown_url
from ..transfer.adopt import adopt_scrapy
from .jsonout import echo_json
from .options import EXISTING_JOBDIR
from .support import (
    CRAWL_OPTION,
    FILES_ONLY_CRAWL_OPTION,
    JSON_OPTION,
    one_line_errors,
    progress_bar,
    redis_crawl,
    refuse_redis,
    require_jobdir,
)


def compact_jobdir(path: str | os.PathLike[str],
                   progress: Callable[[], AbstractContextManager[Progress | None]] = contextlib.nullcontext,
                   ) -> tuple[Compacted, int]:
    """Open the job directory at ``path`` (locked), compact it and close it.

    ``progress()`` is entered once the directory is open, and gives the compaction's progress
    callback (or None). Returns what the compaction did, and how many requests are pending.
    """
    with Frontier(path) as frontier, progress() as report:
        return frontier.compact(report), len(frontier)


@click.command(name="verify")
@EXISTING_JOBDIR
@CRAWL_OPTION
@click.option("--repair", is_flag=True, help="Rewrite damaged files keeping every intact record (Redis: rebuild "
                                             "the crawl's indexes from its stored requests; PostgreSQL: set its "
                                             "counts and orders again from its rows).")
@JSON_OPTION
@one_line_errors
def verify_command(jobdir: str, crawl: str | None, repair: bool, as_json: bool) -> None:
    """Check every record of every file; exit 1 if damage is found.

    A Redis crawl (a URL and --crawl): check its queues, leases, hosts and counters against
    its stored requests (best with its clients stopped); --repair rebuilds them from the stored
    requests (stop the crawl's clients first) and sets aside, in the crawl's 'bad' hash, what
    cannot be decoded.

    A PostgreSQL crawl: check each host's counts and best request, each request's rank, every
    stored record and the failed counter against its rows, in one read-only snapshot; --repair
    sets the counts, ranks and counter again from the rows (in one transaction that holds the
    clients' writes meanwhile: stop them first) and names what the rows cannot tell (a record
    that does not decode, a row whose host is gone), which it leaves in place.

    Example: diskfrontier verify crawls/shop --repair
             diskfrontier verify redis://localhost:6379/0 --crawl news --repair
             diskfrontier verify postgresql://crawler@db:5432/crawls --crawl news --repair
    """
    name = redis_crawl(jobdir, crawl)
    if name is None:
        require_jobdir(jobdir)
        with progress_bar("verifying") as progress:
            report = verify_target(jobdir, repair=repair, progress=progress)
    else:
        report = verify_target(jobdir, name, repair=repair)
    if as_json:
        echo_json(report.to_dict())
    else:
        _echo_report(report.findings, report.notes, report.sound, report.repaired, *_verdicts(report))
    sys.exit(0 if report.sound else 1)


def _verdicts(report: Verified) -> tuple[str, str]:
    """The lines ``verify`` ends with when the crawl is sound, and when it was repaired."""
    if report.backend == "jobdir":
        return (f"sound: {report.checked:,} journal records checked",
                f"repaired: kept every intact record, dropped {report.dropped_bytes or 0:,} damaged bytes; "
                f"the queues are rebuilt at the next open")
    if report.backend == "redis":
        aside = f"; set aside: {', '.join(report.set_aside)}" if report.set_aside else ""
        return (f"sound: {report.checked:,} stored requests checked",
                f"repaired: rebuilt the indexes and counts of crawl {report.crawl!r} from its "
                f"{report.kept or 0:,} stored requests{aside}")
    left = sum(1 for note in report.notes if note.startswith("not repaired"))
    rest = f"; {left:,} problem{'s' * (left != 1)} left (see the notes)" if left else ""
    return (f"sound: {report.checked:,} rows of crawl {report.crawl!r} at {shown_url(report.target)} checked",
            f"repaired: set the counts, ranks and counters of crawl {report.crawl!r} again from its "
            f"{report.checked:,} rows{rest}")


def _echo_report(findings: Iterable[object], notes: Iterable[str], sound: bool, repaired: bool, sound_line: str,
                 repaired_line: str) -> None:
    """What verify found, as text: each finding and note, then the verdict."""
    for finding in findings:
        click.echo(f"damaged: {finding}")
    for note in notes:
        click.echo(f"note: {note}")
    if sound:
        click.echo(sound_line)
    elif repaired:
        click.echo(repaired_line)


@click.command()
@EXISTING_JOBDIR
@FILES_ONLY_CRAWL_OPTION
@JSON_OPTION
@one_line_errors
def compact(jobdir: str, crawl: str | None, as_json: bool) -> None:
    """Rewrite the journal and queues to hold only what is pending (atomic).

    A job directory only: a Redis or PostgreSQL crawl keeps no journal (a done request's keys or row
    are deleted at once).

    Example: diskfrontier compact crawls/shop
    """
    refuse_redis(jobdir, "compact rewrites the journal of a job directory, and a Redis crawl has none (it deletes "
                         "a done request's keys at once)",
                 "compact rewrites the journal of a job directory, and a PostgreSQL crawl has none (it deletes a "
                 "done request's row at once, and the server's vacuum reclaims its space)")
    redis_crawl(jobdir, crawl)
    require_jobdir(jobdir)
    result, pending = compact_jobdir(jobdir, lambda: progress_bar("compacting"))
    if as_json:
        echo_json({"bytes_before": result.bytes_before, "bytes_after": result.bytes_after,
                   "pending": pending, "dropped_records": result.dropped_records})
    else:
        click.echo(f"journal: {result.bytes_before:,} -> {result.bytes_after:,} bytes; "
                   f"{pending:,} pending kept, {result.dropped_records:,} finished records dropped")


@click.command(name="adopt-scrapy")
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
        echo_json(report.__dict__)
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
