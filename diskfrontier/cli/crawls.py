"""Commands that manage the crawls of a server (Redis or PostgreSQL): crawls (list them), clients (of one
crawl), release (give a client's leases back now) and delete (one crawl, whole)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from ..access.servers import crawl_clients, crawl_summaries, release_leases
from ..access.targets import backend_of, open_shared
from ..core.errors import FrontierError
from ..redisfrontier.connection import shown_url
from ..redisfrontier.management import ClientInfo
from .jsonout import echo_json
from .support import JSON_OPTION, check_crawl_option, human_bytes, one_line_errors, redis_call_errors

CRAWL = click.option("--crawl", required=True, metavar="NAME", callback=check_crawl_option, help="The crawl.")


def _redis_only(url: str) -> None:
    if backend_of(url) == "jobdir":
        raise click.BadParameter(f"{url} is not a Redis URL (redis://host:6379/0) or a PostgreSQL URL "
                                 f"(postgresql://user@host:5432/db); a job directory is a folder: inspect it, or "
                                 f"remove the folder", param_hint="URL")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` under ``header``, the first column to the left and the others to the right."""
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        click.echo("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                             enumerate(zip(row, widths, strict=True))).rstrip())


@click.command()
@click.argument("url")
@click.option("--no-memory", is_flag=True, help="Do not measure each crawl's memory (Redis: a SCAN of all its keys; "
                                                "PostgreSQL: the size of its tables).")
@JSON_OPTION
@one_line_errors
def crawls(url: str, no_memory: bool, as_json: bool) -> None:
    """List the crawls on the Redis server or in the PostgreSQL database at URL: pending, in flight, done,
    failed, seen, the live clients, and the memory of their keys (PostgreSQL: the disk their tables and
    indexes take).

    Example: diskfrontier crawls redis://localhost:6379/0
             diskfrontier crawls postgresql://crawler@db:5432/crawls
    """
    _redis_only(url)
    with redis_call_errors():
        found = crawl_summaries(url, memory=not no_memory)
    if as_json:
        echo_json([{**{k: v for k, v in crawl.to_dict().items() if k != "memory"}, "memory_bytes": crawl.memory}
                   for crawl in found])
        return
    if not found:
        click.echo(f"no crawls on {shown_url(url)}")
        return
    header = ("crawl", "pending", "in flight", "done", "failed", "seen", "clients",
              "disk" if backend_of(url) == "postgres" else "memory")
    rows = [(c.name + (" (paused)" if c.paused else ""), f"{c.pending:,}", f"{c.in_flight:,}", f"{c.done:,}",
             f"{c.failed:,}", f"{c.seen:,}", f"{c.clients:,}", "-" if c.memory is None else human_bytes(c.memory))
            for c in found]
    _table(header, rows)


@click.command()
@click.argument("url")
@CRAWL
@JSON_OPTION
@one_line_errors
def clients(url: str, crawl: str, as_json: bool) -> None:
    """List the clients of crawl NAME at URL: each one's id, host name, pid, when it was last seen,
    its lease, the leases it holds, and whether it is live: a running client says it is there with
    every lease renewal (every third of its lease), and is live while seen within two of them (one
    without renewal: within its lease).

    Example: diskfrontier clients redis://localhost:6379/0 --crawl news
             diskfrontier clients postgresql://crawler@db:5432/crawls --crawl news
    """
    _redis_only(url)
    with redis_call_errors():
        found = crawl_clients(url, crawl)
    if as_json:
        echo_json([_client_document(client) for client in found])
        return
    if not found:
        click.echo(f"no clients of crawl {crawl!r}")
        return
    header = ("client", "host", "pid", "last seen", "lease", "leases", "state")
    rows = [(c.client, c.host or "?", "?" if c.pid is None else str(c.pid),
             "?" if c.seen_ago is None else f"{c.seen_ago:.1f}s ago", "?" if c.lease is None else f"{c.lease:g}s",
             f"{c.leases:,}", "live" if c.live else "dead") for c in found]
    _table(header, rows)


def _client_document(client: ClientInfo) -> dict[str, Any]:
    """A client as ``clients --json`` gives it: instants as ``*_at``, durations as ``*_seconds``."""
    return {"client": client.client, "host": client.host, "pid": client.pid, "lease_seconds": client.lease,
            "started_at": client.started, "last_seen_at": client.last_seen,
            "since_seen_seconds": client.seen_ago, "leases": client.leases, "live": client.live}


@click.command()
@click.argument("url")
@CRAWL
@click.option("--client", "client", metavar="ID", default=None, help="Give back every lease of this client.")
@click.option("--expired", is_flag=True, help="Give back every lease that has run out (what a pop does lazily).")
@click.option("--force", is_flag=True, help="Release a client that is live (its done() calls then fail).")
@JSON_OPTION
@one_line_errors
def release(url: str, crawl: str, client: str | None, expired: bool, force: bool, as_json: bool) -> None:
    """Give leases of crawl NAME at URL back now: their requests are pending again at once, as when a
    lease runs out (counted in reclaimed). --client ID: every lease of that client (a worker that died
    or hangs; a live client is refused unless --force); --expired: every lease that has run out.

    Example: diskfrontier release redis://localhost:6379/0 --crawl news --client 3f9a1c0b2d4e-4242
             diskfrontier release postgresql://crawler@db:5432/crawls --crawl news --expired
    """
    _redis_only(url)
    if (client is None) == (not expired):
        raise click.UsageError("give --client ID or --expired (one of the two)")
    with redis_call_errors():
        done = release_leases(url, crawl, client=client, expired=expired, force=force)
    if done.was_live:
        click.echo(f"warning: client {client} was live: its done() of the {done.released:,} requests given back "
                   f"raises LeaseExpired, and other clients may fetch them again", err=True)
    if as_json:
        echo_json(done.to_dict())
    elif client is None:
        click.echo(f"released {_leases(done.released)} that had run out (pending again)")
    else:
        click.echo(f"released {_leases(done.released)} of client {client} (pending again)")


def _leases(count: int) -> str:
    return f"{count:,} lease{'s' * (count != 1)}"


@click.command()
@click.argument("url")
@CRAWL
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@JSON_OPTION
@one_line_errors
def delete(url: str, crawl: str, yes: bool, as_json: bool) -> None:
    """Delete the crawl NAME from the Redis server at URL: every key of it (SCAN and UNLINK in batches,
    never KEYS), its requests, leases, seen set and hosts. Asks first, unless --yes. In PostgreSQL:
    its schema (df_NAME), every table of it, at once.

    Example: diskfrontier delete redis://localhost:6379/0 --crawl old-news --yes
             diskfrontier delete postgresql://crawler@db:5432/crawls --crawl old-news --yes
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
        echo_json({"crawl": crawl, "deleted_keys": deleted})
    elif backend_of(url) == "postgres":
        click.echo(f"deleted crawl {crawl!r}: its schema and {deleted:,} tables and sequences")
    else:
        click.echo(f"deleted crawl {crawl!r}: {deleted:,} keys")
