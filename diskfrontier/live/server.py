"""The HTTP side of ``diskfrontier serve`` (aiohttp): the page, its JSON, ``/metrics`` and the
control endpoints.

- ``GET /``: the dashboard (``static/index.html``, ``app.js``, ``style.css``: package data, no
  third-party code, nothing fetched from elsewhere);
- ``GET /api/stats``: ``Dashboard.payload()`` as JSON; ``?since=T`` sends only the history after
  ``T``, ``?refresh=1`` reads the crawl first;
- ``GET /api/hosts``: every host of the crawl, not only the busiest that a snapshot lists (at most
  ``MAX_HOSTS``, the busiest first), read from the crawl at each request;
- ``GET /api/log``: the last lines of the crawl's log file, with ``serve --log FILE`` (404 without);
- ``GET /metrics``: the Prometheus text of the latest snapshot (``live/metrics.py``);
- ``POST /api/pause``, ``/api/resume``, ``/api/host`` (``action`` block, unblock or delay),
  ``/api/push``: only with ``--allow-control``, and with its token in the ``X-Diskfrontier-Token``
  header; 403 otherwise. Only then is the body read: a JSON object of at most ``MAX_BODY`` bytes
  nesting at most ``MAX_BODY_DEPTH`` levels (413, 415 or 400 otherwise, as JSON). Each goes through
  ``control.apply_control``.

Every request first passes ``guard``: one whose Host is not a name of this server gets 421 (DNS
rebinding), a control request from another site's page or with a form body 403.

A background task refreshes the dashboard every interval; every read and every control action
runs in a thread, so a slow read never holds up a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import json
import secrets
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import hdrs, web

from ..core.errors import FrontierError
from ..files import boundedjson
from .control import MAX_SEEDS, ControlError, apply_control, available_actions
from .dashboard import Dashboard
from .guard import HostCheck, cross_site_refusal, media_type
from .logtail import tail_lines
from .metrics import registry_of
from .sources import json_safe

TOKEN_HEADER = "X-Diskfrontier-Token"  # noqa: S105 (the header's name, not a secret)
STATIC = {"app.js": "text/javascript", "style.css": "text/css", "favicon.svg": "image/svg+xml"}
MAX_BODY = 4 << 20
"""The longest body a control request may send (a push of ``MAX_SEEDS`` URLs of 400 bytes)."""
MAX_BODY_DEPTH = 4
"""How deep a control request's JSON may nest (its fields use 2 levels: ``{"urls": [...]}``)."""
MAX_HOSTS = 20_000
"""The most hosts ``/api/hosts`` sends (the busiest); it says how many there are."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""The methods that read; every other one is a control request."""
_DASHBOARD = web.AppKey("dashboard", Dashboard)
_SERVER = web.AppKey("server", object)


def static_file(name: str) -> bytes:
    """One of the page's files, from the package (``diskfrontier/live/static/``)."""
    return importlib.resources.files("diskfrontier.live").joinpath("static").joinpath(name).read_bytes()


class DashboardServer:
    """A dashboard served over HTTP: the aiohttp application, its refresh task and its controls."""

    def __init__(self, dashboard: Dashboard, *, target: str, crawl: str | None, token: str | None = None,
                 control: Callable[[str, str | None, str, dict[str, Any]], dict[str, Any]] = apply_control,
                 bind: str = "127.0.0.1", allowed_hosts: Iterable[str] = (), log: str | None = None) -> None:
        """``bind``: the address listened on; ``allowed_hosts``: more Host names to answer
        (``NAME`` or ``NAME:PORT``, as ``guard.HostCheck`` takes them); ``log``: a log file whose
        last lines the page shows."""
        self.dashboard = dashboard
        self.target = target
        self.crawl = crawl
        self.token = token
        dashboard.control = token is not None
        dashboard.actions = available_actions(target) if token is not None else []
        self.control = control
        self.log = log
        dashboard.log = log
        self.hosts = HostCheck(bind, allowed_hosts)
        self.registry = registry_of(dashboard.latest_snapshot)
        self._refreshing = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -------------------------------------------------------------- refreshing
    async def refresh(self) -> None:
        """Read the crawl now (one read at a time: a caller arriving during one waits for it)."""
        async with self._refreshing:
            await asyncio.to_thread(self.dashboard.refresh)

    async def _refresh_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if loop.time() >= self.dashboard.next_due:
                await self.refresh()
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.05, self.dashboard.next_due - loop.time()))

    async def _start(self, app: web.Application) -> None:
        self._task = asyncio.create_task(self._refresh_loop())

    async def _stop(self, app: web.Application) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await asyncio.to_thread(self.dashboard.source.close)

    # -------------------------------------------------------------- the application
    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY, middlewares=[_headers, self._guard])
        app[_DASHBOARD] = self.dashboard
        app[_SERVER] = self
        app.router.add_get("/", self.index)
        app.router.add_get("/static/{name}", self.static)
        app.router.add_get("/api/stats", self.stats)
        app.router.add_get("/api/hosts", self.hosts_all)
        app.router.add_get("/api/log", self.log_tail)
        app.router.add_get("/metrics", self.metrics)
        for verb in ("pause", "resume", "host", "push"):
            app.router.add_post(f"/api/{verb}", self._control_handler(verb))
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def index(self, request: web.Request) -> web.Response:
        return web.Response(body=static_file("index.html"), content_type="text/html", charset="utf-8")

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC:
            raise web.HTTPNotFound()
        return web.Response(body=static_file(name), content_type=STATIC[name],
                            charset=None if name.endswith(".svg") else "utf-8")

    async def stats(self, request: web.Request) -> web.Response:
        if request.query.get("refresh") in ("1", "true", "yes") or self.dashboard.reading is None:
            await self.refresh()
        since: float | None = None
        if "since" in request.query:
            try:
                since = float(request.query["since"])
            except ValueError:
                raise web.HTTPBadRequest(text="since= must be a time (seconds since 1970)") from None
        return _json(self.dashboard.payload(since))

    async def hosts_all(self, request: web.Request) -> web.Response:
        try:
            hosts = await asyncio.to_thread(self.dashboard.source.all_hosts)
        except Exception as exc:  # a FrontierError, an OSError, a Redis client's ConnectionError: said, as a refresh's
            return _error(503, f"could not read the crawl's hosts: {exc}")
        return _json(json_safe({"total": len(hosts), "hosts": hosts[:MAX_HOSTS]}))

    async def log_tail(self, request: web.Request) -> web.Response:
        if self.log is None:
            return _error(404, "no log: start serve with --log FILE to show the last lines of the crawl's log")
        try:
            lines, size = await asyncio.to_thread(tail_lines, self.log)
        except FrontierError as exc:
            return _error(503, str(exc))
        return _json({"path": self.log, "size": size, "lines": lines})

    async def metrics(self, request: web.Request) -> web.Response:
        if self.dashboard.reading is None:
            await self.refresh()
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    @web.middleware
    async def _guard(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
        """421 for a Host that is not a name of this server; 403 for a control request that may come
        from another site's page. Nothing of the request is read before."""
        hosts = request.headers.getall(hdrs.HOST, [])
        host = hosts[0] if len(hosts) == 1 else None
        sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
        local, port = (str(sockname[0]), int(sockname[1])) if isinstance(sockname, tuple) else (None, 0)
        if host is None or not self.hosts.allows(host, port, local):
            return web.Response(status=421, text=self.hosts.refusal(host, port))
        if request.method not in SAFE_METHODS:
            refused = cross_site_refusal(request.headers, host)
            if refused is not None:
                return _error(403, refused)
        return await handler(request)

    # -------------------------------------------------------------- control
    def _control_handler(self, verb: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            return await self.control_action(request, verb)

        return handler

    async def control_action(self, request: web.Request, verb: str) -> web.Response:
        if self.token is None:
            return _error(403, "control is off: start serve with --allow-control (it prints the token to use)")
        given = request.headers.get(TOKEN_HEADER)
        # "replace": a header of undecodable bytes is a wrong token, not an encoding error
        if given is None or not secrets.compare_digest(given.encode("utf-8", "replace"), self.token.encode()):
            return _error(403, f"give the control token that serve printed at start, in the {TOKEN_HEADER} header")
        try:
            args = await _arguments(request)
        except ControlError as exc:
            return _error(exc.status, str(exc))
        args.pop("token", None)  # sent by clients of earlier versions: the header is what counts
        if verb == "host":
            verb = str(args.get("action") or "")
            if verb not in ("block", "unblock", "delay"):
                return _error(400, "give action= block, unblock or delay")
        try:
            answer = await asyncio.to_thread(self.control, self.target, self.crawl, verb, args)
        except ControlError as exc:
            return _error(exc.status, str(exc))
        self.dashboard.next_due = 0.0  # show the change at once
        self._wake.set()
        return _json(answer)


async def _arguments(request: web.Request) -> dict[str, Any]:
    """The body's fields: a JSON object (an empty body: none), bounded in size and depth; else
    ``ControlError`` with 413 (too long), 415 (not JSON) or 400 (not a JSON object)."""
    too_long = ControlError(413, f"the body is longer than {MAX_BODY:,} bytes: send at most {MAX_SEEDS:,} URLs "
                                 f"a push, in several pushes")
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise too_long
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise too_long from None
    if not body.strip():
        return {}
    if media_type(request.headers.get(hdrs.CONTENT_TYPE, "")) != "application/json":
        raise ControlError(415, "send the fields as a JSON object, with Content-Type: application/json")
    try:
        data = boundedjson.loads(body, max_depth=MAX_BODY_DEPTH, max_bytes=MAX_BODY)
    except json.JSONDecodeError as exc:
        raise ControlError(400, f"the body is not JSON: {exc}") from None
    except ValueError as exc:
        raise ControlError(400, f"the body is refused: {exc}") from None
    if not isinstance(data, dict):
        raise ControlError(400, "the body must be a JSON object of the action's fields")
    return data


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(data, allow_nan=False), status=status, content_type="application/json")


def _error(status: int, message: str) -> web.Response:
    return _json({"ok": False, "error": message}, status)


@web.middleware
async def _headers(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                   ) -> web.StreamResponse:
    """No caching of live figures, and a page that loads nothing from elsewhere."""
    response = await handler(request)
    response.headers.setdefault("Cache-Control", "no-store")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    if response.content_type == "text/html":
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
            "connect-src 'self'; frame-ancestors 'none'")
    return response


async def run(server: DashboardServer, host: str, port: int, *, started: Callable[[str, int], None],
              stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set; ``started(host, port)`` once listening (``port`` 0: the one chosen)."""
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, reuse_address=True)
        await site.start()
        addresses = runner.addresses
        bound = int(addresses[0][1]) if addresses else port
        started(host, bound)
        await stop.wait()
    finally:
        await runner.cleanup()
