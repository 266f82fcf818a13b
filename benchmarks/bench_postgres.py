"""Side by side: diskfrontier's PostgreSQL backend, its Redis backend, and a plain SKIP LOCKED queue.

    pip install -e '.[bench,postgres]'
    python benchmarks/bench_postgres.py                 # N 5,000 a throughput run, 10^6 URLs on disk
    python benchmarks/bench_postgres.py --quick         # N 2,000 and 3x10^5 URLs (a few minutes here)
    python benchmarks/bench_postgres.py --disk-n 10000000 --only disk   # the issue's 10^7 pushed, 10^6 drained

The benchmark starts its own PostgreSQL cluster (``initdb`` and ``postgres`` on a free loopback port in a
temporary folder, as the ``postgres`` user when run as root; ``fsync`` on, ``synchronous_commit`` as
``--synchronous-commit`` says, ``shared_buffers`` as ``--shared-buffers`` says) and its own redis-server (as
bench_redis.py does), and removes both at the end.

* calls: per call, from 1 process and from 4 processes at once on one crawl: push, pop + done, and the batch
  paths (push_many of 500, pop_many(100) + done_many), for ``PostgresFrontier``, ``RedisFrontier`` (its
  defaults) and a queue of Crawlee's SQL design on the same PostgreSQL server: one table, dedupe by a unique
  key at insert, a fetch that is ``SELECT ... ORDER BY ... LIMIT 1 FOR UPDATE SKIP LOCKED`` and an UPDATE
  setting its lock's expiry (here one statement, one round trip: the fairest form of it), DELETE at done; no
  host awareness, no politeness. Goal: PostgresFrontier at least 2x that queue per call.
  Each row: N requests over 100 hosts; 4 processes: each does its share, aggregate = N / (last end - first
  start); median of ``--repeat`` runs.
* disk: ``--disk-n`` URLs pushed (push_many), a tenth drained (pop_many + done_many); bytes per seen URL (the
  ``seen`` table with its index) and per pending request (every other table and index of the crawl) after a
  VACUUM, beside the job directory's files and Redis's memory for the same crawl; and the server's memory
  (the proportional set size of all its processes) sampled as the crawl grows: it is bounded by
  ``shared_buffers`` and the backends' own memory, not by the crawl.

The machines are shared and noisy: read the medians and the ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import logging
import os
import pwd
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import benchresults
from bench_redis import RedisServer, free_port, workload

CRAWL = "bench"
HOSTS = 100
GOAL = 2.0  # PostgresFrontier / the SKIP LOCKED queue, calls per second
WORKERS = 4
SIDES = ("postgres", "redis", "queue")
OPS = (("push", "push(), one at a time"), ("pop_done", "pop() + done(), one at a time"),
       ("push_many", "push_many(), batches of 500"), ("pop_many", "pop_many(100) + done_many()"))


# ---------------------------------------------------------------------- the PostgreSQL server
class PgCluster:
    """A PostgreSQL cluster of our own (``initdb`` + ``postgres``) on a free loopback port."""

    def __init__(self, synchronous_commit: str, shared_buffers: str) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[-3]))
        which = shutil.which("postgres")
        binary = found[-1] if found else which
        if binary is None:
            raise SystemExit("the PostgreSQL server is not installed (apt-get install postgresql)")
        self.bindir = os.path.dirname(binary)
        self.user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None  # initdb refuses root
        self.role = self.user.pw_name if self.user else pwd.getpwuid(os.geteuid()).pw_name
        self.dir = tempfile.mkdtemp(prefix="bench-pg-")
        if self.user is not None:
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        self.data = os.path.join(self.dir, "data")
        self.settings = {"synchronous_commit": synchronous_commit, "shared_buffers": shared_buffers}
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def _preexec(self) -> None:
        if self.user is not None:
            os.setgid(self.user.pw_gid)
            os.initgroups(self.user.pw_name, self.user.pw_gid)
            os.setuid(self.user.pw_uid)

    def __enter__(self) -> PgCluster:
        import psycopg

        subprocess.run([os.path.join(self.bindir, "initdb"), "-D", self.data, "-A", "trust", "-E", "UTF8",
                        "--locale=C", "-U", self.role], check=True, stdout=subprocess.DEVNULL,
                       preexec_fn=self._preexec, cwd=self.dir)
        port = free_port()
        args = [os.path.join(self.bindir, "postgres"), "-D", self.data, "-p", str(port),
                "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.dir}", "-c", "fsync=on",
                "-c", "max_connections=50", *[f"-c{k}={v}" for k, v in self.settings.items()]]
        log = open(os.path.join(self.dir, "server.log"), "w")  # the child keeps it
        if self.user is not None:
            os.chown(log.name, self.user.pw_uid, self.user.pw_gid)
        self.proc = subprocess.Popen(args, stdout=log, stderr=log, preexec_fn=self._preexec, cwd=self.dir)
        log.close()
        self.url = f"postgresql://{self.role}@127.0.0.1:{port}/postgres"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return self
            except psycopg.OperationalError:
                time.sleep(0.1)
        self.__exit__()
        raise RuntimeError(f"postgres did not start; see {log.name}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown: its clients are ended
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def sql(self, query: str, params: tuple = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            cursor = conn.execute(query, params)
            return cursor.fetchall() if cursor.description else []

    def reset(self) -> None:
        """Drop the crawl and the queue: each run starts from an empty database."""
        self.sql(f"DROP SCHEMA IF EXISTS df_{CRAWL} CASCADE")
        self.sql("DROP TABLE IF EXISTS skip_queue")

    def memory(self) -> int:
        """Bytes of memory of the server's processes (the sum of their proportional set sizes: shared pages
        counted once across them)."""
        assert self.proc is not None
        pids = [self.proc.pid]
        with contextlib.suppress(OSError), open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            pids += [int(pid) for pid in f.read().split()]
        total = 0
        for pid in pids:
            with contextlib.suppress(OSError), open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
        return total

    def describe(self) -> str:
        version = self.sql("SHOW server_version")[0][0]
        return (f"PostgreSQL {version} on {self.url} (started here; fsync on, synchronous_commit "
                f"{self.settings['synchronous_commit']}, shared_buffers {self.settings['shared_buffers']})")


# ---------------------------------------------------------------------- a queue of Crawlee's SQL design
QUEUE_TABLE = """
CREATE TABLE skip_queue (
    seq bigserial PRIMARY KEY,
    unique_key text NOT NULL UNIQUE,
    priority integer NOT NULL,
    data bytea NOT NULL,
    locked_until timestamptz
);
CREATE INDEX skip_queue_order ON skip_queue (priority DESC, seq);
"""
QUEUE_PUSH = "INSERT INTO skip_queue (unique_key, priority, data) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
QUEUE_PUSH_MANY = ("INSERT INTO skip_queue (unique_key, priority, data) SELECT * FROM unnest(%s::text[], "
                   "%s::integer[], %s::bytea[]) ON CONFLICT DO NOTHING")
QUEUE_FETCH = ("UPDATE skip_queue SET locked_until = now() + interval '300 seconds' WHERE seq IN ("
               "SELECT seq FROM skip_queue WHERE locked_until IS NULL OR locked_until < now() "
               "ORDER BY priority DESC, seq LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING seq, unique_key, data")
QUEUE_DONE = "DELETE FROM skip_queue WHERE seq = %s"
QUEUE_DONE_MANY = "DELETE FROM skip_queue WHERE seq = ANY(%s)"


class SkipQueue:
    """The queue's client: one connection in autocommit, each call one statement (prepared by psycopg)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True, prepare_threshold=0)

    def push(self, url: str, priority: int, data: bytes) -> bool:
        return self.conn.execute(QUEUE_PUSH, (url, priority, data)).rowcount == 1

    def push_many(self, items: list[tuple[str, int, bytes]]) -> int:
        columns = [list(c) for c in zip(*items, strict=True)]
        return self.conn.execute(QUEUE_PUSH_MANY, columns).rowcount

    def fetch(self, count: int) -> list[tuple[int, str, bytes]]:
        return self.conn.execute(QUEUE_FETCH, (count,)).fetchall()

    def done(self, seq: int) -> None:
        self.conn.execute(QUEUE_DONE, (seq,))

    def done_many(self, seqs: list[int]) -> None:
        self.conn.execute(QUEUE_DONE_MANY, (seqs,))

    def close(self) -> None:
        self.conn.close()


# ---------------------------------------------------------------------- the calls
def quiet() -> None:
    logging.getLogger("diskfrontier").setLevel(logging.ERROR)


def requests_of(urls: list[str], priorities: list[int]) -> list[Any]:
    from diskfrontier import Request

    return [Request(u, priority=p) for u, p in zip(urls, priorities, strict=True)]


def queue_items(urls: list[str], priorities: list[int]) -> list[tuple[str, int, bytes]]:
    """What the queue stores for each request: its URL as unique key, its priority and its record."""
    from diskfrontier.request.codec import encode_request

    return [(r.url, r.priority, encode_request(r)) for r in requests_of(urls, priorities)]


def open_side(side: str, urls: dict[str, str]) -> Any:
    if side == "postgres":
        from diskfrontier import PostgresFrontier

        return PostgresFrontier(urls["postgres"], crawl=CRAWL)
    if side == "redis":
        from diskfrontier import RedisFrontier

        return RedisFrontier(urls["redis"], crawl=CRAWL)
    return SkipQueue(urls["postgres"])


def step_of(side: str, op: str, client: Any, share: list[Any]) -> Callable[[], int]:
    """The timed part of one worker: calls on its share (pushes) or until nothing is left (pops); how many."""
    if side == "queue":
        if op == "push":
            return lambda: sum(client.push(*item) for item in share)
        if op == "push_many":
            return lambda: sum(client.push_many(share[at:at + 500]) for at in range(0, len(share), 500))
        count = 1 if op == "pop_done" else 100

        def drain_queue() -> int:
            done = 0
            while rows := client.fetch(count):
                if count == 1:
                    client.done(rows[0][0])
                else:
                    client.done_many([row[0] for row in rows])
                done += len(rows)
            return done
        return drain_queue
    if op == "push":
        return lambda: sum(client.push(r) for r in share)
    if op == "push_many":
        return lambda: sum(client.push_many(share[at:at + 500]) for at in range(0, len(share), 500))

    def drain() -> int:
        done = 0
        if op == "pop_done":
            while (r := client.pop()) is not None:
                client.done(r)
                done += 1
        else:
            while got := client.pop_many(100):
                client.done_many(got)
                done += len(got)
        return done
    return drain


def worker(side: str, op: str, urls: dict[str, str], share: list[Any], start: Any, out: Any) -> None:
    quiet()
    client = open_side(side, urls)
    step = step_of(side, op, client, share)
    start.wait(timeout=120)
    began = time.perf_counter()
    count = step()
    out.put((began, time.perf_counter(), count))
    client.close()


def fill(side: str, urls: dict[str, str], n: int) -> None:
    """N requests stored, for the pop rows."""
    names, priorities = workload(n)
    client = open_side(side, urls)
    if side == "queue":
        items = queue_items(names, priorities)
        for at in range(0, n, 500):
            client.push_many(items[at:at + 500])
    else:
        client.push_many(requests_of(names, priorities))
    client.close()


def reset(side: str, pg: PgCluster, redis: RedisServer) -> None:
    if side == "redis":
        redis.flush()
        return
    pg.reset()
    if side == "queue":
        pg.sql(QUEUE_TABLE)


def run_calls(side: str, op: str, procs: int, n: int, pg: PgCluster, redis: RedisServer) -> float:
    """Calls per second (requests per second for the batch rows) of ``procs`` processes doing ``op`` on N."""
    import multiprocessing

    urls = {"postgres": pg.url, "redis": redis.url}
    reset(side, pg, redis)
    names, priorities = workload(n)
    shares: list[list[Any]] = [[] for _ in range(procs)]
    if op.startswith("push"):
        items = queue_items(names, priorities) if side == "queue" else requests_of(names, priorities)
        shares = [items[i::procs] for i in range(procs)]
    else:
        fill(side, urls, n)
    context = multiprocessing.get_context("fork")
    start, out = context.Barrier(procs + 1), context.Queue()
    workers = [context.Process(target=worker, args=(side, op, urls, shares[i], start, out)) for i in range(procs)]
    for proc in workers:
        proc.start()
    start.wait(timeout=120)
    ends = [out.get(timeout=1200) for _ in workers]
    for proc in workers:
        proc.join()
    total = sum(count for _, _, count in ends)
    if total != n:
        raise RuntimeError(f"{side} {op} x{procs}: {total} requests of {n}")
    return n / (max(end for _, end, _ in ends) - min(began for began, _, _ in ends))


def bench_calls(pg: PgCluster, redis: RedisServer, n: int, repeat: int) -> dict[str, list[float]]:
    runs: dict[str, list[float]] = {}
    for rep in range(repeat):
        for op, _label in OPS:
            for procs in (1, WORKERS):
                for side in SIDES if rep % 2 == 0 else SIDES[::-1]:
                    runs.setdefault(f"{side} {op} {procs}", []).append(run_calls(side, op, procs, n, pg, redis))
        print(f"  calls: repeat {rep + 1}/{repeat} done", file=sys.stderr, flush=True)
    return runs


# ---------------------------------------------------------------------- disk and memory
def pg_sizes(pg: PgCluster) -> tuple[int, int]:
    """(bytes of the seen table and its index, bytes of every other table and index of the crawl)."""
    pg.sql("VACUUM ANALYZE")
    rows = pg.sql("SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace s ON "
                  "s.oid = c.relnamespace WHERE s.nspname = %s AND c.relkind = 'r'", (f"df_{CRAWL}",))
    seen = sum(size for name, size in rows if name == "seen")
    return seen, sum(size for name, size in rows if name != "seen")


def batches(n: int, size: int = 10_000) -> Iterator[tuple[int, list[Any]]]:
    for at in range(0, n, size):
        names, priorities = workload_slice(at, min(at + size, n))
        yield at + len(names), requests_of(names, priorities)


def workload_slice(start: int, stop: int) -> tuple[list[str], list[int]]:
    """URLs start..stop of the workload (as ``workload`` makes them), without making the others."""
    urls = [f"https://host{i % HOSTS}.example.com/catalog/{i // HOSTS}/item-{i}.html?ref=list&page={i % 50}"
            for i in range(start, stop)]
    return urls, [-(i % 6) for i in range(start, stop)]


def drain_tenth(frontier: Any, n: int) -> None:
    """Pop and finish a tenth of the crawl's N (the job directory, which has no pop_many, one at a time)."""
    left = n // 10
    if not hasattr(frontier, "pop_many"):
        while left > 0 and (request := frontier.pop()) is not None:
            frontier.done(request)
            left -= 1
        return
    while left > 0 and (got := frontier.pop_many(min(1000, left))):
        frontier.done_many(got)
        left -= len(got)


def bench_disk(pg: PgCluster, redis: RedisServer, n: int, samples: int) -> dict[str, Any]:
    from diskfrontier import Frontier, PostgresFrontier, RedisFrontier

    out: dict[str, Any] = {"rss": []}
    pg.reset()
    every = max(n // samples, 1)
    started = time.perf_counter()
    with PostgresFrontier(pg.url, crawl=CRAWL) as frontier:
        out["rss"].append((0, pg.memory(), 0))
        next_sample = every
        for pushed, batch in batches(n):
            frontier.push_many(batch)
            if pushed >= next_sample or pushed == n:
                size = sum(row[0] for row in pg.sql(
                    "SELECT pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace s ON s.oid = "
                    "c.relnamespace WHERE s.nspname = %s AND c.relkind = 'r'", (f"df_{CRAWL}",)))
                out["rss"].append((pushed, pg.memory(), size))
                next_sample += every
        out["pg push s"] = time.perf_counter() - started
        drain_tenth(frontier, n)
        out["pg s"] = time.perf_counter() - started
        pending = len(frontier)
    out["pg seen"], out["pg rest"] = pg_sizes(pg)
    out["pending"] = pending
    pg.reset()
    # the job directory
    folder = tempfile.mkdtemp(prefix="bench-pg-jobdir-")
    try:
        with Frontier(os.path.join(folder, "job")) as frontier:
            for _pushed, batch in batches(n):
                frontier.push_many(batch)
            drain_tenth(frontier, n)
        job = os.path.join(folder, "job")
        sizes = {name: os.path.getsize(os.path.join(job, name)) for name in os.listdir(job)
                 if os.path.isfile(os.path.join(job, name))}
        total = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(job) for f in files)
        out["job seen"] = sizes.get("requests.seen", 0)
        out["job rest"] = total - out["job seen"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # Redis
    redis.flush()
    time.sleep(0.2)
    before = redis.used_memory()
    with RedisFrontier(redis.url, crawl=CRAWL) as frontier:
        for _pushed, batch in batches(n):
            frontier.push_many(batch)
        drain_tenth(frontier, n)
    time.sleep(0.2)
    used = redis.used_memory() - before
    seen = 0
    for pattern in ("s:*", "k:*"):
        for key in redis.client.scan_iter(match=f"df:{{{CRAWL}}}:{pattern}", count=1000):
            seen += redis.client.memory_usage(key, samples=0) or 0
    out["redis seen"], out["redis rest"] = seen, used - seen
    redis.flush()
    return out


# ---------------------------------------------------------------------- tables
def verdict(ratio: float, goal: float) -> str:
    return f">= {goal:.1f}x  {'MET' if ratio >= goal else 'MISSED'}"


def calls_table(runs: dict[str, list[float]], n: int, repeat: int) -> dict[str, Any]:
    rows = []
    for procs in (1, WORKERS):
        for op, label in OPS:
            figures = [statistics.median(runs[f"{side} {op} {procs}"]) for side in SIDES]
            ratio = figures[0] / figures[2]
            who = "1 process" if procs == 1 else f"{procs} processes"
            rows.append([f"{label}, {who}", *figures, figures[0] / figures[1], ratio, verdict(ratio, GOAL)])
    return benchresults.table(
        f"Per call: {n:,} requests over {HOSTS} hosts; requests/s, median of {repeat}",
        [("operation", None), ("PostgresFrontier", "{:,.0f}"), ("RedisFrontier", "{:,.0f}"),
         ("SKIP LOCKED queue", "{:,.0f}"), ("pg / redis", "{:.2f}x"), ("pg / queue", "{:.2f}x"), ("goal", None)],
        rows,
        ["SKIP LOCKED queue: Crawlee's SQL design on the same server: one table, a unique key deduping at insert, "
         "a fetch that locks the first row with FOR UPDATE SKIP LOCKED and sets its lock's expiry (one UPDATE ... "
         "WHERE seq IN (SELECT ... LIMIT k FOR UPDATE SKIP LOCKED) RETURNING, prepared), DELETE at done; no host "
         "awareness, no politeness, no counters.",
         "PostgresFrontier: the crawl's defaults (a lease of 30 s renewed by a thread, LIFO, no delay); each call one "
         "function call, one transaction. RedisFrontier: its defaults (ack='deferred': a done rides on the next "
         "pop).",
         f"{WORKERS} processes: each does its share (push rows) or pops until none is left, on one crawl; "
         "aggregate = N / (last end - first start). Batch rows count requests, not calls."])


def disk_tables(disk: dict[str, Any], n: int) -> list[dict[str, Any]]:
    pending = disk["pending"]
    sizes = benchresults.table(
        f"Disk and memory: {n:,} URLs pushed over {HOSTS} hosts (push_many), {n // 10:,} drained (pop_many + "
        f"done_many): {pending:,} pending; bytes",
        [("figure", None), ("PostgreSQL, on disk", "{:,.1f}"), ("job directory, on disk", "{:,.1f}"),
         ("Redis, in memory", "{:,.1f}")],
        [["per seen URL", disk["pg seen"] / n, disk["job seen"] / n, disk["redis seen"] / n],
         ["per pending request", disk["pg rest"] / pending, disk["job rest"] / pending,
          disk["redis rest"] / pending]],
        ["PostgreSQL: pg_total_relation_size after VACUUM ANALYZE; per seen URL: the seen table and its primary "
         "key; per pending request: every other table of the crawl with its indexes (requests, hosts, leases, "
         "...), over the pending requests. Write-ahead log not counted.",
         "job directory: requests.seen per seen URL, every other file over the pending requests. Redis: INFO "
         "used_memory after - before; per seen URL: MEMORY USAGE of the seen sets; the rest over the pending.",
         f"PostgreSQL: {disk['pg push s']:.0f} s to push, {disk['pg s']:.0f} s with the drain: the issue's 10^7 "
         f"pushed and 10^6 drained take about {disk['pg s'] * 1e7 / n / 60:.0f} minutes at that rate "
         f"(--disk-n 10000000 --only disk)."])
    rss = benchresults.table(
        "PostgreSQL server memory as the crawl grows (the sum of the proportional set sizes of its processes)",
        [("URLs pushed", "{:,.0f}"), ("server memory, MB", "{:,.1f}"), ("crawl's tables on disk, MB", "{:,.1f}")],
        [[pushed, memory / 2**20, size / 2**20] for pushed, memory, size in disk["rss"]],
        ["Bounded by shared_buffers and each backend's own memory: the tables grow on disk, the server's memory "
         "stops growing once shared_buffers is filled."])
    return [sizes, rss]


def show(table: dict[str, Any]) -> None:
    """Print a table as text, each number with its column's format."""
    cells = [[benchresults_cell(v, f) for v, f in zip(row, table["formats"], strict=True)] for row in table["rows"]]
    widths = [max(len(str(c)) for c in col) for col in zip(table["columns"], *cells, strict=True)]
    print(f"\n{table['title']}")
    for row in [table["columns"], *cells]:
        print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths,
                                                                                                     strict=True))))
    for note in table["notes"]:
        print(f"   {note}")


def benchresults_cell(value: Any, fmt: str | None) -> str:
    if value is None:
        return "-"
    if fmt is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt.format(value)
    return str(value)


# ---------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["calls", "disk"], help="one part (default: both)")
    parser.add_argument("-n", type=int, default=None, help="requests a throughput run (default 5,000)")
    parser.add_argument("--disk-n", type=int, default=None, help="URLs pushed for the disk part (default 10^6)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--samples", type=int, default=10, help="server memory samples as the crawl grows")
    parser.add_argument("--quick", action="store_true", help="N 2,000 and 3x10^5 URLs on disk")
    parser.add_argument("--synchronous-commit", default="off", choices=["on", "off"])
    parser.add_argument("--shared-buffers", default="64MB")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "/usr/bin/redis-server")
    benchresults.add_argument(parser, "bench_postgres")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    n = args.n or (2_000 if args.quick else 5_000)
    disk_n = args.disk_n or (300_000 if args.quick else 1_000_000)
    quiet()
    started = time.perf_counter()
    tables: list[dict[str, Any]] = []
    figures: dict[str, Any] = {}
    with PgCluster(args.synchronous_commit, args.shared_buffers) as pg, RedisServer(args.redis_server, None) as redis:
        figures["servers"] = [pg.describe(), redis.describe()]
        print("\n".join(figures["servers"]))
        print(f"Python {sys.version.split()[0]}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
              f"goal: PostgresFrontier >= {GOAL:.0f}x the SKIP LOCKED queue per call", flush=True)
        if args.only in (None, "calls"):
            figures["calls"] = runs = bench_calls(pg, redis, n, args.repeat)
            tables.append(calls_table(runs, n, args.repeat))
            show(tables[-1])
        if args.only in (None, "disk"):
            figures["disk"] = disk = bench_disk(pg, redis, disk_n, args.samples)
            for table in disk_tables(disk, disk_n):
                tables.append(table)
                show(table)
    print(f"\n(took {time.perf_counter() - started:.0f} s)")
    benchresults.write(args.results, "bench_postgres", {**vars(args), "n": n, "disk_n": disk_n}, tables, figures)


if __name__ == "__main__":
    main()
