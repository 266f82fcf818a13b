"""The demo command: a crawl of a synthetic site with crawl()."""

from __future__ import annotations

import sys

import click

from ..run.demo import run_demo
from .jsonout import echo_json
from .options import JOBDIR
from .support import (
    EXIT_INTERRUPTED,
    FILES_ONLY_CRAWL_OPTION,
    JSON_OPTION,
    one_line_errors,
    progress_bar,
    redis_crawl,
    refuse_redis,
    require_jobdir,
)


@click.command()
@JOBDIR
@FILES_ONLY_CRAWL_OPTION
@click.option("--pages", type=click.IntRange(min=1), default=300, show_default=True,
              help="Pages of the synthetic site.")
@click.option("--workers", type=click.IntRange(min=1), default=8, show_default=True, help="Worker threads.")
@click.option("--duration", "--for", "seconds", type=click.FloatRange(min=0), default=None,
              help="Stop each run cleanly after this many seconds.")
@click.option("--every", type=click.FloatRange(min=0), default=None, help="Start a run every this many seconds.")
@click.option("--times", type=click.IntRange(min=1), default=1, show_default=True, help="How many runs.")
@click.option("--progress-every", type=click.FloatRange(min=0.1), default=5.0, show_default=True,
              help="Seconds between the progress lines written when stderr is not a terminal.")
@JSON_OPTION
@one_line_errors
def demo(jobdir: str, crawl: str | None, pages: int, workers: int, seconds: float | None, every: float | None,
         times: int, progress_every: float, as_json: bool) -> None:
    """Crawl a synthetic site into JOBDIR with crawl(); run again to resume.

    JOBDIR is a job directory, or a missing or empty folder (made one, as push does).

    The site is served on 127.0.0.2 to 127.0.0.5 (half the pages on the first), so
    politeness shows (diskfrontier hosts JOBDIR); a few pages answer 503 the first time,
    so retries show. On a terminal a bar shows the pages crawled; elsewhere (a log, a
    pipe) a plain line every --progress-every seconds (none with --json). Ctrl-C finishes the pages in hand
    and stops (exit code 130; a second Ctrl-C stops at once); --duration stops each run
    cleanly; kill -9 is survived too.
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
                          on_page=None if progress is None else lambda done, _pending: progress(done, pages),
                          progress=False if progress is not None or as_json else None,
                          progress_every=progress_every)
    if as_json:
        echo_json(result.__dict__)
    else:
        runs = f" in {result.runs} runs" if result.runs > 1 else ""
        click.echo(f"{result.stopped_by}: fetched {result.fetched:,} pages{runs} in {result.seconds:.1f}s "
                   f"({result.retried:,} retries, {result.failed:,} failed, {result.failed_at_once:,} of them at "
                   f"once: broken links); {result.pending:,} pending, "
                   f"{result.seen:,} seen. Inspect it: diskfrontier inspect {jobdir}")
    if result.stopped_by == "interrupted":
        sys.exit(EXIT_INTERRUPTED)
