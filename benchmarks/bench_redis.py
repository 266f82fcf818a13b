"""Side by side on one redis-server: diskfrontier's Redis backend against scrapy-redis.

    pip install -e '.[bench]'
    python benchmarks/bench_redis.py                    # everything (about 5 minutes here)
    python benchmarks/bench_redis.py --quick            # smaller N (under 2 minutes)
    python benchmarks/bench_redis.py --aof everysec     # both sides with appendonly yes
    python benchmarks/bench_redis.py --only scheduler   # or: frontier, memory, or several: frontier,memory

The benchmark starts its own redis-server (a free loopback port, a temporary directory,
``--save ''``, appendonly as asked, the same server for both sides), flushes it before
every run, and stops it at the end.

* scheduler: the two Scrapy schedulers driven directly, without an engine:
  ``diskfrontier.scrapy.Scheduler`` with ``DISKFRONTIER_URL`` against
  ``scrapy_redis.scheduler.Scheduler`` (its ``PriorityQueue`` and ``RFPDupeFilter``).
  Each is built with ``from_crawler`` on a real Crawler and opened; N distinct
  ``scrapy.Request`` objects (callback a spider method, over 100 hosts) go through
  ``enqueue_request`` (and the scheduler's ``close``, timed too: diskfrontier stores its last
  buffered requests there), then ``next_request`` runs until the queue is empty. Once in one
  process, once in ``--workers`` processes at once on the same crawl (each enqueues its
  share, then each drains): aggregate = requests / (last end - first start). Another
  row drains with a stand-in engine, so that diskfrontier marks each request done.
* frontier: ``RedisFrontier`` itself, its defaults first (pop + done one at a time, in one process
  and from 4 processes at once; push), then push_many of 500, pop + done with ``ack="wait"``,
  with prefetch=16, and with pipelined acks, pop_many(100) + done_many, against what the
  scrapy-redis scheduler does per request (its dupefilter's ``request_seen`` then
  ``queue.push``; ``queue.pop``), on the same URLs. Each row has its own goal.
* memory: ``INFO memory`` ``used_memory`` of the flushed server before and after: per
  seen URL, and per pending request.

The machines are shared and noisy: read the medians and the ratios.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import benchresults

HERE = os.path.abspath(__file__)
HOSTS = 100
CRAWL = "bench"  # the spider's name: scrapy-redis keys bench:requests, bench:dupefilter; diskfrontier df:{bench}:*
SR_QUEUE, SR_SEEN = "bench:requests", "bench:dupefilter"
TARGET_SPEED = 2.0  # diskfrontier / scrapy-redis, requests per second
TARGET_SEEN = 0.3  # diskfrontier / scrapy-redis, bytes per seen URL
SIDES = ("diskfrontier", "scrapy-redis")


# ---------------------------------------------------------------------- the server
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server of our own on a free loopback port, in a temporary directory."""

    def __init__(self, binary: str, aof: str | None) -> None:
        self.binary, self.aof = binary, aof
        self.dir = tempfile.mkdtemp(prefix="bench-redis-")
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.client: Any = None

    def __enter__(self) -> RedisServer:
        import redis

        for _ in range(5):
            port = free_port()
            args = [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", self.dir, "--save", "",
                    "--appendonly", "yes" if self.aof else "no", "--daemonize", "no",
                    "--logfile", os.path.join(self.dir, "redis.log")]
            if self.aof:
                args += ["--appendfsync", self.aof]
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            client = redis.Redis(host="127.0.0.1", port=port)
            deadline = time.monotonic() + 10
            while self.proc.poll() is None and time.monotonic() < deadline:
                try:
                    client.ping()
                except redis.ConnectionError:
                    time.sleep(0.05)
                    continue
                self.url, self.client = f"redis://127.0.0.1:{port}/0", client
                return self
            self._stop()
        raise RuntimeError(f"redis-server did not start; see {os.path.join(self.dir, 'redis.log')}")

    def __exit__(self, *exc: object) -> None:
        self._stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: with --save '' nothing is written
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def flush(self) -> None:
        self.client.flushall(asynchronous=False)

    def used_memory(self) -> int:
        return int(self.client.info("memory")["used_memory"])

    def config(self, name: str) -> str:
        value = self.client.config_get(name)
        value = value.get(name.encode(), value.get(name, b""))
        return value.decode() if isinstance(value, bytes) else str(value)

    def describe(self) -> str:
        server_version = self.client.info("server")["redis_version"]
        aof = self.config("appendonly")
        text = (f"redis-server {server_version} on {self.url} (started here; save {self.config('save')!r}, "
                f"appendonly {aof}")
        return text + (f", appendfsync {self.config('appendfsync')})" if aof == "yes" else ")")


def parser_in_use(url: str) -> str:
    import redis

    client = redis.Redis.from_url(url)
    client.ping()
    conn = client.connection_pool.get_connection()
    name = type(conn._parser).__name__
    client.connection_pool.release(conn)
    client.close()
    return name


# ---------------------------------------------------------------------- workload
def workload(n: int) -> tuple[list[str], list[int]]:
    """n distinct URLs over HOSTS hosts, interleaved, with priorities 0..-5."""
    urls = [f"https://host{i % HOSTS}.example.com/catalog/{i // HOSTS}/item-{i}.html?ref=list&page={i % 50}"
            for i in range(n)]
    return urls, [-(i % 6) for i in range(n)]


@functools.cache
def spider_class() -> type:
    from scrapy import Spider

    class BenchSpider(Spider):
        name = CRAWL

        def parse_item(self, response: Any) -> None:
            pass

    return BenchSpider


def quiet() -> None:
    """No warning per frontier opened when appendonly is off (the header says how the server runs)."""
    logging.getLogger("diskfrontier").setLevel(logging.ERROR)


def scheduler_settings(side: str, url: str) -> dict[str, Any]:
    common = {"LOG_ENABLED": False, "TELNETCONSOLE_ENABLED": False}
    if side == "diskfrontier":
        return {**common, "SCHEDULER": "diskfrontier.scrapy.Scheduler", "DISKFRONTIER_URL": url,
                "DISKFRONTIER_CRAWL": CRAWL}
    return {**common, "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
            "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.PriorityQueue",
            "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
            "REDIS_URL": url,
            "SCHEDULER_PERSIST": True}  # its close() would delete the queue between the two phases


def open_scheduler(side: str, url: str, engine: bool = False) -> tuple[Any, Any]:
    """(spider, scheduler): a real Crawler for the spider, the scheduler made by from_crawler and opened.

    ``engine``: a stand-in engine that has finished with every request handed out by the
    time the scheduler is called again (diskfrontier's scheduler then marks them done).
    """
    from types import SimpleNamespace

    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    settings = scheduler_settings(side, url)
    cls = spider_class()
    crawler = get_crawler(cls, settings)
    crawler.spider = cls.from_crawler(crawler)
    if engine:
        crawler.engine = SimpleNamespace(_slot=SimpleNamespace(inprogress=set()))
    scheduler = load_object(settings["SCHEDULER"]).from_crawler(crawler)
    scheduler.open(crawler.spider)
    return crawler.spider, scheduler


# ---------------------------------------------------------------------- 1. schedulers (worker processes)
def child_worker(url: str) -> None:
    """A worker process: for each command line "side phase index workers n" on stdin, open the
    scheduler, say ready, wait for go, then enqueue its share of the N requests or drain."""
    from scrapy import Request as ScrapyRequest

    quiet()
    previous = None
    while command := sys.stdin.readline().split():
        side, phase, index, workers, n = command[0], command[1], *map(int, command[2:])
        previous = None  # a draining worker's scheduler is never closed: close() would give its
        # leases back while the others still drain, and they would take those requests again
        spider, scheduler = open_scheduler(side, url, engine=phase == "drain-engine")
        requests = []
        if phase == "enqueue":
            urls, priorities = workload(n)
            requests = [ScrapyRequest(urls[i], priority=priorities[i], callback=spider.parse_item)
                        for i in range(index, n, workers)]
        print("ready", flush=True)
        sys.stdin.readline()
        count = 0
        started = time.monotonic()
        if phase == "enqueue":
            for request in requests:
                count += bool(scheduler.enqueue_request(request))
            scheduler.close("finished")  # timed: diskfrontier stores its last buffered requests here
        else:
            while scheduler.next_request() is not None:
                count += 1
            if phase == "drain-engine":
                scheduler.has_pending_requests()  # as the engine asks at the end: the last dones go out
        ended = time.monotonic()
        if phase != "enqueue":
            previous = scheduler
        print(json.dumps({"start": started, "end": ended, "count": count}), flush=True)
    del previous


class Workers:
    """Worker processes started once (Scrapy imported, warm), given one command at a time."""

    def __init__(self, server: RedisServer, count: int) -> None:
        self.procs: list[subprocess.Popen] = []
        self.logs = []
        for index in range(count):
            log = open(os.path.join(server.dir, f"worker-{index}.err"), "w+")  # noqa: SIM115
            self.logs.append(log)
            self.procs.append(subprocess.Popen([sys.executable, HERE, "--child", server.url],
                                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True))

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc, log in zip(self.procs, self.logs, strict=True):
            if proc.stdin:
                proc.stdin.close()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()

    def _line(self, index: int, what: str) -> str:
        line = self.procs[index].stdout.readline()
        if not line:
            self.procs[index].wait()
            self.logs[index].seek(0)
            raise RuntimeError(f"worker {index} failed ({what}):\n{self.logs[index].read()[-3000:]}")
        return line

    def run(self, side: str, phase: str, workers: int, n: int) -> tuple[float, int]:
        """(requests per second over ``workers`` workers, requests handled): they start together."""
        for index in range(workers):
            self.procs[index].stdin.write(f"{side} {phase} {index} {workers} {n}\n")
            self.procs[index].stdin.flush()
        for index in range(workers):
            if self._line(index, f"{side} {phase}").strip() != "ready":
                raise RuntimeError(f"worker {index} is out of step")
        for index in range(workers):
            self.procs[index].stdin.write("go\n")
            self.procs[index].stdin.flush()
        results = [json.loads(self._line(index, f"{side} {phase}")) for index in range(workers)]
        total = sum(r["count"] for r in results)
        wall = max(r["end"] for r in results) - min(r["start"] for r in results)
        return total / wall, total


def queued(server: RedisServer, side: str) -> int:
    if side == "diskfrontier":
        return int(server.client.hget(f"df:{{{CRAWL}}}:meta", "pending") or 0)
    return int(server.client.zcard(SR_QUEUE))


def bench_scheduler(server: RedisServer, n: int, repeat: int, workers: int) -> dict[str, dict[str, float]]:
    runs: dict[tuple[str, str, int], list[float]] = {}
    with Workers(server, workers) as pool:
        for rep in range(repeat):
            for procs in (1, workers):
                for side in SIDES if rep % 2 == 0 else SIDES[::-1]:
                    server.flush()
                    rate, count = pool.run(side, "enqueue", procs, n)
                    assert count == n and queued(server, side) == n, (side, count, queued(server, side))
                    runs.setdefault((side, "enqueue", procs), []).append(rate)
                    rate, count = pool.run(side, "drain", procs, n)
                    assert count == n, (side, "drain", count)
                    runs.setdefault((side, "drain", procs), []).append(rate)
            server.flush()
            pool.run("diskfrontier", "enqueue", 1, n)
            rate, count = pool.run("diskfrontier", "drain-engine", 1, n)
            meta = server.client.hmget(f"df:{{{CRAWL}}}:meta", "done", "inflight", "pending")
            assert count == n and [int(x) for x in meta] == [n, 0, 0], (count, meta)
            runs.setdefault(("diskfrontier", "drain-engine", 1), []).append(rate)
            server.flush()
            print(f"  scheduler: repeat {rep + 1}/{repeat} done", file=sys.stderr)
    out: dict[str, dict[str, float]] = {}
    for (side, phase, procs), rates in runs.items():
        out.setdefault(f"{phase} {procs}", {})[side] = statistics.median(rates)
    return out


# ---------------------------------------------------------------------- 2. RedisFrontier directly
def timed(run: Callable[[], int]) -> float:
    started = time.perf_counter()
    count = run()
    return count / (time.perf_counter() - started)


def df_requests(urls: list[str], priorities: list[int]) -> list[Any]:
    from diskfrontier import Request

    return [Request(u, priority=p) for u, p in zip(urls, priorities, strict=True)]


def sr_requests(urls: list[str], priorities: list[int]) -> list[Any]:
    from scrapy import Request as ScrapyRequest

    return [ScrapyRequest(u, priority=p) for u, p in zip(urls, priorities, strict=True)]


def open_frontier(server: RedisServer, n: int, **options: Any) -> Any:
    from diskfrontier import RedisFrontier

    return RedisFrontier(server.url, crawl=CRAWL, expected_urls=n, **options)


def df_push(server: RedisServer, urls: list[str], priorities: list[int], batch: int | None) -> float:
    server.flush()
    requests = df_requests(urls, priorities)
    with open_frontier(server, len(urls)) as frontier:
        def run() -> int:
            if batch is None:
                return sum(frontier.push(r) for r in requests)
            return sum(frontier.push_many(requests[at:at + batch]) for at in range(0, len(requests), batch))
        rate = timed(run)
        assert len(frontier) == len(urls)
    return rate


def df_pop_done(server: RedisServer, urls: list[str], priorities: list[int], batch: int | None,
                **options: Any) -> float:
    server.flush()
    with open_frontier(server, len(urls), **options) as frontier:
        frontier.push_many(df_requests(urls, priorities))

        def run() -> int:
            count = 0
            if batch is None:
                while (r := frontier.pop()) is not None:
                    frontier.done(r)
                    count += 1
            else:
                while got := frontier.pop_many(batch):
                    frontier.done_many(got)
                    count += len(got)
            return count
        rate = timed(run)
        assert frontier.finished and frontier.stats()["done"] == len(urls)
    return rate


def sr_parts(server: RedisServer) -> tuple[Any, Any, Any]:
    """(client, dupefilter, queue) of scrapy-redis, as its scheduler builds them for the spider."""
    from scrapy.settings import Settings
    from scrapy_redis.connection import get_redis_from_settings
    from scrapy_redis.dupefilter import RFPDupeFilter
    from scrapy_redis.queue import PriorityQueue

    client = get_redis_from_settings(Settings({"REDIS_URL": server.url}))
    spider = spider_class()()
    return client, RFPDupeFilter(client, key=SR_SEEN), PriorityQueue(client, spider, SR_QUEUE)


def sr_push(server: RedisServer, urls: list[str], priorities: list[int]) -> float:
    server.flush()
    requests = sr_requests(urls, priorities)
    client, seen, queue = sr_parts(server)

    def run() -> int:
        count = 0
        for r in requests:
            if not seen.request_seen(r):
                queue.push(r)
                count += 1
        return count
    rate = timed(run)
    assert len(queue) == len(urls)
    client.close()
    return rate


def sr_pop(server: RedisServer, urls: list[str], priorities: list[int]) -> float:
    server.flush()
    client, seen, queue = sr_parts(server)
    fill_scrapy_redis(client, seen, queue, sr_records(seen, queue, sr_requests(urls, priorities)))

    def run() -> int:
        count = 0
        while queue.pop() is not None:
            count += 1
        return count
    rate = timed(run)
    assert len(queue) == 0
    client.close()
    return rate


def sr_records(seen: Any, queue: Any, requests: list[Any]) -> list[tuple[str, int, bytes]]:
    """(fingerprint, score, pickle) of each request, as scrapy-redis's request_seen and queue.push make them."""
    return [(seen.request_fingerprint(r), -r.priority, queue._encode_request(r)) for r in requests]


def fill_scrapy_redis(client: Any, seen: Any, queue: Any, records: list[tuple[str, int, bytes]]) -> None:
    """What request_seen and queue.push store for each request, sent pipelined."""
    for at in range(0, len(records), 1000):
        pipe = client.pipeline(transaction=False)
        for fingerprint, score, data in records[at:at + 1000]:
            pipe.sadd(seen.key, fingerprint)
            pipe.execute_command("ZADD", queue.key, score, data)
        pipe.execute()


def drain_worker(server: RedisServer, side: str, options: dict[str, Any], start: Any, out: Any) -> None:
    """One of several processes draining the same crawl / queue: pop (+ done) one at a time until none is left."""
    quiet()
    if side == "diskfrontier":
        frontier = open_frontier(server, 1, **options)  # the crawl is there: expected_urls is not used

        def step() -> bool:
            request = frontier.pop()
            if request is not None:
                frontier.done(request)
            return request is not None
        close = frontier.close
    else:
        client, _seen, queue = sr_parts(server)

        def step() -> bool:
            return queue.pop() is not None
        close = client.close
    start.wait(timeout=120)
    began, count = time.perf_counter(), 0
    while step():
        count += 1
    out.put((began, time.perf_counter(), count))
    close()


def parallel_pop(server: RedisServer, side: str, urls: list[str], priorities: list[int], **options: Any) -> float:
    """Requests per second of FRONTIER_WORKERS processes draining one crawl at once: N / (last end - first start)."""
    import multiprocessing

    server.flush()
    if side == "diskfrontier":
        with open_frontier(server, len(urls)) as frontier:
            frontier.push_many(df_requests(urls, priorities))
    else:
        client, seen, queue = sr_parts(server)
        fill_scrapy_redis(client, seen, queue, sr_records(seen, queue, sr_requests(urls, priorities)))
        client.close()
    context = multiprocessing.get_context("fork")
    start, out = context.Barrier(FRONTIER_WORKERS + 1), context.Queue()
    procs = [context.Process(target=drain_worker, args=(server, side, options, start, out))
             for _ in range(FRONTIER_WORKERS)]
    for proc in procs:
        proc.start()
    start.wait(timeout=120)  # a worker that failed to open breaks it: BrokenBarrierError here
    ends = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
    assert sum(count for _, _, count in ends) == len(urls)
    return len(urls) / (max(end for _, end, _ in ends) - min(began for began, _, _ in ends))


FRONTIER_WORKERS = 4  # processes of the parallel pop rows
FAST = {"prefetch": 16, "ack": "pipelined"}  # the options that trade promises for round trips (docs/guide/redis.md)
WAIT = {"ack": "wait"}  # each done waited for (the default before ack="deferred")
GOAL_POP, GOAL_PUSH = 1.0, 2.0  # the defaults' goals (issue 35): pop + done one at a time, push one at a time
FRONTIER_ROWS = [
    # key, label, the scrapy-redis figure it is set against, the goal (ratio)
    ("pop_done", "pop() + done(), one at a time, defaults", "pop", GOAL_POP),
    ("pop_done_4", f"pop() + done(), {FRONTIER_WORKERS} processes, defaults", "pop 4", GOAL_POP),
    ("push", "push(), one at a time, defaults", "push", GOAL_PUSH),
    ("push_many", "push_many(), batches of 500", "push", TARGET_SPEED),
    ("pop_done_wait", "pop() + done(), one at a time, ack='wait'", "pop", GOAL_POP),
    ("pop_done_prefetch", "pop() + done(), one at a time, prefetch=16", "pop", TARGET_SPEED),
    ("pop_done_fast", "... prefetch=16, pipelined acks", "pop", TARGET_SPEED),
    ("pop_many", "pop_many(100) + done_many()", "pop", TARGET_SPEED),
    ("pop_done_4_fast", f"... {FRONTIER_WORKERS} processes, prefetch=16, pipelined", "pop 4", TARGET_SPEED),
]


def sr_figures(runs: dict[str, list[float]]) -> dict[str, float]:
    """The scrapy-redis figures the rows are set against (medians)."""
    return {name: statistics.median(runs["sr " + name]) for name in ("push", "pop", "pop 4")}


def bench_frontier(server: RedisServer, n: int, repeat: int) -> dict[str, list[float]]:
    urls, priorities = workload(n)
    runs: dict[str, list[float]] = {}
    for rep in range(repeat):
        jobs: list[tuple[str, Callable[[], float]]] = [
            ("push", lambda: df_push(server, urls, priorities, None)),
            ("sr push", lambda: sr_push(server, urls, priorities)),
            ("push_many", lambda: df_push(server, urls, priorities, 500)),
            ("pop_done", lambda: df_pop_done(server, urls, priorities, None)),
            ("pop_done_wait", lambda: df_pop_done(server, urls, priorities, None, **WAIT)),
            ("pop_done_prefetch", lambda: df_pop_done(server, urls, priorities, None, prefetch=16)),
            ("pop_done_fast", lambda: df_pop_done(server, urls, priorities, None, **FAST)),
            ("sr pop", lambda: sr_pop(server, urls, priorities)),
            ("pop_many", lambda: df_pop_done(server, urls, priorities, 100)),
            ("pop_done_4", lambda: parallel_pop(server, "diskfrontier", urls, priorities)),
            ("pop_done_4_fast", lambda: parallel_pop(server, "diskfrontier", urls, priorities, **FAST)),
            ("sr pop 4", lambda: parallel_pop(server, "scrapy-redis", urls, priorities)),
        ]
        if rep % 2:
            jobs.reverse()
        for key, job in jobs:
            runs.setdefault(key, []).append(job())
        server.flush()
        print(f"  frontier: repeat {rep + 1}/{repeat} done", file=sys.stderr)
    return runs


# ---------------------------------------------------------------------- 3. memory
def settle(server: RedisServer) -> int:
    """used_memory once the server is idle (client buffers of the last calls released)."""
    time.sleep(0.2)
    return server.used_memory()


def df_memory(server: RedisServer, n: int, urls: list[str], priorities: list[int]) -> dict[str, float]:
    """Bytes per URL of a crawl with n pending (pushed, none popped), then with all n done."""
    server.flush()
    before = settle(server)
    with open_frontier(server, n) as frontier:
        for at in range(0, n, 10_000):
            frontier.push_many(df_requests(urls[at:at + 10_000], priorities[at:at + 10_000]))
        assert len(frontier) == n
    pending = settle(server) - before  # measured with no client of the crawl connected
    with open_frontier(server, n) as frontier:
        while got := frontier.pop_many(2000):
            frontier.done_many(got)
        assert frontier.finished and frontier.stats()["seen"] == n
    seen = settle(server) - before
    buckets = 0
    for pattern in ("s:*", "k:*"):  # the hash buckets of crawls made before, the sets of new ones
        for key in server.client.scan_iter(match=f"df:{{{CRAWL}}}:{pattern}", count=1000):
            buckets += server.client.memory_usage(key, samples=0) or 0
    server.flush()
    return {"seen": seen / n, "buckets": buckets / n, "pending": pending / n}


def sr_memory(server: RedisServer, n: int, records: list[tuple[str, int, bytes]]) -> dict[str, float]:
    """Bytes per URL of scrapy-redis with n pending (queue ZSET and dupefilter SET), then of its SET alone."""
    server.flush()
    before = settle(server)
    client, seen, queue = sr_parts(server)
    fill_scrapy_redis(client, seen, queue, records)
    assert client.zcard(SR_QUEUE) == n and client.scard(SR_SEEN) == n
    client.close()
    pending = settle(server) - before
    server.client.delete(SR_QUEUE)
    seen_bytes = settle(server) - before
    server.flush()
    return {"seen": seen_bytes / n, "pending": pending / n}


def record_sizes(urls: list[str], priorities: list[int]) -> tuple[float, float]:
    """Mean bytes of one stored request: diskfrontier's body in its req hash, scrapy-redis's pickle."""
    from diskfrontier.redisfrontier.records import encode, pack_body

    sample = slice(0, min(len(urls), 10_000))
    ours = [len(pack_body(r, encode(r), 0, 0.0)) for r in df_requests(urls[sample], priorities[sample])]
    spider = spider_class()()
    from scrapy_redis.queue import PriorityQueue

    queue = PriorityQueue(None, spider, SR_QUEUE)
    theirs = [len(queue._encode_request(r)) for r in sr_requests(urls[sample], priorities[sample])]
    return statistics.mean(ours), statistics.mean(theirs)


def bench_memory(server: RedisServer, n: int, repeat: int) -> dict[str, Any]:
    urls, priorities = workload(n)
    client, seen, queue = sr_parts(server)
    client.close()
    records = []  # made once: the bytes stored are the same in every run
    for at in range(0, n, 10_000):
        records += sr_records(seen, queue, sr_requests(urls[at:at + 10_000], priorities[at:at + 10_000]))
    ours: list[dict[str, float]] = []
    theirs: list[dict[str, float]] = []
    for rep in range(repeat):
        if rep % 2:
            theirs.append(sr_memory(server, n, records))
            ours.append(df_memory(server, n, urls, priorities))
        else:
            ours.append(df_memory(server, n, urls, priorities))
            theirs.append(sr_memory(server, n, records))
        print(f"  memory: repeat {rep + 1}/{repeat} done", file=sys.stderr)
    out = {f"df {k}": statistics.median(r[k] for r in ours) for k in ours[0]}
    out.update({f"sr {k}": statistics.median(r[k] for r in theirs) for k in theirs[0]})
    out["df record"], out["sr record"] = record_sizes(urls, priorities)
    return out


# ---------------------------------------------------------------------- printing
def verdict(ratio: float, target: float, higher: bool) -> str:
    met = ratio >= target if higher else ratio <= target
    return f"{'>=' if higher else '<='} {target:.1f}x  {'MET' if met else 'MISSED'}"


def speed_row(label: str, ours: float, theirs: float, goal: float = TARGET_SPEED) -> str:
    ratio = ours / theirs
    return f"{label:<44}{ours:>13,.0f}{theirs:>14,.0f}{ratio:>8.2f}x  {verdict(ratio, goal, True)}"


def header_row(first: str) -> str:
    return f"{first:<44}{'diskfrontier':>13}{'scrapy-redis':>14}{'ratio':>9}  target"


def print_scheduler(result: dict[str, dict[str, float]], n: int, repeat: int, workers: int) -> None:
    print(f"\n1. Scrapy schedulers driven directly: {n:,} distinct scrapy.Request (callback=spider.parse_item, "
          f"priorities 0..-5) over {HOSTS} hosts; requests/s, median of {repeat}")
    print("   diskfrontier.scrapy.Scheduler: DISKFRONTIER_URL, DISKFRONTIER_CRAWL, its defaults otherwise (LIFO, "
          "prefer idle, lease 30 s,\n   prefetch 16, push batch 500); enqueue rows time enqueue_request and then "
          "close (which stores diskfrontier's\n   last buffered requests)")
    print("   scrapy_redis.scheduler.Scheduler: SCHEDULER_QUEUE_CLASS scrapy_redis.queue.PriorityQueue, "
          "DUPEFILTER_CLASS scrapy_redis.dupefilter.RFPDupeFilter, REDIS_URL, SCHEDULER_PERSIST")
    print(header_row("figure"))
    for procs in (1, workers):
        who = "1 process" if procs == 1 else f"{procs} processes, aggregate"
        for phase, label in (("enqueue", "enqueue_request/s"), ("drain", "next_request/s")):
            row = result[f"{phase} {procs}"]
            print(speed_row(f"{label}, {who}", row["diskfrontier"], row["scrapy-redis"]))
        if procs == 1:
            print(speed_row("next_request/s, 1 process, stand-in engine *", result["drain-engine 1"]["diskfrontier"],
                            result["drain 1"]["scrapy-redis"]))
    print("   No engine (every row but *): diskfrontier's scheduler never marks a request done, so its\n"
          "   next_request is pop + lease + rebuilding the Scrapy request, without the done a crawl adds as\n"
          "   the engine finishes requests (scrapy-redis keeps no lease: a popped request whose process dies is\n"
          "   lost).\n"
          "   * a stand-in engine that has finished each request by the next call: diskfrontier's scheduler marks\n"
          "     it done (a done_many of 16 finished requests at a time, as in a crawl); scrapy-redis: the figure\n"
          "     above.\n"
          f"   {workers} processes: each enqueues its N/{workers} share into the same crawl / key, then each drains "
          f"it (a new\n   scheduler each) until empty; aggregate = N / (last worker's end - first worker's start). "
          f"Worker\n   processes are started once; each run's workers start together once their schedulers are "
          f"open.")


def print_frontier(runs: dict[str, list[float]], n: int, repeat: int) -> None:
    print(f"\n2. RedisFrontier directly against scrapy-redis's per-request calls: {n:,} requests over {HOSTS} hosts; "
          f"requests/s, median of {repeat}")
    print("   scrapy-redis push: RFPDupeFilter.request_seen() then PriorityQueue.push() (what its enqueue_request "
          "does);\n   scrapy-redis pop: PriorityQueue.pop(). Batched rows are set against the same per-request "
          "figures\n   (scrapy-redis has no batch call). diskfrontier.Request for RedisFrontier, scrapy.Request "
          "(no callback)\n   for scrapy-redis, from the same URLs; fingerprints are computed inside the timed "
          "calls on both sides.")
    print(f"   Parallel rows: {FRONTIER_WORKERS} processes drain one crawl / queue at once (pop + done one at a "
          f"time until none is\n   left; scrapy-redis: PriorityQueue.pop()); aggregate = N / (last end - first "
          f"start).")
    print(header_row("operation"))
    sr = sr_figures(runs)
    for key, label, against, goal in FRONTIER_ROWS:
        print(speed_row(label, statistics.median(runs[key]), sr[against], goal))
    print("   defaults: ack='deferred' (a done rides on the client's next step, here the next pop), prefetch=1;\n"
          "   ack='wait': each done waits for its reply (the default before). Goals: the issues' (pop + done one "
          "at a\n   time with the defaults >= 1x, push >= 2x; the rest >= 2x as before).")


def print_memory(result: dict[str, Any], n: int, repeat: int) -> None:
    print(f"\n3. Redis memory (INFO used_memory after - before, on the flushed server), {n:,} URLs over {HOSTS} hosts; "
          f"bytes per URL, median of {repeat}")
    print(f"{'figure':<44}{'diskfrontier':>13}{'scrapy-redis':>14}{'ratio':>9}  target")
    ratio = result["df seen"] / result["sr seen"]
    print(f"{'per seen URL':<44}{result['df seen']:>13.1f}{result['sr seen']:>14.1f}{ratio:>8.2f}x  "
          f"{verdict(ratio, TARGET_SEEN, False)}")
    ratio = result["df pending"] / result["sr pending"]
    print(f"{'per pending request':<44}{result['df pending']:>13.1f}{result['sr pending']:>14.1f}{ratio:>8.2f}x  "
          f"(no target)")
    print(f"   per seen URL, diskfrontier: N pushed (push_many), then all popped and done (pop_many/done_many):\n"
          f"     what remains is the seen buckets (64-bit keys in intset buckets that grow with the crawl;\n"
          f"     MEMORY USAGE of the buckets alone: {result['df buckets']:.1f} B/URL), the crawl's meta hash, its "
          f"host set and\n     per-host hashes (done counts).\n"
          f"   per seen URL, scrapy-redis: its dupefilter SET after N request_seen (40-character hex sha1s),\n"
          f"     measured once the queue ZSET below is deleted.\n"
          f"   per pending request, diskfrontier: the same N pushed, none popped: request bodies (req hash),\n"
          f"     per-host queues, ready set, host set and hashes, and the seen buckets. Mean body "
          f"{result['df record']:.0f} B.\n"
          f"   per pending request, scrapy-redis: its priority-queue ZSET of pickled requests plus its dupefilter\n"
          f"     SET. Mean pickle {result['sr record']:.0f} B. Filled pipelined with the very fingerprints and "
          f"pickles its\n     request_seen and queue.push make (their speed is in table 2).\n"
          f"   Each figure is taken with no client of the crawl connected (no client buffers counted).")


# ---------------------------------------------------------------------- results as data
SPEED_COLUMNS = [("figure", None), ("diskfrontier", "{:,.0f}"), ("scrapy-redis", "{:,.0f}"), ("ratio", "{:.2f}x"),
                 ("target", None)]


def speed_cells(label: str, ours: float, theirs: float, goal: float = TARGET_SPEED) -> list[Any]:
    return [label, ours, theirs, ours / theirs, verdict(ours / theirs, goal, True)]


def scheduler_table(result: dict[str, dict[str, float]], n: int, repeat: int, workers: int) -> dict:
    rows = []
    for procs in (1, workers):
        who = "1 process" if procs == 1 else f"{procs} processes, aggregate"
        for phase, label in (("enqueue", "enqueue_request/s"), ("drain", "next_request/s")):
            row = result[f"{phase} {procs}"]
            rows.append(speed_cells(f"{label}, {who}", row["diskfrontier"], row["scrapy-redis"]))
        if procs == 1:
            rows.append(speed_cells("next_request/s, 1 process, stand-in engine *",
                                    result["drain-engine 1"]["diskfrontier"], result["drain 1"]["scrapy-redis"]))
    return benchresults.table(
        f"Scrapy schedulers driven directly: {n:,} distinct scrapy.Request (a callback, priorities 0..-5) over "
        f"{HOSTS} hosts; requests/s, median of {repeat}", SPEED_COLUMNS, rows,
        ["No engine (every row but *): diskfrontier's next_request is pop + lease + rebuilding the Scrapy request, "
         "without the done a crawl adds; scrapy-redis keeps no lease (a popped request whose process dies is lost).",
         "* a stand-in engine that has finished each request by the next call, so diskfrontier marks it done "
         "(16 at a time).",
         "enqueue rows time enqueue_request and then close, which stores diskfrontier's last buffered requests.",
         f"{workers} processes: each enqueues its share into the same crawl, then each drains it; aggregate = N / "
         f"(last worker's end - first worker's start)."])


def frontier_table(runs: dict[str, list[float]], n: int, repeat: int) -> dict:
    sr = sr_figures(runs)
    return benchresults.table(
        f"RedisFrontier against scrapy-redis's per-request calls: {n:,} requests over {HOSTS} hosts; requests/s, "
        f"median of {repeat}", SPEED_COLUMNS,
        [speed_cells(label, statistics.median(runs[key]), sr[against], goal)
         for key, label, against, goal in FRONTIER_ROWS],
        ["scrapy-redis push: RFPDupeFilter.request_seen() then PriorityQueue.push(); pop: PriorityQueue.pop(). "
         "Batched rows are set against the same per-request figures (scrapy-redis has no batch call). "
         f"Parallel rows: {FRONTIER_WORKERS} processes drain one crawl / queue at once; aggregate = N / (last end - "
         "first start)."])


def memory_table(result: dict[str, Any], n: int, repeat: int) -> dict:
    seen, pending = result["df seen"] / result["sr seen"], result["df pending"] / result["sr pending"]
    return benchresults.table(
        f"Redis memory (INFO used_memory after - before, on the flushed server), {n:,} URLs over {HOSTS} hosts; "
        f"bytes per URL, median of {repeat}",
        [("figure", None), ("diskfrontier", "{:,.1f}"), ("scrapy-redis", "{:,.1f}"), ("ratio", "{:.2f}x"),
         ("target", None)],
        [["per seen URL", result["df seen"], result["sr seen"], seen, verdict(seen, TARGET_SEEN, False)],
         ["per pending request", result["df pending"], result["sr pending"], pending, "(no target)"]],
        [f"diskfrontier's seen buckets alone (MEMORY USAGE): {result['df buckets']:.1f} B/URL; mean request body "
         f"{result['df record']:.0f} B against scrapy-redis's mean pickle of {result['sr record']:.0f} B."])


# ---------------------------------------------------------------------- main
def parts(text: str) -> set[str]:
    chosen = {p.strip() for p in text.split(",") if p.strip()}
    unknown = chosen - {"scheduler", "frontier", "memory"}
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"parts are scheduler, frontier and memory, not {', '.join(sorted(unknown))}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", type=parts, metavar="PARTS",
                        help="comma-separated parts to run: scheduler, frontier, memory (default: all three)")
    parser.add_argument("-n", type=int, default=None, help="requests for the throughput tables (default 20,000)")
    parser.add_argument("--memory-n", type=int, default=None, help="URLs for the memory table (default 200,000)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4, help="processes at once in table 1 (default 4)")
    parser.add_argument("--aof", choices=["everysec", "always"], help="run the server with appendonly yes and "
                        "this appendfsync (default: appendonly no)")
    parser.add_argument("--quick", action="store_true", help="N 5,000 and 100,000 for memory")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "/usr/bin/redis-server")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    benchresults.add_argument(parser, "bench_redis")
    args = parser.parse_args()
    if args.child:
        child_worker(args.child)
        return
    if args.repeat < 1 or args.workers < 1:
        parser.error("--repeat and --workers must be at least 1")
    n = args.n or (5_000 if args.quick else 20_000)
    memory_n = args.memory_n or (100_000 if args.quick else 200_000)
    quiet()
    import redis
    import redis.utils

    started = time.perf_counter()
    with RedisServer(args.redis_server, args.aof) as server:
        print(server.describe())
        print(f"Python {platform.python_version()}, redis-py {redis.__version__}, hiredis "
              f"{'in use' if redis.utils.HIREDIS_AVAILABLE else 'NOT in use'} (parser {parser_in_use(server.url)}), "
              f"Scrapy {version('scrapy')}, scrapy-redis {version('scrapy-redis')}; {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.2f}")
        print(f"N = {n:,} (throughput), {memory_n:,} (memory); medians of {args.repeat} runs; both sides on this "
              f"server, flushed before each run")
        print(f"targets (the issues): throughput >= {TARGET_SPEED:.0f}x scrapy-redis (table 2: each row's own goal); "
              f"memory per seen URL <= {TARGET_SEEN}x scrapy-redis's", flush=True)
        tables, figures = [], {"server": server.describe()}
        if args.only is None or "scheduler" in args.only:
            figures["scheduler"] = result = bench_scheduler(server, n, args.repeat, args.workers)
            print_scheduler(result, n, args.repeat, args.workers)
            tables.append(scheduler_table(result, n, args.repeat, args.workers))
        if args.only is None or "frontier" in args.only:
            figures["frontier"] = runs = bench_frontier(server, n, args.repeat)
            print_frontier(runs, n, args.repeat)
            tables.append(frontier_table(runs, n, args.repeat))
        if args.only is None or "memory" in args.only:
            figures["memory"] = memory = bench_memory(server, memory_n, args.repeat)
            print_memory(memory, memory_n, args.repeat)
            tables.append(memory_table(memory, memory_n, args.repeat))
    print(f"\n(took {time.perf_counter() - started:.0f} s)")
    benchresults.write(args.results, "bench_redis", {**vars(args), "n": n, "memory_n": memory_n}, tables, figures)


if __name__ == "__main__":
    main()
