"""The crawls of one Redis server and their clients, seen from outside: what ``diskfrontier crawls``,
``clients`` and ``release`` work on.

A crawl is the keys ``df:{NAME}:*``; its ``meta`` hash names it. The crawls are found with SCAN
(never KEYS), and each is summed up from its ``meta`` counters, its live clients and the memory of
its keys (``MEMORY USAGE`` of each, found with SCAN: the cost grows with the crawl's keys, as the
command says).

A crawl's clients are the entries of its ``clients`` hash (each client records itself there and says
it is there again with every lease renewal; ``leases.py``) and the owners of its leases (the
``owner`` hash: a lease token is ``CLIENT:n``). A client is live while it was seen within two beats
of its renewal thread (two thirds of its lease; a client without one: its lease); one that holds
leases but has no entry (a client of an older version) is live while one of its leases has not run
out. ``release`` gives leases back at once, as if they had run out.

A crawl of several shards (``shards.py``) is listed once: the ``meta`` of its shard 0 names the others,
whose counters are summed in, whose leases are counted and released with the crawl's; the ``clients``
hash is shard 0's.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from typing import Any

from ..core.errors import FrontierError
from . import lua
from .connection import check_crawl_name, connect, shown_url, talking
from .opening import READABLE
from .reading import glob_escape
from .shards import is_shard_tag

_META = b"df:{*}:meta"
_BATCH = 1000  # keys a SCAN step asks for; leases a release script call gives back
CLIENT_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}\Z")


@dataclass(frozen=True)
class CrawlSummary:
    """One crawl of a Redis server, as ``diskfrontier crawls`` lists it."""

    name: str
    pending: int
    in_flight: int
    done: int
    failed: int
    seen: int
    clients: int  # live clients (seen within their lease, or holding a lease that has not run out)
    memory: int | None  # bytes of its keys (None: not measured)
    paused: bool

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (JSON-ready)."""
        return dict(self.__dict__)


def crawl_names(url: str) -> list[str]:
    """The names of the crawls on the Redis server at ``url``, sorted."""
    redis = connect(url)
    try:
        with talking(url, "crawls"):
            keys = list(redis.scan_iter(match=_META, count=_BATCH))
    finally:
        redis.close()
    names = []
    for key in keys:
        text = key.decode("utf-8", "replace")
        if text.startswith("df:{") and text.endswith("}:meta"):
            name = text[len("df:{"):-len("}:meta")]
            if not is_shard_tag(name):  # a shard of a crawl is summed up with its crawl
                names.append(name)
    return sorted(set(names))


def summaries(url: str, *, memory: bool = True) -> list[CrawlSummary]:
    """A ``CrawlSummary`` of every crawl on the Redis server at ``url`` (``memory=False``: not measured)."""
    redis = connect(url)
    try:
        return [_summary(redis, url, name, memory) for name in crawl_names(url)]
    finally:
        redis.close()


def _number(metas: list[dict[bytes, bytes]], field: str) -> int:
    total = 0
    for meta in metas:
        with contextlib.suppress(ValueError):
            total += int(float(meta.get(field.encode(), b"0")))
    return total


def _prefixes(redis: Any, crawl: str) -> list[str]:
    """The key prefixes of every shard of crawl ``crawl`` (shard 0's first; one for a crawl of one shard)."""
    tags = [crawl]
    listed = redis.hget(f"df:{{{crawl}}}:meta", "tags")
    if listed:
        tags += listed.decode("utf-8", "replace").split(",")
    return [f"df:{{{tag}}}:" for tag in tags]


def _summary(redis: Any, url: str, name: str, memory: bool) -> CrawlSummary:
    with talking(url, f"crawl {name!r}"):
        prefixes = _prefixes(redis, name)
        metas = [redis.hgetall(prefix + "meta") for prefix in prefixes]
        live = sum(1 for client in _client_list(redis, prefixes)[1] if client.live)
        used: int | None = None
        if memory:
            used = 0
            for prefix in prefixes:
                for key in redis.scan_iter(match=glob_escape(prefix) + "*", count=_BATCH):
                    used += redis.memory_usage(key, samples=0) or 0
    return CrawlSummary(
        name=name, pending=_number(metas, "pending"), in_flight=_number(metas, "inflight"),
        done=_number(metas, "done"), failed=_number(metas, "failed"),
        seen=_number(metas, "seen") - _number(metas, "seen_copies"), clients=live, memory=used,
        paused=bool(metas[0].get(b"paused")))


@dataclass(frozen=True)
class ClientInfo:
    """One client of a crawl, as ``diskfrontier clients`` lists it. Times are the Redis server's clock
    (``time.time()`` terms); ``host``, ``lease``, ``started`` and ``last_seen`` are None for a client
    that holds leases but has no entry (a client of an older version, or one forgotten long after it died)."""

    client: str  # its id, <hex>-<pid>: what release --client takes
    host: str | None  # the machine's host name
    pid: int | None
    lease: float | None  # its lease, in seconds
    started: float | None
    last_seen: float | None
    seen_ago: float | None  # seconds since it was last seen
    leases: int  # leases it holds (some may have run out and not been taken back yet)
    live: bool

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (JSON-ready)."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class Released:
    """What ``release`` gave back: ``released`` leases of ``client`` (None: every lease that had run out)."""

    crawl: str
    client: str | None
    released: int
    was_live: bool  # the client was live (released with force)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (JSON-ready)."""
        return dict(self.__dict__)


class ClientLive(FrontierError):
    """``release`` of a client that is live: its worker may still be working on the requests."""


def clients(url: str, crawl: str) -> list[ClientInfo]:
    """Every client of crawl ``crawl`` at ``url``: live ones first, then by host, pid and id."""
    redis = _open(url, crawl)
    try:
        with talking(url, "clients"):
            return _client_list(redis, _prefixes(redis, crawl))[1]
    finally:
        redis.close()


def release(url: str, crawl: str, *, client: str | None = None, expired: bool = False,
            force: bool = False) -> Released:
    """Give leases of crawl ``crawl`` back now: every lease of ``client`` or, with ``expired``, every
    lease that has run out (exactly one of the two). The requests are pending again at their place and
    counted in ``reclaimed``, as when a lease runs out; a late ``done`` of one raises ``LeaseExpired``.
    A live client is refused (``ClientLive``) unless ``force``: its worker would lose its requests
    while it works on them. Works in script calls of at most 1,000 leases each."""
    if (client is None) == (not expired):
        raise ValueError("release takes a client or expired=True, not both and not neither")
    if client is not None and (not isinstance(client, str) or not CLIENT_ID.match(client)):
        raise ValueError(f"{client!r} is not a client id (<hex>-<pid>, as 'diskfrontier clients' lists them)")
    redis = _open(url, crawl)
    try:
        with talking(url, "release"):
            prefixes = _prefixes(redis, crawl)
            if client is None:
                reclaim = redis.register_script(lua.RECLAIM)
                total = 0
                for prefix in prefixes:
                    step = _BATCH
                    while step == _BATCH:
                        step = int(reclaim(keys=[prefix + "meta"], args=[_BATCH]))
                        total += step
                return Released(crawl, None, total, False)
            owners, found = _client_list(redis, prefixes)
            known = next((c for c in found if c.client == client), None)
            if known is None:
                raise FrontierError(f"crawl {crawl!r} has no client {client!r} (none by that id is registered or "
                                    f"holds a lease); 'diskfrontier clients {shown_url(url)} --crawl {crawl}' "
                                    f"lists them")
            if known.live and not force:
                raise ClientLive(_live_message(known, url, crawl))
            give_back = redis.register_script(lua.GIVE_BACK)
            count = 0
            for prefix in prefixes:
                ids = [rid for where, rid in owners.get(client, []) if where == prefix]
                for at in range(0, len(ids), _BATCH):
                    count += int(give_back(keys=[prefix + "meta"], args=[client, *ids[at:at + _BATCH]]))
            return Released(crawl, client, count, known.live)
    finally:
        redis.close()


def _live_message(known: ClientInfo, url: str, crawl: str) -> str:
    seen = "" if known.seen_ago is None else f"seen {known.seen_ago:.1f}s ago, "
    lease = "its leases have not run out" if known.lease is None else f"lease {known.lease:g}s"
    return (f"client {known.client} of crawl {crawl!r} is live ({seen}{lease}): its worker may still be working "
            f"on its {known.leases:,} leased requests; released now, they go to other clients and its done() of "
            f"them raises LeaseExpired. Stop the worker (they come back within its lease), or pass --force")


def _open(url: str, crawl: str) -> Any:
    """A connection to ``url`` where crawl ``crawl`` is, in a format this version reads."""
    check_crawl_name(crawl)
    redis = connect(url)
    try:
        with talking(url, f"crawl {crawl!r}"):
            version = redis.hget(f"df:{{{crawl}}}:meta", "v")
    except BaseException:
        redis.close()
        raise
    if version is None:
        redis.close()
        raise FrontierError(f"there is no crawl {crawl!r} in Redis at {shown_url(url)}; 'diskfrontier crawls "
                            f"{shown_url(url)}' lists them")
    if version.decode(errors="replace") not in READABLE:
        redis.close()
        raise FrontierError(f"crawl {crawl!r} in Redis at {shown_url(url)} is of format "
                            f"{version.decode(errors='replace')}; this version of diskfrontier reads formats "
                            f"{', '.join(READABLE)}")
    return redis


def _client_list(redis: Any, prefixes: list[str]) -> tuple[dict[str, list[tuple[str, bytes]]], list[ClientInfo]]:
    """((shard prefix, request id) of each lease each owner holds, every client of the crawl whose shards
    have the key ``prefixes``; the ``clients`` hash is shard 0's)."""
    seconds, micro = redis.time()
    now = seconds + micro / 1e6
    owners: dict[str, list[tuple[str, bytes]]] = {}
    for prefix in prefixes:
        for rid, token in redis.hscan_iter(prefix + "owner", count=_BATCH):
            owners.setdefault(token.split(b":", 1)[0].decode("utf-8", "replace"), []).append((prefix, rid))
    found = []
    for raw_id, raw in redis.hgetall(prefixes[0] + "clients").items():
        client = raw_id.decode("utf-8", "replace")
        entry = _entry(raw)
        seen, lease, beat = _real(entry.get("seen")), _real(entry.get("lease")), _real(entry.get("beat"))
        pid = entry.get("pid")
        host = entry.get("host")
        found.append(ClientInfo(
            client=client, host=host if isinstance(host, str) else None,
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None, lease=lease,
            started=_real(entry.get("started")), last_seen=seen,
            seen_ago=None if seen is None else max(0.0, now - seen),
            leases=len(owners.get(client, ())),
            live=seen is not None and lease is not None and now - seen < _live_for(lease, beat)))
    registered = {c.client for c in found}
    for client, ids in owners.items():
        if client in registered:
            continue
        expiries = []
        for prefix in prefixes:
            mine = [rid for where, rid in ids if where == prefix]
            for at in range(0, len(mine), _BATCH):
                expiries += redis.zmscore(prefix + "lease", mine[at:at + _BATCH])
        pid_text = client.rpartition("-")[2]
        found.append(ClientInfo(client=client, host=None, pid=int(pid_text) if pid_text.isdigit() else None,
                                lease=None, started=None, last_seen=None, seen_ago=None, leases=len(ids),
                                live=any(e is not None and e > now for e in expiries)))
    found.sort(key=lambda c: (not c.live, c.host or "", c.pid or 0, c.client))
    return owners, found


def _live_for(lease: float, beat: float | None) -> float:
    """How long after it was last seen a client is still live: two beats of its renewal thread (a
    client that missed two is frozen, killed or cut off, and its leases run out within a third of
    the lease), or its lease for a client without one (it says it is there only on its own calls)."""
    return min(lease, 2 * beat) if beat is not None and beat > 0 else lease


def _entry(raw: bytes) -> dict[str, Any]:
    """A ``clients`` entry as a dict; an entry that cannot be read is an empty one (it is only ever
    written by the scripts, and goes when a client next opens the crawl)."""
    try:
        entry = json.loads(raw)
    except ValueError:
        return {}
    return entry if isinstance(entry, dict) else {}


def _real(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
