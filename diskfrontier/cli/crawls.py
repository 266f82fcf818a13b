"""Commands that manage the crawls of a Redis server: crawls (list them) and delete (one, whole)."""

from __future__ import annotations

import json

import click

from ..errors import FrontierError
from ..redisfrontier.connection import is_redis_url, shown_url
from ..redisfrontier.management import summaries
from ..targets import open_shared
from .support import JSON_OPTION, human_bytes, one_line_errors, redis_call_errors


def _redis_only(url: str) -> None:
    if not is_redis_url(url):
        raise click.BadParameter(f"{url} is not a Redis URL (redis://host:6379/0); a job directory is a folder: "
                                 f"inspect it, or remove the folder", param_hint="URL")


@click.command()
@click.argument("url")
@click.option("--no-memory", is_flag=True, help="Do not measure each crawl's memory (a SCAN of all its keys).")
@JSON_OPTION
@one_line_errors
def crawls(url: str, no_memory: bool, as_json: bool) -> None:
    """List the crawls on the Redis server at URL: pending, in flight, done, failed, seen, the clients
    holding leases, and the memory of their keys.

    Example: diskfrontier crawls redis://localhost:6379/0
    """
    _redis_only(url)
    with redis_call_errors():
        found = summaries(url, memory=not no_memory)
    if as_json:
        click.echo(json.dumps([crawl.to_dict() for crawl in found], indent=2))
        return
    if not found:
        click.echo(f"no crawls on {shown_url(url)}")
        return
    header = ("crawl", "pending", "in flight", "done", "failed", "seen", "clients", "memory")
    rows = [(c.name + (" (paused)" if c.paused else ""), f"{c.pending:,}", f"{c.in_flight:,}", f"{c.done:,}",
             f"{c.failed:,}", f"{c.seen:,}", f"{c.clients:,}", "-" if c.memory is None else human_bytes(c.memory))
            for c in found]
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        click.echo("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                             enumerate(zip(row, widths, strict=True))).rstrip())


@click.command()
@click.argument("url")
@click.option("--crawl", required=True, metavar="NAME", help="The crawl to delete.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@JSON_OPTION
@one_line_errors
def delete(url: str, crawl: str, yes: bool, as_json: bool) -> None:
    """Delete the crawl NAME from the Redis server at URL: every key of it (SCAN and UNLINK in batches,
    never KEYS), its requests, leases, seen set and hosts. Asks first, unless --yes.

    Example: diskfrontier delete redis://localhost:6379/0 --crawl old-news --yes
    """
    _redis_only(url)
    with redis_call_errors():
        frontier = open_shared(url, crawl, create=False)
    with frontier:
        pending = len(frontier)
        if not yes and not click.confirm(f"delete crawl {crawl!r} at {shown_url(url)} ({pending:,} pending)?"):
            raise FrontierError("nothing was deleted")
        deleted = frontier.drop_crawl()
    if as_json:
        click.echo(json.dumps({"crawl": crawl, "deleted_keys": deleted}))
    else:
        click.echo(f"deleted crawl {crawl!r}: {deleted:,} keys")
