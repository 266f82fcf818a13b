"""The serve command: a crawl's dashboard, JSON and Prometheus metrics over HTTP."""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from ..core.errors import FrontierError
from ..live.guard import split_host
from .jsonout import echo_json
from .support import CRAWL_OPTION, JobDirOrRedis, one_line_errors, redis_call_errors, redis_crawl, require_jobdir

INSTALL_HINT = "pip install 'diskfrontier[serve]'"


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only: ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _allowed_hosts(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        try:
            split_host(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return values


def _url(host: str, port: int) -> str:
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}/"


@contextmanager
def _stop_on_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> Iterator[None]:
    """Ctrl-C and SIGTERM stop the server cleanly; the previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved: dict[signal.Signals, Any] = {}

    def handler(signum: int, frame: object) -> None:
        loop.call_soon_threadsafe(stop.set)

    for signum in (signal.SIGINT, signal.SIGTERM):
        saved[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, previous in saved.items():
            signal.signal(signum, previous)


@click.command()
@click.argument("target", metavar="TARGET", type=JobDirOrRedis(exists=True))
@CRAWL_OPTION
@click.option("--listen", "--host", "host", metavar="ADDRESS", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0: every interface); the page is read-only unless --allow-control. "
                   "--host is its older name, kept working.")
@click.option("--port", type=click.IntRange(0, 65535), default=8470, show_default=True,
              help="Port to listen on (0: any free one, printed at start).")
@click.option("--allowed-host", "allowed_hosts", metavar="NAME[:PORT]", multiple=True, callback=_allowed_hosts,
              help="Also answer requests for this name (a LAN name, a proxy's; repeatable). Requests for another "
                   "name than 127.0.0.1, localhost, [::1] and the --listen address get 421.")
@click.option("--allow-control", is_flag=True,
              help="Let the page pause and resume the crawl, block, unblock and delay hosts and push seeds, "
                   "with a random token printed at start.")
@click.option("--log", "log", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="A log file of the crawl whose last lines the page shows (read again at each refresh; anyone "
                   "who can open the page can read them).")
@click.option("--interval", type=click.FloatRange(min=0.2, max=3600), default=2.0, show_default=True,
              help="Seconds between reads of the crawl.")
@click.option("--history", type=click.FloatRange(min=10, max=7 * 86400), default=3600.0, show_default=True,
              help="Seconds of history the charts keep (in this process).")
@click.option("--json", "as_json", is_flag=True,
              help="Print where it listens (URL, address, port, token) as one JSON document at start.")
@one_line_errors
def serve(target: str, crawl: str | None, host: str, port: int, allowed_hosts: tuple[str, ...],
          allow_control: bool, log: str | None, interval: float, history: float, as_json: bool) -> None:
    """Serve a live dashboard of TARGET (a job directory, or a Redis or PostgreSQL URL with --crawl) over HTTP.

    The page (/) shows pending, in flight, done, failed and the done rate as charts, the
    busiest hosts, the latest failures, when the next request is ready and whether the
    crawl runs; /api/stats gives the same as JSON, /metrics as Prometheus text. Read-only
    unless --allow-control. Only requests addressed to one of this server's names are
    answered (against DNS rebinding; --allowed-host adds names), and control only from its
    own page or a script. Any address may be listened on (--listen 0.0.0.0 shares a read-only
    page on a LAN); control, when asked for, needs its token from every address. A job
    directory that a crawl holds is read from the status.json its holder publishes, else
    from its files, again only when they change.

    \b
    Example: diskfrontier serve crawls/shop
             diskfrontier serve redis://localhost:6379/0 --crawl news --port 9000
             diskfrontier serve postgresql://crawler@db:5432/crawls --crawl news
             diskfrontier serve crawls/shop --listen 0.0.0.0 --allow-control --allowed-host crawler.lan
    """
    name = redis_crawl(target, crawl)
    if name is None:
        require_jobdir(target)
    try:
        from ..live.server import DashboardServer, run
    except ImportError as exc:
        raise FrontierError(f"serve needs aiohttp ({exc}): {INSTALL_HINT}") from None
    from ..live.dashboard import Dashboard
    from ..live.sources import open_source

    with redis_call_errors():
        source = open_source(target, name)
    token = secrets.token_urlsafe(24) if allow_control else None
    dashboard = Dashboard(source, interval=interval, keep=history)
    server = DashboardServer(dashboard, target=target, crawl=name, token=token, bind=host,
                             allowed_hosts=allowed_hosts, log=log)

    def started(bound_host: str, bound_port: int) -> None:
        url = _url(bound_host, bound_port)
        if as_json:
            echo_json({"source": source.name, "url": url, "listen": bound_host, "port": bound_port,
                       "token": token, "control": token is not None})
            sys.stdout.flush()
            return
        click.echo(f"serving {source.name} at {url} (Ctrl-C stops)")
        if token is None:
            shared = "" if is_loopback(bound_host) else ", to every machine that reaches this address"
            click.echo(f"read-only{shared}: control is off (--allow-control turns it on, with a token)")
        else:
            click.echo(f"control token: {token}")
            click.echo(f"  open {url}#token={token} to use it from the page, or send it as X-Diskfrontier-Token")
        sys.stdout.flush()

    async def main() -> None:
        stop = asyncio.Event()
        with _stop_on_signals(asyncio.get_running_loop(), stop):
            await run(server, host, port, started=started, stop=stop)

    try:
        asyncio.run(main())
    finally:
        source.close()
    if not as_json:
        click.echo("stopped")
