"""``diskfrontier.scrapy.Scheduler``: Scrapy's scheduler over a crash-safe Frontier in ``JOBDIR``.

Settings::

    SCHEDULER = "diskfrontier.scrapy.Scheduler"
    JOBDIR = "crawls/shop"                      # the job directory (a temporary one if unset)
    DISKFRONTIER_ORDER = "lifo"                 # or "fifo"; default: "fifo" if the queue class Scrapy's
                                                # scheduler would use is a FIFO queue (SCHEDULER_DISK_QUEUE
                                                # with JOBDIR or DISKFRONTIER_URL, SCHEDULER_MEMORY_QUEUE
                                                # without), else "lifo" (Scrapy's default)
    DISKFRONTIER_FSYNC = False                  # True: every enqueue also survives a power cut
    DISKFRONTIER_START_REQUESTS = "dedupe"      # start requests when a crawl resumes (see below)
    DISKFRONTIER_PREFER = "idle"                # "idle": the download slot with the fewest requests
                                                # in flight first (Scrapy's DownloaderAwarePriorityQueue
                                                # rule, the default when SCHEDULER_PRIORITY_QUEUE is
                                                # that class); "priority": highest priority first
    DISKFRONTIER_PER_SLOT = None                # at most this many requests of a slot in flight
    DISKFRONTIER_RETRY = True                   # retries of RetryMiddleware go through Frontier.retry
    DISKFRONTIER_URL = None                     # "redis://host:6379/0": the crawl lives in Redis, shared
                                                # by every process that names the same crawl (JOBDIR unused);
                                                # "postgresql://user@host:5432/db": in PostgreSQL, likewise
    DISKFRONTIER_CRAWL = None                   # the crawl's name in Redis or PostgreSQL (default: the
                                                # spider's name)
    DISKFRONTIER_LEASE = 30                     # seconds a process holds a request before others take it
                                                # back (renewed while Scrapy works on it)
    DISKFRONTIER_PREFETCH = 16                  # on Redis: requests leased per round trip, and finished
                                                # requests acknowledged together (at most this many, or
                                                # after a second)
    DISKFRONTIER_POLL = 1.0                     # on Redis: seconds between looks for work while this
                                                # process has none (other processes may push)
    DISKFRONTIER_SHARDS = None                  # on Redis: a crawl made here gets this many shards (its
                                                # hosts spread over the masters of a Redis Cluster); fixed
                                                # when it is made (a Redis Cluster is found by its URL)
    DISKFRONTIER_WAIT_REPLICAS = 0              # on Redis: each step waits until this many replicas have it
    DISKFRONTIER_PUSH_BATCH = 500               # on Redis: enqueued requests stored together, in one
                                                # script call (1: each as it is enqueued)
    DISKFRONTIER_METRICS_PORT = None            # a port: Prometheus /metrics of the frontier, served by
                                                # the crawl (0: a free port, logged); off by default
    DISKFRONTIER_METRICS_HOST = "127.0.0.1"     # the address /metrics is served on
    DISKFRONTIER_DONE_AFTER_ITEMS = True        # a request is done only once its items are on disk in
                                                # the local feed files (False: as soon as the engine
                                                # has finished with it, as before)
    DISKFRONTIER_ITEMS_FLUSH = 1.0              # seconds between syncs (flush + fsync) of the feed files

Each request is queued under its download slot (``download_slot`` in its meta, else its
host name, as Scrapy's downloader keys its slots); the downloader still enforces
``DOWNLOAD_DELAY`` and its concurrency limits. A retry made by Scrapy's
``RetryMiddleware`` (a copy of a request in progress, with ``retry_times`` one higher)
replaces the original in one journal record (``Frontier.retry``) instead of being a new
request beside it. When nothing is ready, the scheduler wakes the engine at the time the next
request becomes ready (Scrapy's engine would otherwise look again only on its 5-second
heartbeat). ``diskfrontier.scrapy.RetryAfterMiddleware`` blocks a slot for the
time a 429 or 503 response's ``Retry-After`` asks.

Requests are stored as Scrapy's own request dict (``Request.to_dict``) in msgpack, never
pickle. Meta and cb_kwargs may hold what Scrapy's pickled JOBDIR keeps and users put there:
datetimes, dates, times, timedeltas, ``Decimal``, ``UUID``, ints beyond 64 bits (extension
types of the request record, ``request/values.py``) and ``scrapy.Item`` values, stored as
their fields and class path and rebuilt only from an Item class already imported
(``itemvalues.py``). A request that cannot be stored (a callback that is not a spider
method, a value of another type) is kept in memory for this run, counted in
``scheduler/unserializable`` and ``diskfrontier/unstorable/<type>``, and logged once for each
type (``unstorable.py``); without JOBDIR, as with Scrapy, nothing of this is reported.

Stats have Scrapy's names: ``scheduler/enqueued/disk`` and ``scheduler/dequeued/disk`` for
stored requests (with JOBDIR or on Redis), ``.../memory`` for the others, and for every request
without JOBDIR. ``CONCURRENT_REQUESTS_PER_IP`` stops the crawl at open under the ``"idle"``
rule, as Scrapy's ``DownloaderAwarePriorityQueue`` refuses it (``options.per_ip_refusal``).

Duplicates are filtered with the crawler's ``request_fingerprinter`` (so
``REQUEST_FINGERPRINTER_CLASS`` is honoured) against the job directory's seen index;
``DUPEFILTER_CLASS`` is not used. ``dont_filter`` is honoured.

A request is marked done once the engine has finished with its response or failure (see
``completion.py``) and, when the crawl has feed exports, once the items it produced are on
disk: the local feed files are flushed and fsynced at most once per
``DISKFRONTIER_ITEMS_FLUSH`` seconds, and the requests finished before the sync are marked
done together (``itemsafe.py``, ``feeds.py``). Killed at any moment, a crawl resumes with
every request that was not done, and fetches again only what was in progress or waiting for
a sync: an item may be written twice, never be missing.

On Redis, enqueued requests are stored in batches (``pushbuffer.py``): ``enqueue_request``
returns True at once, and a duplicate is logged, counted (``dupefilter/filtered``) and
signalled (``request_dropped``) when its batch is stored. A request is marked done only once
every request it produced is stored, so a kill loses none: the parent of a request that was
still buffered is fetched again, and yields it again.

On PostgreSQL (``DISKFRONTIER_URL = "postgresql://..."``) the scheduler works as on Redis: what is said
of Redis here holds for it, but for ``DISKFRONTIER_PREFER = "idle"``, ``DISKFRONTIER_SHARDS`` and
``DISKFRONTIER_WAIT_REPLICAS``, which it refuses (it hands out the best request of a ready host).

On Redis (``DISKFRONTIER_URL``) any number of ``scrapy crawl`` processes share one crawl:
one seen set, one queue per slot, leases instead of in-flight records. A process killed
at any moment loses nothing: its requests come back to the others when their leases run
out. A process keeps its spider open while any process of the crawl holds requests (they
may yield more), and closes it once the crawl is finished.

Start requests on resume (Scrapy issues them again, with ``dont_filter=True`` by
default, scrapy#4509): ``"dedupe"`` queues only those never seen before (on the first
run they are queued as usual, and remembered); ``"skip"`` drops every start request of a
resumed crawl; ``"keep"`` does what Scrapy does, queueing them all again.
"""

from __future__ import annotations

import collections
import logging
import os
import shutil
import tempfile
import time
import weakref
from typing import Any

from scrapy import Request as ScrapyRequest
from scrapy import Spider, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.crawler import Crawler
from scrapy.utils.job import job_dir
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.request import RequestFingerprinter
from scrapy.utils.request import fingerprint as scrapy_fingerprint

from ..access.targets import backend_name, open_local, open_shared
from ..contract.outcomes import Outcome
from ..contract.protocol import FrontierProtocol, LocalFrontierProtocol, SharedFrontierProtocol
from ..core.errors import FrontierError
from ..jobdir.layout import Layout
from ..redisfrontier import LeaseExpired
from ..request.codec import Unencodable, encode_request
from ..request.fingerprint import request_fingerprint
from ..request.model import Request, check_slot, host_of
from ..scrapyfiles.adopted import has_note, remove_note
from ..scrapyfiles.records import frontier_request, route_priority
from .completion import Completion, engine_in_progress
from .itemsafe import ItemsGate, open_gate
from .itemvalues import store_items
from .metrics import MetricsServer
from .options import DAPQ, per_ip_refusal, resolve
from .outcomes import OutcomeBatch, response_outcome
from .pushbuffer import PushBuffer, Waiting
from .refusal import refuse_to_start
from .revisits import Revisits
from .serialize import RequestDicts
from .unstorable import Unstorable
from .wake import EngineWake

logger = logging.getLogger("diskfrontier.scrapy")

_LIVE = "__diskfrontier_live_request__"  # meta key of a memory-only request: the Scrapy request itself
STATS_EVERY = 1000  # counters reach Scrapy's stats collector in batches (and at close)
# stats counted together: one count adds to each name
_ENQUEUED_DISK = ("scheduler/enqueued/disk", "scheduler/enqueued")
_ENQUEUED_MEMORY = ("scheduler/enqueued/memory", "scheduler/enqueued")
_DEQUEUED_DISK = ("scheduler/dequeued/disk", "scheduler/dequeued")
_DEQUEUED_MEMORY = ("scheduler/dequeued/memory", "scheduler/dequeued")
_SCHEDULERS: weakref.WeakKeyDictionary[Any, Scheduler] = weakref.WeakKeyDictionary()  # crawler -> its scheduler
PUSH_PIECE = 500  # buffered requests stored per script call


def scheduler_for(crawler: Any) -> Scheduler | None:
    """The diskfrontier scheduler of ``crawler``, if it has one (for middlewares)."""
    return _SCHEDULERS.get(crawler)


def slot_of(request: ScrapyRequest) -> str:
    """The download slot key Scrapy's downloader gives ``request``: its ``download_slot``, else its host."""
    slot = request.meta.get("download_slot")
    if isinstance(slot, str):
        try:
            return check_slot(slot, "download_slot") or ""
        except ValueError:
            pass
    return host_of(request.url)


def default_fingerprint(request: ScrapyRequest) -> bytes:
    """Scrapy's default fingerprint, byte for byte, with diskfrontier's faster canonical URL.

    ``request/canonical.py`` is checked against w3lib's ``canonicalize_url`` (and this function
    against Scrapy's ``RequestFingerprinter``) by property tests; ``verbatim_url``
    requests are left to Scrapy.
    """
    if request.meta.get("verbatim_url"):
        return scrapy_fingerprint(request)
    return request_fingerprint(request.method, request.url, request.body)


def _late(crawler: Any, name: str) -> Any:
    """``crawler.<name>``, or None while it is not set (Scrapy 2.14+ raises ``RuntimeError`` until then)."""
    try:
        return getattr(crawler, name, None)
    except RuntimeError:
        return None


def fingerprint_function(crawler: Any) -> Any:
    """The crawler's fingerprinter; the faster equal one when it is Scrapy's default.

    A crawler not configured yet (no ``request_fingerprinter``) gets the one its
    ``REQUEST_FINGERPRINTER_CLASS`` names, built as Scrapy builds it.
    """
    fingerprinter = _late(crawler, "request_fingerprinter")
    if fingerprinter is None:
        fingerprinter = build_from_crawler(load_object(crawler.settings["REQUEST_FINGERPRINTER_CLASS"]), crawler)
    if type(fingerprinter) is RequestFingerprinter:
        return default_fingerprint
    return fingerprinter.fingerprint


class Scheduler(BaseScheduler):
    """A drop-in Scrapy scheduler whose queue, dupefilter and progress survive ``kill -9``.

    Built as Scrapy builds its own (``from_crawler``), or with the arguments of Scrapy's
    ``Scheduler.__init__``, so that code that builds or subclasses Scrapy's scheduler builds
    this one: ``jobdir`` is the job directory (None: a temporary one); ``dqclass`` and
    ``mqclass`` (classes or dotted paths) give the order, FIFO if the one Scrapy would use is
    a FIFO queue; ``pqclass`` gives the hand-out rule (``"idle"`` for Scrapy's
    ``DownloaderAwarePriorityQueue``); ``logunser`` adds a traceback to the log of a request
    that cannot be stored; ``stats`` is the stats collector counted in (the crawler's by
    default); ``crawler`` is required. ``dupefilter`` is kept as ``df`` and never used:
    duplicates are filtered by the job directory's seen index (a dupefilter of Scrapy's
    would write its own ``requests.seen`` into the job directory). The ``DISKFRONTIER_*``
    settings may be given as keyword options of the same name in lower case.
    """

    def __init__(
        self,
        dupefilter: Any = None,
        jobdir: str | None = None,
        dqclass: Any = None,
        mqclass: Any = None,
        logunser: bool = False,
        stats: Any = None,
        pqclass: Any = None,
        crawler: Any = None,
        **options: Any,
    ) -> None:
        if crawler is None:
            first = "; its first argument is a dupefilter, as for Scrapy's" if isinstance(dupefilter, Crawler) else ""
            raise TypeError(f"diskfrontier.scrapy.Scheduler needs the crawler: build it with "
                            f"Scheduler.from_crawler(crawler), or pass crawler=crawler{first}")
        opts = resolve(crawler.settings, options, jobdir=jobdir, dqclass=dqclass, mqclass=mqclass, pqclass=pqclass)
        self.crawler = crawler
        self.df = dupefilter  # Scrapy's attribute names, for code written against Scrapy's scheduler
        self.dqclass, self.mqclass, self.pqclass, self.logunser = dqclass, mqclass, pqclass, logunser
        self.stats = stats if stats is not None else _late(crawler, "stats")
        if self.stats is None:
            raise TypeError("diskfrontier.scrapy.Scheduler needs a stats collector: pass stats=, or a crawler whose "
                            "stats are set (Scrapy sets them when the crawler is configured)")
        self.jobdir = jobdir
        self.options = opts
        self.order, self.default_order, self.fsync = opts.order, opts.default_order, opts.fsync
        self.start_policy, self.debug_duplicates = opts.start_requests, opts.debug_duplicates
        self.prefer, self.per_slot, self.retry_in_frontier = opts.prefer, opts.per_slot, opts.retry
        self.frontier: FrontierProtocol | None = None  # the job directory's, or a crawl in Redis with DISKFRONTIER_URL
        self._local: LocalFrontierProtocol | None = None  # the frontier, when it is the job directory's
        self._shared: SharedFrontierProtocol | None = None  # the frontier, when it is shared in Redis
        self.url, self.crawl_name, self.lease = opts.url, opts.crawl, opts.lease
        self.shards, self.wait_replicas = opts.shards, opts.wait_replicas
        self._memory: list[ScrapyRequest] = []  # on Redis: requests that cannot be stored, this run only
        self._extended_at = 0.0
        self.prefetch, self.poll, self.push_batch = opts.prefetch, opts.poll, opts.push_batch
        self._pushes: PushBuffer | None = None  # on Redis with push_batch > 1: requests waiting to be stored
        self.metrics_port, self.metrics_host = opts.metrics_port, opts.metrics_host
        self.metrics_hosts = opts.metrics_hosts
        self.done_after_items, self.items_flush = opts.done_after_items, opts.items_flush
        self._gate = ItemsGate(None, self.items_flush, self._sync_failed)  # the crawl's own one at open
        self.metrics: MetricsServer | None = None
        self._wake = EngineWake(crawler)
        self._prefetched: collections.deque[Request] = collections.deque()  # leased, not yet handed out
        self._unacked: list[Request] = []  # finished by the engine, done() not sent yet
        self._acked_at = 0.0
        self._fingerprint = fingerprint_function(crawler)
        self._counts: dict[str | tuple[str, ...], int] = {}
        self._uncounted = 0
        self._completion = Completion(crawler)
        self._revisits = Revisits(opts.revisit) if opts.revisit is not None else None
        self._temporary: str | None = None
        # Scrapy's names: requests that outlive the process are "disk", the others (no JOBDIR) "memory"
        stored = bool(jobdir) or bool(self.url)
        self._enqueued = _ENQUEUED_DISK if stored else _ENQUEUED_MEMORY
        self._dequeued = _DEQUEUED_DISK if stored else _DEQUEUED_MEMORY
        self._unstorable: Unstorable | None = None  # at open: with a JOBDIR or on Redis
        self._items_refused: set[str] = set()
        self._resumed = False
        self._logged_duplicate = False
        self._logged_sync_failure = False
        self._logged_adopted = False
        self._adopted = False  # the first run after adopt-scrapy: Scrapy issued the start requests
        self._outcomes = OutcomeBatch()  # what each download came to, for the frontier's stats

    @classmethod
    def from_crawler(cls, crawler: Any) -> Scheduler:
        """Build the scheduler from the crawler's settings, as Scrapy builds its own (no dupefilter is built)."""
        settings = crawler.settings
        return cls(
            dupefilter=None,
            jobdir=job_dir(settings),
            dqclass=settings.get("SCHEDULER_DISK_QUEUE"),
            mqclass=settings.get("SCHEDULER_MEMORY_QUEUE"),
            logunser=settings.getbool("SCHEDULER_DEBUG"),
            stats=_late(crawler, "stats"),
            pqclass=settings.get("SCHEDULER_PRIORITY_QUEUE", DAPQ),
            crawler=crawler,
        )

    # ------------------------------------------------------------------ open / close
    def open(self, spider: Spider) -> None:
        """Open (or create, or recover) the frontier in JOBDIR (or the crawl in Redis).

        A job directory that cannot be opened (Scrapy's own queue in it, another crawl holding it,
        damage), or ``CONCURRENT_REQUESTS_PER_IP`` with the ``"idle"`` rule (``options.per_ip_refusal``),
        stops the crawl with the error's message and exit status 1, without tracebacks.
        """
        refusal = per_ip_refusal(self.crawler.settings, self.options)
        if refusal is not None:  # Scrapy's DownloaderAwarePriorityQueue refuses it at open too
            refuse_to_start(self.crawler, spider, refusal, "CONCURRENT_REQUESTS_PER_IP")
            return
        try:
            self._open_frontier(spider)
        except FrontierError as exc:
            refuse_to_start(self.crawler, spider, exc)
            return
        self.crawler.signals.connect(self._response_received, signal=signals.response_received)
        self._gate = open_gate(self.crawler, self.done_after_items, self.items_flush, self._resumed, spider,
                               self._sync_failed)
        if self.metrics_port is not None:
            assert self.frontier is not None
            try:
                self.metrics = MetricsServer(self.frontier, self.metrics_port, self.metrics_host,
                                             source=self.url or self.jobdir or "", top_hosts=self.metrics_hosts)
            except BaseException:
                self.frontier.close()
                raise

    def _open_frontier(self, spider: Spider) -> None:
        self.spider = spider
        self._dicts = RequestDicts(spider, self._item_refused)
        if self.jobdir or self.url:  # without JOBDIR nothing is kept after the crawl: as Scrapy, nothing to report
            self._unstorable = Unstorable(self._count, spider, self.logunser)
        if self.url is not None:
            self._open_redis(spider)
            return
        path = self.jobdir
        if not path:
            path = self._temporary = tempfile.mkdtemp(prefix="diskfrontier-")
            logger.info("no JOBDIR set: the frontier lives in %s until the spider closes", path,
                        extra={"spider": spider})
        existed = os.path.exists(Layout(path).meta)
        # An existing directory keeps its order; only an explicit DISKFRONTIER_ORDER is checked against it.
        order = self.order if existed else self.order or self.default_order
        self.frontier = self._local = open_local(path, order=order, fsync=self.fsync, prefer=self.prefer,
                                                 per_host=self.per_slot)
        _SCHEDULERS[self.crawler] = self
        stats = self.frontier.stats()
        self._resumed = existed or stats["seen"] > 0
        self._adopted = self._resumed and has_note(path)
        if stats["recovered"]:
            self.stats.set_value("diskfrontier/recovered", stats["recovered"])
        if len(self.frontier):
            logger.info("Resuming crawl (%d requests scheduled)", len(self.frontier), extra={"spider": spider})
        if engine_in_progress(self.crawler) is None:
            logger.warning(
                "cannot see the Scrapy engine's requests in progress: requests are marked done only when the "
                "spider closes, so after a crash every request of this run is fetched again",
                extra={"spider": spider})

    def _open_redis(self, spider: Spider) -> None:
        crawl = self.crawl_name or spider.name
        self.frontier = self._shared = open_shared(self.url or "", crawl, lease=self.lease, order=self.order,
                                                   new_order=self.default_order, prefer=self.prefer,
                                                   per_host=self.per_slot, shards=self.shards,
                                                   wait_replicas=self.wait_replicas)
        _SCHEDULERS[self.crawler] = self
        if self.push_batch > 1:
            self._pushes = PushBuffer(self.push_batch)
        stats = self.frontier.stats()
        self._resumed = stats["seen"] > 0
        logger.info("crawl %r in %s: %d pending, %d leased by its processes, %d done", crawl,
                    backend_name(self.url or ""), stats["pending"], stats["in_flight"], stats["done"],
                    extra={"spider": spider})

    def close(self, reason: str) -> None:
        """Mark what the engine finished, checkpoint, and release JOBDIR."""
        if self.frontier is None:
            return
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None
        self._mark_finished(force=True)
        self._wake.cancel()  # after: a sync that failed just now asked for a wake-up
        self.crawler.signals.disconnect(self._response_received, signal=signals.response_received)
        self._outcomes.flush(self.frontier)
        if self._shared is not None:
            self._store_buffered()
            self._acknowledge(force=True)
            self.frontier.close()  # leases of what the engine did not finish, and prefetched, are given back
            self._flush_counts()
            return
        if self._adopted and self.jobdir:
            remove_note(self.jobdir)  # the first run after adoption is over: start requests are deduplicated as usual
        self.frontier.close()
        self._flush_counts()
        stats = self.frontier.stats()
        for counter in ("requeued", "memory_lost"):
            if stats[counter]:
                self.stats.set_value(f"diskfrontier/{counter}", stats[counter])
        self.stats.set_value("diskfrontier/pending", stats["pending"])
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)

    # ------------------------------------------------------------------ the scheduler interface
    def has_pending_requests(self) -> bool:
        """True while requests are waiting (those the engine is handling not counted)."""
        self._mark_finished()
        if self._shared is not None:  # other processes' requests in progress may yield more
            if self._memory or self._prefetched:
                return True
            self._store_buffered()
            self._acknowledge(force=True)
            return not self._shared.finished
        return len(self) > 0

    def __len__(self) -> int:
        if self.frontier is None:  # not open, or refused to open (the spider is being closed)
            return 0
        buffered = len(self._pushes) if self._pushes is not None else 0
        return len(self.frontier) + len(self._memory) + len(self._prefetched) + buffered

    def enqueue_request(self, request: ScrapyRequest) -> bool:
        """Store ``request``; False if it is a duplicate (or a start request not wanted again).

        On Redis with ``DISKFRONTIER_PUSH_BATCH`` above 1 the request is buffered and True returned:
        a duplicate is reported when the buffer is stored (logged, counted, ``request_dropped`` sent).
        """
        frontier = self.frontier
        assert frontier is not None, "the scheduler is not open"
        if self.retry_in_frontier and "retry_times" in request.meta and self._retry(request):
            return True
        fingerprint = self._fingerprint(request)
        dont_filter = request.dont_filter
        again = False  # a buffered request queued even if it turns out to be seen
        if self._is_start_request(request):
            if self._resumed and self.start_policy == "skip":
                self._count("diskfrontier/start_requests_skipped")
                return False
            if self._adopted and self.start_policy == "dedupe" and not frontier.has_seen(fingerprint):
                self._skip_adopted_start(request, fingerprint)
                return False
            if self.start_policy != "keep" and self._pushes is not None:
                # as below, without a round trip: pushed with the filter, and again without if it was seen
                again, dont_filter = dont_filter and not self._resumed, False
            elif self.start_policy != "keep":
                # remembered on the first run, filtered on a resumed one
                dont_filter = dont_filter and not self._resumed and frontier.has_seen(fingerprint)
        try:  # the push dedupes: a duplicate costs this encoding, every request one dedupe fewer
            stored = self._dicts.to_stored(request, fingerprint, dont_filter=dont_filter, slot=slot_of(request))
            record = self._encode(stored)
        except (ValueError, TypeError, Unencodable) as exc:
            if not dont_filter and frontier.has_seen(fingerprint):
                self._log_duplicate(request)
                return False
            self._keep_in_memory(request, fingerprint, dont_filter, exc)
            return True
        if self._pushes is not None:
            if not self._pushes:
                self._wake.at(time.time() + self._pushes.interval)  # the engine calls in: stored by then
            if self._pushes.add(Waiting(request, stored, record, again)) or self._pushes.due():
                self._store_buffered()
            return True
        if not frontier.push_record(stored, record):
            self._log_duplicate(request)
            return False
        self._count(self._enqueued)
        return True

    def next_request(self) -> ScrapyRequest | None:
        """The next request to download (highest priority first), or None."""
        frontier = self.frontier
        assert frontier is not None, "the scheduler is not open"
        self._mark_finished()
        if self._memory:
            self._count(_DEQUEUED_MEMORY)
            return self._memory.pop()
        if self._shared is not None:
            if self._pushes is not None and self._pushes.due():
                self._store_buffered()
            self._renew_leases()
        while (stored := self._pop()) is not None:
            request = stored.meta.get(_LIVE)
            if request is None:
                request = self._rebuild(stored)
                if request is None:
                    continue
                self._count(self._dequeued)
            else:
                self._count(_DEQUEUED_MEMORY)
            self._completion.handed_out(request, stored)
            return request
        self._wake_when_ready()
        return None

    def block_slot(self, slot: str, until: float) -> None:
        """Hand out no request of download slot ``slot`` before ``until`` (a ``time.time()`` value)."""
        if self.frontier is not None:
            self.frontier.block(slot, until)
            self._count("diskfrontier/blocked")

    def _retry(self, request: ScrapyRequest) -> bool:
        """Give the original of a RetryMiddleware copy back to the frontier as this copy; False if
        ``request`` is not such a copy (it is then enqueued as a new request)."""
        found = self._completion.take_retry(request)
        if found is None:
            return False
        original, stored = found
        if self._revisits is not None:
            self._revisits.forget(stored)
        assert self.frontier is not None
        try:
            copy = frontier_request(self._dicts.to_dict(request), stored.fingerprint, dont_filter=stored.dont_filter)
            self._encode(copy)  # Items stored as their fields; what cannot be stored is enqueued as a new request
            stored.meta, stored.priority, stored.body = copy.meta, copy.priority, copy.body
            self.frontier.retry(stored)
        except (ValueError, TypeError, Unencodable, FrontierError) as exc:
            self._completion.put_back(original, stored)
            logger.debug("retry of %s enqueued as a new request (%s)", request, exc, extra={"spider": self.spider})
            return False
        self._count("diskfrontier/retried")
        self._count(self._enqueued)
        self._outcomes.add(self.frontier, Outcome(retried=True, failure="retry"))
        return True

    # ------------------------------------------------------------------ helpers
    def _count(self, name: str | tuple[str, ...], n: int = 1) -> None:
        """Add to a Scrapy stat (or to each of a tuple of them); they are handed to the stats
        collector in batches (it is slow)."""
        self._counts[name] = self._counts.get(name, 0) + n
        self._uncounted += 1
        if self._uncounted >= STATS_EVERY:
            self._flush_counts()

    def _flush_counts(self) -> None:
        for key, n in self._counts.items():
            for name in (key,) if isinstance(key, str) else key:
                self.stats.inc_value(name, n)
        self._counts.clear()
        self._uncounted = 0

    def _pop(self) -> Request | None:
        """The next stored request: on Redis from a batch leased in one round trip."""
        if self._shared is None:
            assert self.frontier is not None
            return self.frontier.pop()
        if not self._prefetched:
            self._store_buffered()  # this process's own new requests are among those to lease
            self._prefetched.extend(self._shared.pop_many(self.prefetch))
        return self._prefetched.popleft() if self._prefetched else None

    def _wake_when_ready(self) -> None:
        """Nothing can be handed out now: have the engine ask again when the next request is ready
        (on Redis, also every ``DISKFRONTIER_POLL`` seconds: other processes may push)."""
        if self._shared is None:
            assert self.frontier is not None
            when = self.frontier.next_ready()
            if when is not None:
                self._wake.at(when)
            return
        when = self._shared.next_event_seen()  # seen by the pop that just came back empty
        soonest = time.time() + self.poll
        self._wake.at(soonest if when is None else min(when, soonest))

    def _mark_finished(self, force: bool = False) -> None:
        """Mark done what the engine has finished and whose items are safe (``force``: sync now)."""
        if self._gate.feeds is None and self._revisits is None and self._local is not None:
            # nothing to wait for and nothing to add: the usual local crawl marks what is finished done now
            finished = self._completion.finished()
            if finished:
                self._local.done_many(finished)
                self._count("diskfrontier/done", len(finished))
            return
        self._gate.add(self._completion.finished())
        released = self._gate.release(force)
        if not released:
            if self._unacked:
                self._acknowledge()
            if (due := self._gate.due_in()) is not None:
                self._wake.at(time.time() + due)
            return
        assert self.frontier is not None
        if self._revisits is not None:
            released = self._finish_revisits(released)
        if self._shared is not None:
            self._unacked += released
            self._acknowledge()
            return
        self.frontier.done_many(released)
        self._count("diskfrontier/done", len(released))

    def _finish_revisits(self, released: list[Request]) -> list[Request]:
        """Finish the released requests to revisit with their next visit scheduled; return the others."""
        assert self._revisits is not None and self.frontier is not None
        plain, again = self._revisits.split(released)
        if again:
            self._store_buffered()  # what they produced is stored before they are finished
        for stored in again:
            assert stored.revisit is not None
            try:
                self.frontier.done(stored, refetch_after=stored.revisit.interval)
            except LeaseExpired as exc:
                self._count("diskfrontier/lease_lost")
                logger.warning("%s", exc, extra={"spider": self.spider})
        self._count("diskfrontier/done", len(again))
        self._count("diskfrontier/revisits_scheduled", len(again))
        for name, n in self._revisits.counts.items():
            self._count(f"diskfrontier/{name}", n)
        self._revisits.counts.clear()
        return plain

    def _response_received(self, response: Any, request: ScrapyRequest, spider: Spider) -> None:
        """A response downloaded: its status, size and download time go to the frontier's outcome counters."""
        outcome = response_outcome(request, response)
        if outcome is not None and self.frontier is not None:
            self._outcomes.add(self.frontier, outcome)

    def stored_of(self, request: ScrapyRequest) -> Request | None:
        """The frontier request a request handed out was made from, while the engine has it (else None)."""
        return self._completion.stored_of(request)

    def note_response(self, request: ScrapyRequest, response: Any) -> None:
        """A response to a request handed out, for its page's next visit (``RevisitMiddleware``)."""
        if self._revisits is not None and (stored := self._completion.stored_of(request)) is not None:
            self._revisits.note(stored, request, response)

    def _sync_failed(self, exc: OSError) -> None:
        """The feed files could not be synced: their requests stay not done (fetched again after a stop)."""
        self._count("diskfrontier/items_sync_failed")
        if not self._logged_sync_failure:
            self._logged_sync_failure = True
            logger.error("cannot write the feed files to disk (%s); the requests whose items they hold are not "
                         "marked done until a later sync works, and are fetched again if the crawl stops first",
                         exc, extra={"spider": self.spider})

    def _acknowledge(self, force: bool = False) -> None:
        """On Redis: send the dones of finished requests, ``prefetch`` at a time or a second apart."""
        now = time.monotonic()
        if not self._unacked or (not force and len(self._unacked) < self.prefetch and now - self._acked_at < 1.0):
            return
        self._store_buffered()  # what these requests produced is stored before they are done
        batch, self._unacked, self._acked_at = self._unacked, [], now
        assert self.frontier is not None
        try:
            self.frontier.done_many(batch)
        except LeaseExpired as exc:
            self._count("diskfrontier/lease_lost")
            logger.warning("%s", exc, extra={"spider": self.spider})
        self._count("diskfrontier/done", len(batch))

    def _store_buffered(self) -> None:
        """Store the buffered requests (one script call a piece); report the duplicates among them.

        A piece leaves the buffer only once stored: if Redis fails, the requests stay buffered and
        the error goes to the caller (their parents are not marked done meanwhile)."""
        pushes, shared = self._pushes, self._shared
        if not pushes or shared is None:
            return
        while piece := pushes.first(PUSH_PIECE):
            answers = shared.push_each([waiting.stored for waiting in piece], [waiting.record for waiting in piece])
            seen_starts = [waiting for waiting, queued in zip(piece, answers, strict=True)
                           if not queued and waiting.again]
            if seen_starts:
                self._push_again(seen_starts)
            pushes.forget(len(piece))
            queued = 0
            for waiting, answer in zip(piece, answers, strict=True):
                if answer or waiting.again:
                    queued += 1
                else:
                    self._log_duplicate(waiting.request)
                    self.crawler.signals.send_catch_log(signal=signals.request_dropped, request=waiting.request,
                                                        spider=self.spider)
            self._count(self._enqueued, queued)

    def _push_again(self, starts: list[Waiting]) -> None:
        """Queue first-run start requests with ``dont_filter`` whose fingerprints were seen: Scrapy
        queues them again, as the one-at-a-time path does."""
        assert self._shared is not None
        stored = [self._dicts.to_stored(waiting.request, waiting.stored.fingerprint, dont_filter=True,
                                        slot=waiting.stored.slot) for waiting in starts]
        self._shared.push_each(stored, [self._encode(request) for request in stored])

    def _renew_leases(self) -> None:
        """Renew the leases of the requests Scrapy is working on, a third of a lease apart."""
        now = time.monotonic()
        if now - self._extended_at < self.lease / 3:
            return
        self._extended_at = now
        held = self._completion.held() + self._gate.waiting() + list(self._prefetched) + self._unacked
        if held and self._shared is not None:
            lost = self._shared.extend_many(held)
            if lost:
                self._count("diskfrontier/lease_lost", len(lost))

    def _is_start_request(self, request: ScrapyRequest) -> bool:
        # Retries and redirects of a start request inherit its meta; they are not start requests.
        meta = request.meta
        return bool(meta.get("is_start_request")) and "retry_times" not in meta and "redirect_times" not in meta

    def _skip_adopted_start(self, request: ScrapyRequest, fingerprint: bytes) -> None:
        """A start request of a crawl adopted from Scrapy, which Scrapy issued without recording it:
        remembered as seen, not queued again."""
        assert self.frontier is not None
        self.frontier.mark_seen([fingerprint])
        self._count("diskfrontier/start_requests_skipped")
        if not self._logged_adopted:
            self._logged_adopted = True
            logger.info(
                "%s: this crawl was adopted from Scrapy's scheduler, which issued its start requests already; "
                "start requests are not queued again in this first run after adoption (set "
                "DISKFRONTIER_START_REQUESTS = 'keep' to queue them all)", request.url, extra={"spider": self.spider})

    def _rebuild(self, stored: Request) -> ScrapyRequest | None:
        try:
            return self._dicts.from_stored(stored)
        except Exception as exc:  # request_from_dict raises whatever the request class raises
            # Left in flight and never handed to the engine: it goes back to the queue at close.
            self._count("diskfrontier/undecodable")
            logger.error("cannot rebuild %s from the job directory (%s: %s); it is kept for a later run",
                         stored.url, type(exc).__name__, exc, extra={"spider": self.spider})
            return None

    def _keep_in_memory(self, request: ScrapyRequest, fingerprint: bytes, dont_filter: bool, exc: Exception) -> None:
        if self._local is None:  # a shared frontier keeps nothing of one process in memory
            self._memory.append(request)
        else:
            stand_in = Request.unchecked(request.url, request.method, {}, b"", route_priority(request.priority),
                                         {_LIVE: request}, dont_filter, fingerprint)
            self._local.push(stand_in, memory_only=True)
        if self._unstorable is not None:
            self._unstorable.note(request, exc)
        self._count(_ENQUEUED_MEMORY)

    def _encode(self, stored: Request) -> bytes:
        """The record of ``stored``, with its ``scrapy.Item`` values stored as their fields if it holds any.

        Raises ``Unencodable`` (and ``RequestTooLarge``) as ``encode_request`` does. Items are looked
        for only in a request that cannot be stored as it is: the others pay nothing for them.
        """
        try:
            return encode_request(stored)
        except Unencodable:
            if not store_items(stored):
                raise
        return encode_request(stored)

    def _item_refused(self, path: str, why: str) -> None:
        """A stored Item whose class cannot be used: its fields are given back as a dict (logged once a class)."""
        self._count("diskfrontier/items_as_dicts")
        if path not in self._items_refused:
            self._items_refused.add(path)
            logger.warning("a stored scrapy.Item of class %r is given back as a dict of its fields "
                           "(diskfrontier.request.values.ObjectFields): %s", path, why, extra={"spider": self.spider})

    def _log_duplicate(self, request: ScrapyRequest) -> None:
        self._count("dupefilter/filtered")
        if self.debug_duplicates:
            logger.debug("Filtered duplicate request: %s", request, extra={"spider": self.spider})
        elif not self._logged_duplicate:
            self._logged_duplicate = True
            logger.debug("Filtered duplicate request: %s - no more duplicates will be shown "
                         "(see DUPEFILTER_DEBUG to show all duplicates)", request, extra={"spider": self.spider})

