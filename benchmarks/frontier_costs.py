"""What one request and one host cost, for ``bench_frontier.py``: the floors, politeness, memory per host.

* Floors: CPU time (``time.process_time``) per call of the steps a push or a pop+done cannot
  do without: a fingerprint (Scrapy's and diskfrontier's), encoding one request, one
  ``os.write`` of a record-sized buffer to an ``O_APPEND`` file and one ``os.pread`` of it.
  (The raw queuelib pop is measured with the queuelib contender in ``bench_frontier.py``.)
* Politeness: pop+done throughput of a ``Frontier(per_host=1)`` over 10^5 hosts against the
  same directory popped with politeness off.
* Memory of a host politeness is working on: in a child process, a ``Frontier(delay=1.0)``
  over H hosts (two pending requests each) has one request of every host popped and done;
  the growth of its RSS, divided by H. A control does as many pop+done with politeness off:
  what the pops and dones themselves leave in memory.

The job directory of the last two (2 requests on each of H hosts) is built once per run
(``hosts_source``) and copied for every measurement, so that each starts from the same
clean directory.

    python benchmarks/frontier_costs.py --child hostmem JOBDIR HOSTS 1.0 0   # one memory measurement
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

from diskfrontier import Frontier, Request
from diskfrontier.request.codec import encode_request

CHUNK = 10_000  # requests built and pushed at a time


def host_url(i: int, hosts: int) -> str:
    return f"https://host{i % hosts}.example/catalog/{i // hosts}/item-{i}.html?ref=list&page={i % 50}"


def cpu_us(func: Any, items: list) -> float:
    """CPU microseconds per call of ``func`` over ``items`` (``time.process_time``)."""
    started = time.process_time()
    for item in items:
        func(item)
    return (time.process_time() - started) / len(items) * 1e6


# ---------------------------------------------------------------------- floors
def floors(urls: list[str], priorities: list[int], work: str) -> dict[str, float]:
    """CPU µs per request of each floor, on the benchmark's URLs (fresh objects for each)."""
    from scrapy import Request as ScrapyRequest
    from scrapy.utils.request import fingerprint as scrapy_fingerprint

    out: dict[str, float] = {}
    scrapy_requests = [ScrapyRequest(u) for u in urls]
    out["fp_scrapy"] = cpu_us(scrapy_fingerprint, scrapy_requests)
    del scrapy_requests

    fresh = [Request(u) for u in urls]
    out["fp_df"] = cpu_us(lambda r: r.fingerprint, fresh)
    del fresh

    requests = [Request(u, priority=p) for u, p in zip(urls, priorities, strict=True)]
    for r in requests:  # encoding alone: the fingerprint is computed first
        r.fingerprint  # noqa: B018
    started = time.process_time()
    records = [encode_request(r) for r in requests]
    out["encode"] = (time.process_time() - started) / len(requests) * 1e6
    size = int(statistics.median(len(r) for r in records))
    out["record_bytes"] = size
    del requests, records

    path = os.path.join(work, "floor-append")
    buffer = b"\x00" * size
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        out["write"] = cpu_us(lambda _i: os.write(fd, buffer), list(range(len(urls))))
    finally:
        os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    try:
        offsets = [i * size for i in range(len(urls))]
        out["pread"] = cpu_us(lambda offset: os.pread(fd, size, offset), offsets)
    finally:
        os.close(fd)
    os.unlink(path)
    return out


# ---------------------------------------------------------------------- the 10^5-host directory
def hosts_source(path: str, hosts: int, per_host_requests: int = 2) -> int:
    """Build the directory the politeness figures copy: ``per_host_requests`` on each of ``hosts``."""
    n = hosts * per_host_requests
    frontier = Frontier(path)
    try:
        for start in range(0, n, CHUNK):
            stop = min(n, start + CHUNK)
            frontier.push_many(Request(host_url(i, hosts), priority=-(i % 6)) for i in range(start, stop))
        pending = len(frontier)
    finally:
        frontier.close()
    return pending


def polite_rates(source: str, work: str) -> dict[str, float]:
    """pop+done/s of a copy of ``source`` with ``per_host=1`` and of another with politeness off."""
    out: dict[str, float] = {}
    for key, per_host in (("polite", 1), ("off", None)):
        path = os.path.join(work, f"polite-{key}")
        shutil.copytree(source, path)
        frontier = Frontier(path, per_host=per_host)
        try:
            pop, done = frontier.pop, frontier.done
            popped = 0
            wall, cpu = time.perf_counter(), time.process_time()
            while (r := pop()) is not None:
                done(r)
                popped += 1
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            left = len(frontier)
        finally:
            frontier.close()
        if left:
            raise RuntimeError(f"pop() returned None with {left:,} requests pending (per_host={per_host})")
        out[key] = popped / wall
        out[f"{key}_cpu_us"] = cpu / popped * 1e6
        out["popped"] = popped
        shutil.rmtree(path, ignore_errors=True)
    return out


def host_memory(source: str, work: str, hosts: int) -> dict[str, float]:
    """RSS per host politeness works on, each measured by a child process on a copy of ``source``:
    with delay=1.0 (the figure), then with politeness off and as many pop+done (a control: what the
    same pops and dones cost without politeness)."""
    polite = _memory_child(source, work, hosts, 1.0, 0)
    control = _memory_child(source, work, hosts, 0.0, int(polite["pops"]))
    return {**polite, "control_per_host": control["per_host"]}


def _memory_child(source: str, work: str, hosts: int, delay: float, pops: int) -> dict[str, float]:
    path = os.path.join(work, "hostmem")
    shutil.copytree(source, path)
    try:
        argv = [sys.executable, os.path.abspath(__file__), "--child", "hostmem", path, *map(str, (hosts, delay, pops))]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    finally:
        shutil.rmtree(path, ignore_errors=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the child exited {done.returncode}: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child_hostmem(path: str, hosts: int, delay: float, pops: int) -> dict[str, float]:
    """Open ``path`` with ``delay``; pop and finish requests until every host has had one (or, given
    ``pops``, that many); the RSS growth from just after the open, per host."""
    touched = bytearray(hosts)  # made before the first measurement: it is not the frontier's memory
    prefix = len("https://host")
    frontier = Frontier(path, delay=delay)
    gc.collect()
    before = _rss()
    popped = count = 0
    started = time.perf_counter()
    while (count < hosts) if not pops else (popped < pops):
        request = frontier.pop()
        if request is None:
            break
        popped += 1
        index = int(request.url[prefix:request.url.index(".", prefix)])
        if not touched[index]:
            touched[index] = 1
            count += 1
        frontier.done(request)
    seconds = time.perf_counter() - started
    request = None
    gc.collect()
    after = _rss()
    frontier.close()
    return {"per_host": (after - before) / hosts, "before": before, "after": after, "touched": count,
            "pops": popped, "seconds": seconds}


if __name__ == "__main__":
    if sys.argv[1:3] == ["--child", "hostmem"] and len(sys.argv) == 7:
        print(json.dumps(child_hostmem(sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]))))
    else:
        sys.exit("usage: frontier_costs.py --child hostmem JOBDIR HOSTS DELAY POPS (run by bench_frontier.py)")

