"""The scheduler's options: Scrapy's settings, or what the constructor was given, checked.

Every ``DISKFRONTIER_*`` setting is an option of the same name in lower case (see
``scheduler.py``); one given to the constructor wins over the setting. A few follow from
Scrapy's own scheduler settings, as Scrapy's scheduler reads them:

* the order within a priority: FIFO if the queue class Scrapy's scheduler would use is a FIFO
  queue (``SCHEDULER_DISK_QUEUE`` with ``JOBDIR``, ``SCHEDULER_MEMORY_QUEUE`` without; a crawl
  in Redis is stored, so the disk queue's), else LIFO; ``DISKFRONTIER_ORDER`` overrides it;
* the hand-out rule: ``"idle"`` when ``SCHEDULER_PRIORITY_QUEUE`` is Scrapy's
  ``DownloaderAwarePriorityQueue`` (its default), else ``"priority"``;
  ``DISKFRONTIER_PREFER`` overrides it;
* ``DUPEFILTER_DEBUG``: every duplicate is logged.

``per_ip_refusal`` says why a crawl cannot start with ``CONCURRENT_REQUESTS_PER_IP``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .revisits import revisit_policy

START_POLICIES = ("dedupe", "skip", "keep")
DAPQ = "scrapy.pqueues.DownloaderAwarePriorityQueue"


@dataclass
class Options:
    """The options of one scheduler, checked by ``check``."""

    order: str | None = None  # None: the queue classes decide (default_order)
    default_order: str = "lifo"
    fsync: bool = False
    start_requests: str = "dedupe"
    debug_duplicates: bool = False
    prefer: str = "idle"
    per_slot: int | None = None
    retry: bool = True
    url: str | None = None
    crawl: str | None = None
    lease: float = 30.0
    prefetch: int = 16
    poll: float = 1.0
    push_batch: int = 500
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    metrics_hosts: int = 10  # DISKFRONTIER_METRICS_HOSTS: the busiest hosts with series of their own
    done_after_items: bool = True
    items_flush: float = 1.0
    shards: int | None = None
    wait_replicas: int = 0
    revisit: Any = None  # DISKFRONTIER_REVISIT: a dict of diskfrontier.Revisit's options (revisits.py)

    def check(self) -> Options:
        """Raise ``ValueError`` naming the setting of the first option that is not valid; return self."""
        if self.start_requests not in START_POLICIES:
            raise ValueError(
                f"DISKFRONTIER_START_REQUESTS must be one of {', '.join(map(repr, START_POLICIES))}, "
                f"got {self.start_requests!r}")
        if self.order not in (None, "lifo", "fifo"):
            raise ValueError(f"DISKFRONTIER_ORDER must be 'lifo' or 'fifo', got {self.order!r}")
        if self.default_order not in ("lifo", "fifo"):
            raise ValueError(f"default_order must be 'lifo' or 'fifo', got {self.default_order!r}")
        if self.prefer not in ("idle", "priority"):
            raise ValueError(f"DISKFRONTIER_PREFER must be 'idle' or 'priority', got {self.prefer!r}")
        _whole("DISKFRONTIER_PER_SLOT", self.per_slot, 1, none=True)
        if self.shards is not None:
            _whole("DISKFRONTIER_SHARDS", self.shards, 1, 1024)
        _whole("DISKFRONTIER_WAIT_REPLICAS", self.wait_replicas, 0)
        _whole("DISKFRONTIER_PREFETCH", self.prefetch, 1)
        if isinstance(self.poll, bool) or not isinstance(self.poll, (int, float)) or not 0 < self.poll < float("inf"):
            raise ValueError(f"DISKFRONTIER_POLL must be a number of seconds above 0, got {self.poll!r}")
        self.poll = float(self.poll)
        _whole("DISKFRONTIER_PUSH_BATCH", self.push_batch, 1)
        if self.metrics_port is not None:
            _whole("DISKFRONTIER_METRICS_PORT", self.metrics_port, 0, 65535, what="a port number")
        _whole("DISKFRONTIER_METRICS_HOSTS", self.metrics_hosts, 0, 1000)
        flush = self.items_flush
        if isinstance(flush, bool) or not isinstance(flush, (int, float)) or not 0 <= flush < 3600:
            raise ValueError(f"DISKFRONTIER_ITEMS_FLUSH must be a number of seconds from 0 to 3600, got {flush!r}")
        self.items_flush = float(flush)
        self.revisit = revisit_policy(self.revisit)
        return self


NAMES = frozenset(field.name for field in fields(Options))


def _whole(setting: str, value: Any, low: int, high: int | None = None, *, none: bool = False,
           what: str = "a whole number") -> None:
    if none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise ValueError(f"{setting} must be {what} {bounds}, got {value!r}")


def class_name(value: Any) -> str:
    """The dotted name of a class given as a class or as its dotted path (a setting holds either)."""
    if isinstance(value, str):
        return value
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)


def is_fifo(queue: Any) -> bool:
    """True if the queue class ``queue`` (a class or a dotted path) is a FIFO queue."""
    if isinstance(queue, type):
        from queuelib.queue import FifoDiskQueue, FifoMemoryQueue, FifoSQLiteQueue

        if issubclass(queue, (FifoDiskQueue, FifoMemoryQueue, FifoSQLiteQueue)):
            return True
    return "fifo" in class_name(queue).rpartition(".")[2].lower()


def is_downloader_aware(pqclass: Any) -> bool:
    """True if the priority queue class ``pqclass`` is Scrapy's ``DownloaderAwarePriorityQueue`` (or a subclass)."""
    if class_name(pqclass) == DAPQ:
        return True
    if isinstance(pqclass, type):
        from scrapy.pqueues import DownloaderAwarePriorityQueue

        return issubclass(pqclass, DownloaderAwarePriorityQueue)
    return False


def from_settings(settings: Any) -> dict[str, Any]:
    """The ``DISKFRONTIER_*`` options that ``settings`` (Scrapy's) set, each under its option name."""
    options: dict[str, Any] = {
        "order": settings.get("DISKFRONTIER_ORDER"),
        "fsync": settings.getbool("DISKFRONTIER_FSYNC"),
        "start_requests": settings.get("DISKFRONTIER_START_REQUESTS", "dedupe"),
        "debug_duplicates": settings.getbool("DUPEFILTER_DEBUG"),
        "retry": settings.getbool("DISKFRONTIER_RETRY", True),
        "url": settings.get("DISKFRONTIER_URL") or None,
        "crawl": settings.get("DISKFRONTIER_CRAWL") or None,
        "lease": settings.getfloat("DISKFRONTIER_LEASE", 30.0),
        "prefetch": settings.getint("DISKFRONTIER_PREFETCH", 16),
        "poll": settings.getfloat("DISKFRONTIER_POLL", 1.0),
        "push_batch": settings.getint("DISKFRONTIER_PUSH_BATCH", 500),
        "metrics_port": _port(settings.get("DISKFRONTIER_METRICS_PORT")),
        "metrics_host": settings.get("DISKFRONTIER_METRICS_HOST") or "127.0.0.1",
        "metrics_hosts": settings.getint("DISKFRONTIER_METRICS_HOSTS", 10),
        "done_after_items": settings.getbool("DISKFRONTIER_DONE_AFTER_ITEMS", True),
        "items_flush": settings.getfloat("DISKFRONTIER_ITEMS_FLUSH", 1.0),
        "wait_replicas": settings.getint("DISKFRONTIER_WAIT_REPLICAS", 0),
        "revisit": _plain(settings.get("DISKFRONTIER_REVISIT")),
    }
    if settings.get("DISKFRONTIER_PREFER"):
        options["prefer"] = settings.get("DISKFRONTIER_PREFER")
    if settings.get("DISKFRONTIER_PER_SLOT") not in (None, ""):
        options["per_slot"] = settings.getint("DISKFRONTIER_PER_SLOT")
    if settings.get("DISKFRONTIER_SHARDS") not in (None, ""):
        options["shards"] = settings.getint("DISKFRONTIER_SHARDS")
    return options


def resolve(settings: Any, given: dict[str, Any], *, jobdir: str | None, dqclass: Any, mqclass: Any,
            pqclass: Any) -> Options:
    """The options of a scheduler: ``settings``, overridden by ``given`` (those not None), with the
    order and the hand-out rule that the queue classes give unless an option sets them; checked."""
    unknown = set(given) - NAMES
    if unknown:
        raise TypeError(f"unknown scheduler options {sorted(unknown)}; the options are {sorted(NAMES)}")
    values = {**from_settings(settings), **{name: value for name, value in given.items() if value is not None}}
    persisted = bool(jobdir) or bool(values.get("url"))
    queue = dqclass if persisted else mqclass
    values.setdefault("default_order", "fifo" if queue is not None and is_fifo(queue) else "lifo")
    values.setdefault("prefer", "idle" if pqclass is None or is_downloader_aware(pqclass) else "priority")
    return Options(**values).check()


def per_ip_refusal(settings: Any, options: Options) -> str | None:
    """Why the crawl cannot start with ``CONCURRENT_REQUESTS_PER_IP`` set, or None if it can.

    Scrapy's ``DownloaderAwarePriorityQueue`` refuses the setting at open, as its slots are
    keyed by host and the downloader's by IP; the ``"idle"`` rule here balances over the same
    host slots, so it refuses it too. ``"priority"`` balances nothing, and takes it.
    """
    if options.prefer != "idle" or not settings.getint("CONCURRENT_REQUESTS_PER_IP"):
        return None
    return ("diskfrontier.scrapy.Scheduler does not support CONCURRENT_REQUESTS_PER_IP with DISKFRONTIER_PREFER "
            "= 'idle' (the default with Scrapy's DownloaderAwarePriorityQueue, which refuses it too): it balances "
            "requests over download slots keyed by host, and the downloader would key them by IP; set "
            "CONCURRENT_REQUESTS_PER_IP = 0 (Scrapy deprecates it: use CONCURRENT_REQUESTS_PER_DOMAIN), or "
            "DISKFRONTIER_PREFER = 'priority'")


def _plain(value: Any) -> Any:
    """A setting's value as plain Python (Scrapy may hold a dict setting as its own ``BaseSettings``)."""
    to_dict = getattr(value, "copy_to_dict", None)
    return to_dict() if callable(to_dict) else value


def _port(value: Any) -> int | None:
    """``DISKFRONTIER_METRICS_PORT`` as a setting gives it (a number or a string); None when unset."""
    if value in (None, ""):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"DISKFRONTIER_METRICS_PORT must be a port number from 0 to 65535, got {value!r}") from None
