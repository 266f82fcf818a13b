"""``DISKFRONTIER_METRICS_PORT``: the scheduler's frontier as Prometheus ``/metrics``, served from the crawl.

The same metric families as ``diskfrontier serve`` (``live.metrics``), read from the open
frontier at each scrape, on prometheus_client's own HTTP server in a thread of the crawl
process, bound to ``DISKFRONTIER_METRICS_HOST`` (127.0.0.1 by default).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from prometheus_client import start_http_server

from ..contract.protocol import FrontierProtocol
from ..contract.snapshot import snapshot
from ..core.errors import FrontierError
from ..live.metrics import TOP_HOSTS, registry_of

logger = logging.getLogger(__name__)


class MetricsServer:
    """``/metrics`` of ``frontier`` on ``host:port`` (port 0: a free one, ``self.port`` tells which), with series
    of their own for the ``top_hosts`` busiest hosts."""

    def __init__(self, frontier: FrontierProtocol, port: int, host: str = "127.0.0.1", *, source: str = "",
                 top_hosts: int = TOP_HOSTS) -> None:
        self.frontier = frontier
        self.source = source
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=registry_of(self.read, top_hosts))
        except OSError as exc:
            raise FrontierError(f"DISKFRONTIER_METRICS_PORT: cannot serve /metrics on {host}:{port} ({exc}); "
                                f"choose another port, or 0 for a free one") from None
        self.host, self.port = host, int(self._server.server_port)
        logger.info("Prometheus metrics of the frontier on http://%s:%d/metrics", host, self.port)

    def read(self) -> dict[str, Any] | None:
        """The frontier's snapshot now (None once it is closed)."""
        frontier = self.frontier
        try:
            return snapshot(frontier.stats(), frontier.hosts(), [], frontier.next_ready(), source=self.source,
                            now=time.time())
        except FrontierError:
            return None

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
