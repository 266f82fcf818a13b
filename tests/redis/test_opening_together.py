"""Clients that open a new crawl at the same moment: one makes it, the others open what it made."""

from __future__ import annotations

import threading

import pytest

from diskfrontier import RedisFrontier, Request

ROUNDS = 10
CLIENTS = 4


@pytest.mark.parametrize("shards", [1, 3])
def test_clients_opening_a_new_crawl_at_once_all_open_the_one_crawl(redis_url, crawl_name, shards):
    # Each round a new crawl, opened by CLIENTS threads let go together: an open that found no crawl and then
    # the sentinel (or shard 1) of the one another client made meanwhile must open it, not call it damaged.
    failures: list[str] = []
    made: list[str] = []

    def client(name: str, start: threading.Barrier, index: int) -> None:
        start.wait()
        try:
            with RedisFrontier(redis_url, crawl=name, shards=shards, renew=False) as f:
                f.push(Request(f"https://h{index}.example/"))
                if f.made:
                    made.append(name)
        except Exception as exc:  # every client's error is collected: the test names them all
            failures.append(f"{name}, client {index}: {type(exc).__name__}: {exc}")

    pending = []
    for round_ in range(ROUNDS):
        name, start = f"{crawl_name}-{round_}", threading.Barrier(CLIENTS)
        threads = [threading.Thread(target=client, args=(name, start, index)) for index in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with RedisFrontier(redis_url, crawl=name, create=False) as f:
            assert f.shards == shards
            pending.append(len(f))
    assert failures == []
    assert pending == [CLIENTS] * ROUNDS
    assert sorted(made) == sorted(f"{crawl_name}-{round_}" for round_ in range(ROUNDS))  # one client made each
