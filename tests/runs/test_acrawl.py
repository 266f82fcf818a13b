"""acrawl() and AsyncFrontier: an httpx crawl of a loopback site inside the caller's event loop, over a
job directory and a real redis-server; the loop stays free; the stats are crawl()'s; setup's client
lives exactly as long as the run; real SIGINT once and twice in a child running asyncio.run()."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import httpx
import pytest
from paths import KITS
from popkit import atake

from diskfrontier import AsyncFrontier, Frontier, RedisFrontier, Request, acrawl, crawl
from diskfrontier.jobdir.reader import pending_requests
from diskfrontier.run.demo import SyntheticSite

CHILD = os.path.join(KITS, "acrawl_child.py")
LINK = re.compile(r'<a href="([^"]+)" data-priority="(-?\d+)">')


def links(base: str, page: str) -> list[Request]:
    return [Request(base + href, priority=int(priority)) for href, priority in LINK.findall(page)]


def page_number(url: str) -> int:
    return int(urlsplit(url).path.rsplit("/", 1)[1])


# ------------------------------------------------------------------ the same crawl, both runners, both backends
def open_backend(backend: str, tmp_path, redis_url: str | None, name: str):
    if backend == "jobdir":
        return Frontier(tmp_path / name)
    assert redis_url is not None
    return RedisFrontier(redis_url, crawl=name)


@pytest.fixture(params=["jobdir", "redis"])
def backend(request):
    if request.param == "redis":
        return request.param, request.getfixturevalue("redis_url"), request.getfixturevalue("crawl_name")
    return request.param, None, "c"


def test_acrawl_gives_the_stats_crawl_gives_on_the_same_crawl(tmp_path, backend):
    kind, redis_url, name = backend
    pages = 120
    with SyntheticSite(pages) as site:
        seeds = [Request(f"{site.base}/page/0"), Request(f"{site.base}/page/{pages + 1}"),
                 Request(f"{site.base}/page/{pages + 2}")]  # two 404s: retried twice each, then failed

        def handler(request, frontier):
            with urllib.request.urlopen(request.url, timeout=30) as response:  # noqa: S310 - loopback
                frontier.push_many(links(site.base, response.read().decode()))

        async def ahandler(request, frontier, client):
            response = await client.get(request.url)
            response.raise_for_status()
            await frontier.push_many(links(site.base, response.text))

        results = {}
        for runner in ("crawl", "acrawl"):
            with open_backend(kind, tmp_path, redis_url, f"{name}-{runner}") as frontier:
                frontier.push_many(seeds)
                if runner == "crawl":
                    stats = crawl(frontier, handler, workers=8, retries=2, backoff=0.01, progress=False)
                else:
                    stats = asyncio.run(acrawl(frontier, ahandler, workers=8, retries=2, backoff=0.01,
                                               progress=False, setup=httpx.AsyncClient))
                counters = frontier.stats()
                results[runner] = ((stats.handled, stats.done, stats.retried, stats.failed, stats.stopped_by),
                                   (counters["done"], counters["failed"], counters["pending"], counters["seen"]),
                                   sorted(page_number(f.request.url) for f in frontier.failed()))
        fetched = site.fetched()
    assert results["crawl"] == results["acrawl"], results
    assert results["acrawl"][0] == (pages + 6, pages, 4, 2, "finished")
    assert results["acrawl"][2] == [pages + 1, pages + 2]
    assert all(fetched[f"/page/{n}"] == 2 for n in range(pages))  # once by each runner


# ------------------------------------------------------------------ the loop stays free
async def largest_gap(work) -> tuple[float, int]:
    """Run ``work`` beside a ticker task that sleeps 1 ms at a time: the largest gap between its
    ticks (how long the loop was kept from it), and how many ticks it made."""
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.001)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    try:
        await work
    finally:
        tick.cancel()
    return max(gaps), len(gaps)


def test_acrawl_leaves_the_callers_loop_free_while_the_frontier_waits_and_writes(tmp_path):
    """A polite crawl (one host, a delay between its requests): a frontier called on the loop blocks it
    for the delay at each pop (measured first, as the baseline); acrawl keeps the ticker's gaps far below."""
    delay, count = 0.25, 6

    def seeded(path):
        frontier = Frontier(path, delay=delay)
        frontier.push_many(Request(f"https://polite.example/{i}") for i in range(count))
        return frontier

    async def blocking_crawl(frontier) -> None:  # what a frontier called on the loop does to it
        while (request := frontier.pop(timeout=None)) is not None:
            await asyncio.sleep(0)
            frontier.done(request)

    handled: list[str] = []

    async def handler(request, frontier):
        await asyncio.sleep(0)
        handled.append(request.url)

    async def main():
        with seeded(tmp_path / "blocking") as frontier:
            blocked, _ = await largest_gap(blocking_crawl(frontier))
        with seeded(tmp_path / "async") as frontier:
            started = time.monotonic()
            free, ticks = await largest_gap(acrawl(frontier, handler, workers=4, progress=False))
            return blocked, free, ticks, time.monotonic() - started

    blocked, free, ticks, seconds = asyncio.run(main())
    print(f"largest gap: frontier on the loop {blocked * 1000:.1f} ms, acrawl {free * 1000:.1f} ms "
          f"({ticks} ticks in {seconds:.2f} s)")
    assert len(handled) == count
    assert blocked >= delay * 0.9  # the baseline: the loop was held for a host's delay
    assert free < blocked / 4, (free, blocked)
    assert ticks > seconds / blocked  # the ticker ran all through the crawl, not only between blocks


def test_crawl_inside_a_running_loop_points_at_acrawl(tmp_path):
    async def handler(request, frontier):
        pass

    async def main():
        with Frontier(tmp_path / "job") as frontier, pytest.raises(RuntimeError, match=r"await acrawl\("):
            crawl(frontier, handler, progress=False)

    asyncio.run(main())


# ------------------------------------------------------------------ setup: a client for the run's lifetime
def test_the_setup_client_is_open_for_every_handler_call_and_closed_after_the_last(tmp_path):
    events: list[str] = []
    made: list[httpx.AsyncClient] = []

    @contextlib.asynccontextmanager
    async def setup():
        async with httpx.AsyncClient() as client:
            made.append(client)
            events.append("open")
            yield client
        events.append("closed")

    with SyntheticSite(40, delay=0.01) as site:
        async def handler(request, frontier, client):
            assert isinstance(frontier, AsyncFrontier) and client is made[-1]
            events.append("closed-during-call" if client.is_closed else "call")
            response = await client.get(request.url)
            await frontier.push_many(links(site.base, response.text))

        async def main():
            async with AsyncFrontier(tmp_path / "job") as frontier:
                await frontier.push(Request(f"{site.base}/page/0"))
                first = await acrawl(frontier, handler, workers=4, max_requests=10, setup=setup, progress=False)
                second = await acrawl(frontier, handler, workers=4, setup=setup, progress=False)
                return first, second, await frontier.finished()

        first, second, finished = asyncio.run(main())
    assert (first.stopped_by, first.handled, second.stopped_by, finished) == ("max_requests", 10, "finished", True)
    assert len(made) == 2 and all(client.is_closed for client in made)
    calls = ["call"] * 10
    assert events == ["open", *calls, "closed", "open", *["call"] * 30, "closed"]


def test_a_cancelled_acrawl_cancels_its_tasks_closes_the_client_and_loses_nothing(tmp_path):
    closed = asyncio.Event()
    in_hand: list[str] = []

    @contextlib.asynccontextmanager
    async def setup():
        try:
            yield "client"
        finally:
            closed.set()

    async def handler(request, frontier, client):
        in_hand.append(request.url)
        await asyncio.sleep(3600)

    async def main():
        async with AsyncFrontier(tmp_path / "job") as frontier:
            await frontier.push_many(Request(f"https://a.example/{i}") for i in range(10))
            run = asyncio.create_task(acrawl(frontier, handler, workers=3, setup=setup, progress=False))
            while len(in_hand) < 3:
                await asyncio.sleep(0.005)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            return closed.is_set(), len(await frontier.in_flight()), await frontier.count()

    client_closed, in_flight, pending = asyncio.run(main())
    assert client_closed and (in_flight, pending) == (3, 7)
    with Frontier(tmp_path / "job") as frontier:  # given back at close
        assert len(frontier) == 10 and frontier.stats()["recovery"] == "clean"


# ------------------------------------------------------------------ AsyncFrontier itself
def test_async_frontier_keeps_the_contract_on_both_backends(tmp_path, backend):
    kind, redis_url, name = backend
    target, options = (str(tmp_path / "job"), {}) if kind == "jobdir" else (redis_url, {"crawl": name})

    async def main():
        async with AsyncFrontier(target, **options) as frontier:
            assert await frontier.push(Request("https://a.example/1"))
            assert not await frontier.push(Request("https://a.example/1"))  # a duplicate
            assert await frontier.push_many(Request(f"https://b.example/{i}") for i in range(3)) == 3
            assert await frontier.count() == 4
            got = [await atake(frontier) for _ in range(4)]
            assert await frontier.pop() is None and await frontier.pop(timeout=0.01) is None
            assert len(await frontier.in_flight()) == 4 and await frontier.holds(got[0])
            await frontier.done(got[0])
            await frontier.retry(got[1], delay=3600)
            await frontier.fail(got[2], "boom")
            await frontier.done(got[3], refetch_after=3600)
            assert [f.error for f in await frontier.failed()] == ["boom"]
            stats = await frontier.stats()
            assert (stats["done"], stats["failed"], stats["delayed"]) == (2, 1, 2)
            ready = await frontier.next_ready()
            assert ready is not None and ready > time.time() + 3000
            assert await frontier.requeue_failed() == 1 and await frontier.count() == 3

            # a waiting pop wakes for a push made by another task, long before its timeout
            popped = await atake(frontier)
            await frontier.done(popped)
            waiting = asyncio.create_task(frontier.pop(timeout=30))
            await asyncio.sleep(0.05)
            pushed_at = time.monotonic()
            await frontier.push(Request("https://c.example/new"))
            request = await waiting
            woke = time.monotonic() - pushed_at
            assert request is not None
            assert request.url == "https://c.example/new" and woke < 30 / 2, woke  # at the push, not the timeout
            await frontier.done(request)

            # and for a host's delay running out: at next_ready, not after the whole timeout
            await frontier.set_delay("d.example", 0.3)
            await frontier.push_many([Request("https://d.example/1"), Request("https://d.example/2")])
            first = await atake(frontier)
            started = time.monotonic()
            second = await atake(frontier, timeout=30)
            waited = time.monotonic() - started
            assert {first.url, second.url} == {"https://d.example/1", "https://d.example/2"}
            assert 0.2 <= waited < 30 / 2, waited  # at the delay's end, not the timeout
            await frontier.done_many([first, second])

            await frontier.block("e.example", float("inf"))
            await frontier.push(Request("https://e.example/1"))
            assert await frontier.pop(timeout=0.05) is None
            host = await frontier.host("e.example")
            assert host is not None and host.blocked_until == float("inf")
            await frontier.unblock("e.example")
            await frontier.pause()
            assert await frontier.paused_since() is not None and await frontier.pop(timeout=0.05) is None
            await frontier.resume()
            request = await atake(frontier, timeout=5)
            assert request.url == "https://e.example/1"
            await frontier.done(request)
            before = await frontier.count()
            b_host = await frontier.host("b.example")
            assert b_host is not None
            b_pending = b_host.pending
            dropped = await frontier.drop(host="b.example", dry_run=True)
            assert dropped.count == b_pending >= 1 and await frontier.count() == before
            assert (await frontier.drop(host="b.example")).count == b_pending
            assert await frontier.count() == before - b_pending
            assert "b.example" in {h.host for h in await frontier.hosts()}
            return frontier

    frontier = asyncio.run(main())
    with pytest.raises(Exception, match="closed"):
        asyncio.run(frontier.count())


def test_a_pop_without_timeout_ends_when_nothing_can_come(tmp_path):
    async def main():
        async with AsyncFrontier(tmp_path / "job") as frontier:
            await frontier.push(Request("https://a.example/"))
            request = await atake(frontier, timeout=None)
            waiting = asyncio.create_task(frontier.pop(timeout=None))  # the one in flight may come back
            await asyncio.sleep(0.2)
            assert not waiting.done()
            await frontier.done(request)
            return await asyncio.wait_for(waiting, 5), await frontier.finished()

    assert asyncio.run(main()) == (None, True)


def test_bad_arguments_are_refused_with_the_name_of_acrawl(tmp_path):
    async def handler(request, frontier):
        pass

    async def main():
        with Frontier(tmp_path / "job") as frontier:
            with pytest.raises(TypeError, match=r"acrawl\(\): handler must be an async def"):
                await acrawl(frontier, lambda request, f: None)  # type: ignore[arg-type, return-value]
            with pytest.raises(ValueError, match=r"acrawl\(\): workers"):
                await acrawl(frontier, handler, workers=0)
            with pytest.raises(ValueError, match="timeout"):
                await AsyncFrontier(frontier).pop(timeout=-1)

    asyncio.run(main())


# ------------------------------------------------------------------ real signals in an asyncio.run() application
def child_target(tmp_path, backend) -> tuple[str, list[str]]:
    """The child's TARGET and its options: a job directory, or the test's Redis crawl."""
    kind, redis_url, name = backend
    if kind == "jobdir":
        return str(tmp_path / "job"), []
    return redis_url, [f"crawl={json.dumps(name)}"]


def pending_pages(tmp_path, backend) -> set[int]:
    """The page numbers pending (in flight given back) after the child closed its frontier."""
    kind, redis_url, name = backend
    if kind == "jobdir":
        return {page_number(r.url) for r in pending_requests(str(tmp_path / "job"))}
    with RedisFrontier(redis_url, crawl=name, create=False) as frontier:
        assert frontier.stats()["in_flight"] == 0  # the child gave back its leases at close
        return {page_number(r.url) for r in frontier.pending_requests()}


def run_child(target: tuple[str, list[str]], site: SyntheticSite, out: str, *options: str) -> subprocess.Popen:
    path, extra = target
    return subprocess.Popen([sys.executable, CHILD, path, f"{site.base}/page/0", out, *extra, *options],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen, out: str) -> dict:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-3000:]
    with open(out) as f:
        return json.load(f)


def wait_for_fetches(site: SyntheticSite, proc: subprocess.Popen, fetches: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    assert proc.stderr is not None
    while sum(site.fetched().values()) < fetches:
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, f"the crawl did not reach {fetches} fetches"
        time.sleep(0.002)


def linked(n: int, pages: int) -> set[int]:
    return {c for c in (2 * n + 1, 2 * n + 2, n // 2, 0) if c < pages}


@pytest.mark.crash
def test_sigint_in_an_asyncio_application_finishes_the_requests_in_hand_and_loses_nothing(tmp_path, backend):
    target, out, pages = child_target(tmp_path, backend), str(tmp_path / "out.json"), 300
    with SyntheticSite(pages) as site:
        proc = run_child(target, site, out, "workers=8", "slow=0.05")
        wait_for_fetches(site, proc, 40)
        proc.send_signal(signal.SIGINT)
        result = finish(proc, out)
        fetched = site.fetched()
        stats = result["stats"][0]
        assert stats["stopped_by"] == "SIGINT" and result["handlers_restored"]
        assert result["clients"] == 1 and result["client_closed_at_end"] and not result["closed_during_call"]
        returned = {page_number(url) for url in result["returned"]}
        pending = pending_pages(tmp_path, backend)
        # every request taken was settled: each page fetched was done, none is pending again
        assert {page_number(path) for path in fetched} == returned
        assert stats["handled"] == stats["done"] == len(returned) and not returned & pending
        # nothing lost: every page a done page links to is done or pending
        assert set().union(*(linked(n, pages) for n in returned)) <= returned | pending
        result = finish(run_child(target, site, out, "workers=8"), out)
        assert result["stats"][0]["stopped_by"] == "finished"
        fetched = site.fetched()
    assert set(fetched) == {f"/page/{n}" for n in range(pages)} and max(fetched.values()) == 1


@pytest.mark.crash
def test_a_second_sigint_leaves_at_once_and_the_requests_in_hand_come_back(tmp_path, backend):
    target, out, pages, slow, workers = child_target(tmp_path, backend), str(tmp_path / "out.json"), 200, 30.0, 2
    with SyntheticSite(pages) as site:
        proc = run_child(target, site, out, f"workers={workers}", f"slow={slow}")
        wait_for_fetches(site, proc, 1 + workers)  # page 0, then its two links: a full hand of slow pages
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        assert proc.poll() is None  # the first Ctrl-C waits for the requests in hand
        proc.send_signal(signal.SIGINT)
        result = finish(proc, out)
        left_after = time.monotonic() - started
        assert left_after < slow / 3, left_after  # did not wait out the handlers
        assert result["stats"][0]["stopped_by"] == "interrupted" and result["handlers_restored"]
        assert result["client_closed_at_end"] and not result["closed_during_call"]
        interrupted = {page_number(path) for path in site.fetched()} - {page_number(u) for u in result["returned"]}
        assert len(interrupted) == workers
        assert interrupted <= pending_pages(tmp_path, backend)  # given back
        result = finish(run_child(target, site, out, "workers=8"), out)
        assert result["stats"][0]["stopped_by"] == "finished"
        fetched = site.fetched()
    assert set(fetched) == {f"/page/{n}" for n in range(pages)}
    assert {int(path.rsplit("/", 1)[1]) for path, count in fetched.items() if count > 1} == interrupted


def test_the_callers_own_loop_signal_handler_comes_back_after_acrawl(tmp_path):
    """An application with its own SIGTERM handler on the loop: acrawl takes SIGTERM while it runs,
    then a real SIGTERM reaches the application's handler again, and SIGINT is asyncio.run()'s again."""
    script = f"""
import asyncio, os, signal
from diskfrontier import Frontier, Request, acrawl

async def handler(request, frontier):
    pass

async def main():
    loop, mine = asyncio.get_running_loop(), asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, mine.set)
    sigint = signal.getsignal(signal.SIGINT)
    with Frontier({str(tmp_path / "job")!r}) as frontier:
        frontier.push(Request("https://a.example/"))
        stats = await acrawl(frontier, handler, progress=False)
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(mine.wait(), 30)
    print(stats.stopped_by, "mine", signal.getsignal(signal.SIGINT) == sigint)

asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["finished", "mine", "True"]


def test_an_unreachable_site_is_retried_then_failed_with_the_clients_error(tmp_path):
    with SyntheticSite(1) as site:
        dead = site.base  # the port is closed once the site stops
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{dead}/page/0", timeout=5)  # noqa: S310 - refused: nothing listens there

    async def handler(request, frontier, client):
        await client.get(request.url)

    async def main():
        async with AsyncFrontier(tmp_path / "job") as frontier:
            await frontier.push(Request(f"{dead}/page/0"))
            stats = await acrawl(frontier, handler, retries=1, backoff=0.01, setup=httpx.AsyncClient,
                                 progress=False)
            return stats, await frontier.failed()

    stats, failed = asyncio.run(main())
    assert (stats.retried, stats.failed, stats.stopped_by) == (1, 1, "finished")
    assert failed[0].error.startswith("ConnectError")


# ------------------------------------------------------------------ the documented async crawlers
def async_crawler(path: str) -> str:
    from paths import REPO

    with open(os.path.join(REPO, path)) as f:
        text = f.read()
    (block,) = [b for b in re.findall(r"^```py\n(.*?)^```", text, flags=re.S | re.M) if "await acrawl(" in b]
    return block


@pytest.mark.parametrize("path", ["docs/guide/crawl.md"])  # the README's: tests/project/test_docs.py
def test_the_documented_async_crawler_crawls_a_whole_site(tmp_path, path):
    from diskfrontier.run.demo import MultiHostSite

    block = async_crawler(path)
    assert len([line for line in block.splitlines() if line.strip()]) < 25
    script = tmp_path / "acrawler.py"
    script.write_text(block.replace("delay=1.0", "delay=0.002"))  # the site is local: a short delay
    with MultiHostSite(120, hosts=4, share=0.5) as site:
        out = subprocess.run([sys.executable, str(script), site.url(0)], cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)
        fetched = site.fetched()
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("120 pages, 0 failed"), out.stdout
    assert set(fetched) == {f"/page/{n}" for n in range(120)} and set(fetched.values()) == {1}


def test_a_handlers_own_cancelled_error_is_retried_and_the_run_still_finishes(tmp_path):
    """A CancelledError that the handler raised (not a cancellation of the run) is an error like any other:
    without this the request would stay in hand and the run would never see the crawl finished."""

    async def handler(request, frontier):
        if request.url.endswith("/cancelled"):
            inner = asyncio.get_running_loop().create_future()
            inner.cancel()
            await inner  # raises CancelledError in the handler's own task

    async def main():
        async with AsyncFrontier(tmp_path / "job") as frontier:
            await frontier.push_many([Request("https://a.example/cancelled"), Request("https://a.example/fine")])
            stats = await asyncio.wait_for(acrawl(frontier, handler, retries=1, backoff=0.01, progress=False), 60)
            return stats, [f.error for f in await frontier.failed()]

    stats, errors = asyncio.run(main())
    assert (stats.done, stats.retried, stats.failed, stats.stopped_by) == (1, 1, 1, "finished")
    assert errors == ["CancelledError: "]


def test_a_status_line_tells_how_the_async_run_goes(tmp_path, capsys):
    async def handler(request, frontier):
        await asyncio.sleep(0.3)

    async def main():
        async with AsyncFrontier(tmp_path / "job") as frontier:
            await frontier.push_many(Request(f"https://a.example/{i}") for i in range(4))
            return await acrawl(frontier, handler, workers=2, progress=True)

    stats = asyncio.run(main())
    line = capsys.readouterr().err.rstrip("\n").split("\r")[-1]
    assert stats.done == 4 and "pending 0" in line and "done 4" in line and "failed 0" in line
