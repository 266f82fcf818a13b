"""How long a Redis crawl stalls when one of its workers is killed: two real ``scrapy crawl``
processes share one crawl on a real redis-server; once the first holds leases and a third of the
site is fetched it gets SIGKILL; the survivor finishes the crawl. Printed: seconds from the kill
to the end of the crawl, against the lease (``DISKFRONTIER_LEASE``, default 30 s: renewed in the
background by each live worker, so it can be short).

    python benchmarks/bench_killed_worker.py                     # the default lease
    python benchmarks/bench_killed_worker.py --lease 300         # the lease of earlier releases

Needs redis-server on the PATH and the test kit (tests/kits) for the crawl child.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "kits"))

import redis  # noqa: E402
from scrapykit import finish, start_crawl  # noqa: E402

from diskfrontier import RedisFrontier  # noqa: E402
from diskfrontier.run.demo import SyntheticSite  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def leases_of(client: redis.Redis, pid: int) -> int:
    return sum(1 for owner in client.hvals("df:{site}:owner") if owner.decode().split(":")[0].endswith(f"-{pid}"))


def run(pages: int, lease: float | None, work: str) -> dict[str, float]:
    port = free_port()
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not on the PATH (Debian: apt-get install redis-server)")
    server = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no"], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis(port=port)
    try:
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        settings = [f"DISKFRONTIER_URL={url}", "DISKFRONTIER_CRAWL=site"]
        if lease is not None:
            settings.append(f"DISKFRONTIER_LEASE={lease:g}")
        with SyntheticSite(pages, delay=0.01) as site:
            started = time.monotonic()
            procs = [start_crawl(os.path.join(work, f"p{n}"), site, "diskfrontier", os.path.join(work, f"p{n}.json"),
                                 *settings) for n in range(2)]
            while len(site.fetched()) < pages // 3 or not leases_of(client, procs[0].pid):
                if time.monotonic() - started > 300:
                    raise RuntimeError("the crawl did not get going")
                time.sleep(0.002)
            orphaned = leases_of(client, procs[0].pid)
            procs[0].kill()
            killed = time.monotonic()
            procs[0].wait()
            log = finish(procs[1], timeout=3600)
            if procs[1].returncode != 0:
                raise RuntimeError(log[-2000:])
            ended = time.monotonic()
            fetched = set(site.fetched())
        with RedisFrontier(url, crawl="site") as frontier:
            stats = frontier.stats()
        return {"kill_to_end": ended - killed, "total": ended - started, "orphaned": orphaned,
                "reclaimed": stats["reclaimed"], "never": pages - len(fetched & {f"/page/{n}" for n in range(pages)})}
    finally:
        server.kill()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1500)
    parser.add_argument("--lease", type=float, default=None, help="DISKFRONTIER_LEASE (default: the scheduler's)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    shown = "default (30)" if args.lease is None else f"{args.lease:g}"
    print(f"two scrapy crawl processes, {args.pages:,} pages, lease {shown} s; the first SIGKILLed at a third")
    print(f"{'run':>4} {'kill -> end (s)':>16} {'whole crawl (s)':>16} {'leases orphaned':>16} {'reclaimed':>10} "
          f"{'never fetched':>14}")
    for n in range(args.repeat):
        work = tempfile.mkdtemp()
        try:
            r = run(args.pages, args.lease, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"{n + 1:>4} {r['kill_to_end']:>16.1f} {r['total']:>16.1f} {r['orphaned']:>16.0f} "
              f"{r['reclaimed']:>10.0f} {r['never']:>14.0f}")


if __name__ == "__main__":
    main()
