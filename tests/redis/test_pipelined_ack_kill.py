"""A pipelined done that returned reaches Redis even when its process is SIGKILLed right after: its bytes were
in the kernel's socket buffer, which the kernel still sends. A child pops N, does half of them with
``ack="pipelined"`` (printing each once done() returned) and is killed; every printed one is done in Redis,
and the others come back once their leases run out."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time

from diskfrontier import RedisFrontier

LEASE = 1.0

CHILD = textwrap.dedent("""
    import os, signal, sys
    from diskfrontier import Request, RedisFrontier
    url, crawl, n, kill_after, prefetch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    f = RedisFrontier(url, crawl=crawl, lease=float(sys.argv[6]), ack="pipelined", prefetch=prefetch)
    f.push_many(Request(f"https://h{i % 7}.example/p{i}") for i in range(n))
    taken = [f.pop() for _ in range(n)]
    assert None not in taken
    print("popped", flush=True)
    for k, request in enumerate(taken[:n // 2]):
        if k == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        f.done(request)
        print(request.url, flush=True)
    if kill_after >= 0:
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdin.read()  # the parent kills it
""")


def start(url: str, crawl: str, n: int, kill_after: int, prefetch: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, url, crawl, str(n), str(kill_after), str(prefetch),
                             str(LEASE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def check(url: str, crawl: str, n: int, printed: list[str], extra: int) -> None:
    """Every printed URL is done; at most ``extra`` more were (a done that returned just before the kill,
    not yet printed); every other request comes back once the child's leases ran out."""
    with RedisFrontier(url, crawl=crawl) as other:
        done = other.stats()["done"]
        left = {r.url for r in other.pending_requests()}
        assert not left & set(printed), f"{crawl}: dones that returned are not in Redis: {sorted(left & set(printed))}"
        assert len(printed) <= done <= len(printed) + extra, (crawl, len(printed), done)
        assert len(left) == n - done
        back: list[str] = []
        deadline = time.monotonic() + 10 * LEASE
        while len(back) < n - done and time.monotonic() < deadline:
            request = other.pop(timeout=LEASE)
            if request is not None:
                back.append(request.url)
                other.done(request)
        assert sorted(back) == sorted(left) and other.finished


def test_every_pipelined_done_that_returned_before_a_sigkill_is_in_redis(redis_url, crawl_name):
    n = 16
    runs = []
    for kill_after in range(n // 2 + 1):  # killed right after the k-th done returned (and was printed)
        crawl = f"{crawl_name}-k{kill_after}"
        child = start(redis_url, crawl, n, kill_after, prefetch=1 + kill_after % 5)
        out, _ = child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL
        lines = out.split()
        assert lines[0] == "popped"
        assert len(lines[1:]) == min(kill_after, n // 2)
        runs.append((crawl, lines[1:]))
    time.sleep(LEASE)
    for crawl, printed in runs:
        check(redis_url, crawl, n, printed, extra=0)


def test_pipelined_dones_printed_before_a_sigkill_from_outside_are_in_redis(redis_url, crawl_name):
    n = 400
    rng = random.Random(7)
    runs = []
    for run in range(12):
        crawl = f"{crawl_name}-r{run}"
        child = start(redis_url, crawl, n, -1, prefetch=(1, 8)[run % 2])
        assert child.stdout is not None and child.stdout.readline().strip() == "popped"
        printed = [child.stdout.readline().strip() for _ in range(rng.randrange(n // 2))]
        child.send_signal(signal.SIGKILL)
        child.wait()
        printed += [line.strip() for line in child.stdout.read().split("\n") if line.strip()]  # what was left
        runs.append((crawl, printed))
    time.sleep(LEASE)
    for crawl, printed in runs:
        check(redis_url, crawl, n, printed, extra=1)
