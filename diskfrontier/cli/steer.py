"""Commands that steer a crawl, running or not: pause, resume, drop; and how every writing command
reaches a job directory that a crawl holds (its inbox)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import click

from ..contract.checks import check_drop
from ..contract.protocol import FrontierProtocol
from ..core.errors import FrontierError, JobDirLocked
from ..jobdir.delivery import deliver
from .jsonout import echo_json
from .options import EXISTING_JOBDIR, SECONDS
from .support import (
    CRAWL_OPTION,
    JSON_OPTION,
    one_line_errors,
    open_crawl,
    redis_call_errors,
    redis_crawl,
    require_jobdir,
)

WAIT_OPTIONS = [
    click.option("--no-wait", is_flag=True, help="With a crawl holding JOBDIR: return once the command is queued."),
    click.option("--timeout", type=SECONDS, default=30.0, show_default=True,
                 help="With a crawl holding JOBDIR: seconds to wait for it to apply the command."),
]


def wait_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--no-wait`` and ``--timeout``, for a command that may reach a running crawl."""
    for option in reversed(WAIT_OPTIONS):
        func = option(func)
    return func


def run_command(target: str, crawl: str | None, verb: str, args: dict[str, Any],
                direct: Callable[[FrontierProtocol], dict[str, Any]], *, no_wait: bool,
                timeout: float) -> dict[str, Any] | None:
    """Apply a command: directly (a Redis or PostgreSQL crawl, or a job directory nobody holds), or through the
    inbox of the crawl that holds the job directory. Its summary; None with ``no_wait`` (queued)."""
    if crawl is None:
        require_jobdir(target)
    try:
        with open_crawl(target, crawl) as frontier, redis_call_errors():
            return direct(frontier)
    except JobDirLocked as exc:
        held = exc
    started = time.monotonic()
    ident, answer = deliver(target, verb, args, wait=not no_wait, timeout=timeout)
    if answer is None:
        holder = f"pid {held.pid}" if held.pid else "another process"
        click.echo(f"queued command {ident} for the crawl holding {target} ({holder}); it is applied within a "
                   f"second while that crawl runs", err=True)
        return None
    if "error" in answer:
        raise FrontierError(f"the crawl holding {target} refused command {ident}: {answer['error']}")
    click.echo(f"applied by the crawl holding {target} in {time.monotonic() - started:.2f}s", err=True)
    return answer


def state_command(func: Callable[..., Any]) -> click.Command:
    """A command of JOBDIR (or a Redis or PostgreSQL crawl) with no options of its own but --no-wait, --timeout
    and --json."""
    for decorator in (one_line_errors, JSON_OPTION, wait_options, CRAWL_OPTION, EXISTING_JOBDIR):
        func = decorator(func)
    return click.command()(func)


@state_command
def pause(jobdir: str, crawl: str | None, no_wait: bool, timeout: float, as_json: bool) -> None:
    """Hand out nothing from JOBDIR until resume: running crawls idle, requests in flight finish.

    The pause is kept with the crawl (it holds across restarts). Works while a crawl runs.

    \b
    Example: diskfrontier pause crawls/shop
    """
    name = redis_crawl(jobdir, crawl)

    def direct(frontier: FrontierProtocol) -> dict[str, Any]:
        was = frontier.paused_since
        frontier.pause()
        return {"paused_since": frontier.paused_since, "changed": was is None}

    def said(result: dict[str, Any]) -> str:
        since = result.get("paused_since")
        moment = "" if since is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))
        return f"paused since {moment}" if moment else "paused"

    _state_change(jobdir, name, "pause", direct, said, no_wait=no_wait, timeout=timeout, as_json=as_json)


@state_command
def resume(jobdir: str, crawl: str | None, no_wait: bool, timeout: float, as_json: bool) -> None:
    """End a pause of JOBDIR: requests are handed out again. Works while a crawl runs.

    Example: diskfrontier resume crawls/shop
    """
    name = redis_crawl(jobdir, crawl)

    def direct(frontier: FrontierProtocol) -> dict[str, Any]:
        was = frontier.paused_since
        frontier.resume()
        return {"resumed": was is not None, "paused_since": None}

    def said(result: dict[str, Any]) -> str:
        return "resumed" if result.get("resumed") else "not paused: nothing to resume"

    _state_change(jobdir, name, "resume", direct, said, no_wait=no_wait, timeout=timeout, as_json=as_json)


def _state_change(target: str, crawl: str | None, verb: str, direct: Callable[[FrontierProtocol], dict[str, Any]],
                  said: Callable[[dict[str, Any]], str], *, no_wait: bool, timeout: float, as_json: bool) -> None:
    """Run a command without arguments and print its result (``said``, or JSON); nothing once only queued."""
    result = run_command(target, crawl, verb, {}, direct, no_wait=no_wait, timeout=timeout)
    if result is None:
        return
    if not as_json:
        click.echo(said(result))
        return
    since = result.get("paused_since")
    changed = result.get("changed") if verb == "pause" else result.get("resumed")
    echo_json({"command": verb, "paused": since is not None, "paused_at": since,
               "changed": changed if isinstance(changed, bool) else None, **_applied(result)})


def _applied(result: dict[str, Any]) -> dict[str, Any]:
    """How a command was applied: directly (``via`` ``direct``) or by the crawl holding the job directory
    (``inbox``: the command's id, when that crawl applied it, its pid)."""
    if "id" not in result:
        return {"via": "direct", "command_id": None, "applied_at": None, "applied_by": None}
    return {"via": "inbox", "command_id": result["id"], "applied_at": result.get("applied"),
            "applied_by": result.get("by")}


@click.command()
@EXISTING_JOBDIR
@CRAWL_OPTION
@click.option("--host", "host", default=None, help="Drop the pending requests of this host (its slot).")
@click.option("--match", default=None, help="Drop the pending requests whose URL this regular expression finds.")
@click.option("--dry-run", is_flag=True, help="List and count them; drop nothing.")
@click.option("--show", type=click.IntRange(min=0), default=None,
              help="URLs to list (default: 20 with --dry-run, else 0).")
@wait_options
@JSON_OPTION
@one_line_errors
def drop(jobdir: str, crawl: str | None, host: str | None, match: str | None, dry_run: bool, show: int | None,
         no_wait: bool, timeout: float, as_json: bool) -> None:
    """Remove pending requests of JOBDIR by host or by URL; they are never fetched and stay seen.

    Requests in flight and failed ones are left alone. Works while a crawl runs.

    \b
    Example: diskfrontier drop crawls/shop --host ads.example --dry-run
             diskfrontier drop crawls/shop --match '/calendar/\\d{4}/'
    """
    name = redis_crawl(jobdir, crawl)
    if (host is None) == (match is None):
        raise click.UsageError("give exactly one of --host and --match")
    count = (20 if dry_run else 0) if show is None else show
    args: dict[str, Any] = {"dry_run": dry_run, "show": count}
    args.update({"host": host} if host is not None else {"match": match})
    try:
        check_drop(host, match, count)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--host' / '--match'") from None

    def direct(frontier: FrontierProtocol) -> dict[str, Any]:
        dropped = frontier.drop(host=host, match=match, dry_run=dry_run, show=count)
        return {"dropped": dropped.count, "urls": dropped.urls, "dry_run": dry_run}

    result = run_command(jobdir, name, "drop", args, direct, no_wait=no_wait, timeout=timeout)
    if result is None:
        return
    n = result.get("dropped", 0)
    if as_json:
        echo_json({"command": "drop", "dry_run": dry_run, "dropped": 0 if dry_run else n,
                   "would_drop": n if dry_run else None, "urls": result.get("urls", []), **_applied(result)})
        return
    for url in result.get("urls", []):
        click.echo(url)
    shown = len(result.get("urls", []))
    more = f" ({n - shown:,} more not listed)" if dry_run and n > shown else ""
    noun = "pending request" if n == 1 else "pending requests"
    click.echo(f"{'would drop' if dry_run else 'dropped'} {n:,} {noun}{more}", err=bool(result.get("urls")))
    sys.stdout.flush()
