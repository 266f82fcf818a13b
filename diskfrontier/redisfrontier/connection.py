"""Connecting to Redis: the client, the checks made at open, and Redis errors as FrontierErrors."""

from __future__ import annotations

import logging
import re
from typing import Any, NoReturn

from ..core.errors import CrawlDamaged, FrontierError

log = logging.getLogger("diskfrontier")

CRAWL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,100}\Z")
_SCRIPT_WHERE = re.compile(r"\s*script: (\w+), on @\w+:(\d+)\.?\Z")  # what Redis 7 adds to a script's error
_SCRIPT_LINE = re.compile(r"\A\w+:(\d+):")  # how Lua begins an error it raises: user_script:N (a line of the text)
_CRAWL_OF_KEY = re.compile(r"df:\{([^}]*)\}:")


class RedisUnavailable(FrontierError):
    """Redis could not be reached, or is still loading its data: the call did not complete.

    A push, pop or done that raised this may or may not have been applied; nothing that
    was acknowledged before is lost (with AOF on), and a pop that was applied is given
    back when its lease runs out.
    """


class LeaseExpired(FrontierError):
    """done/retry/extend of a request whose lease ran out and was taken back: another client
    may be working on it now. Nothing was changed."""


class NotReplicated(FrontierError):
    """With ``wait_replicas=k``: a step was applied on its master, but fewer than k replicas acknowledged
    it in time, so a failover now could still lose it."""


class RedisMisconfigured(FrontierError):
    """The Redis server is set up in a way that would lose requests."""


def is_redis_url(target: str) -> bool:
    """True if ``target`` names a Redis server rather than a job directory."""
    return target.startswith(("redis://", "rediss://", "unix://"))


def check_crawl_name(crawl: Any) -> str:
    """``crawl`` if it is a valid crawl name, else ``ValueError``."""
    if not isinstance(crawl, str) or not CRAWL_NAME.match(crawl):
        raise ValueError(f"crawl must be 1 to 100 letters, digits or '_.:-', got {crawl!r}")
    return crawl


def connect(url: str, cluster: bool | None = None) -> Any:
    """A redis-py client for ``url`` (bytes replies, no automatic retries of a plain server: a retried pop
    or done is not the same call). ``cluster``: True, a ``RedisCluster`` (``url`` names any node of the
    cluster); False, a plain client; None, whichever the server is (``INFO cluster``)."""
    try:
        import redis
        import redis.cluster
    except ImportError:
        raise FrontierError("the Redis backend needs the redis package: pip install 'diskfrontier[redis]'") from None
    try:
        if cluster:
            return _cluster_client(url)
        client = redis.Redis.from_url(url, socket_timeout=30.0, socket_connect_timeout=10.0, retry_on_timeout=False,
                                      health_check_interval=0)
    except ValueError as exc:
        raise FrontierError(f"{url!r} is not a Redis URL ({exc}); write redis://host:6379/0") from None
    if cluster is None:
        try:
            with talking(url, "open"):
                enabled = client.info("cluster").get("cluster_enabled")
        except BaseException:
            client.close()
            raise
        if enabled:
            client.close()
            return _cluster_client(url)
    return client


def _cluster_client(url: str) -> Any:
    """A ``RedisCluster`` for the cluster whose node ``url`` names: it follows MOVED and ASK and finds the
    new master of a slot after a failover."""
    import redis.cluster

    address = re.sub(r"/0*\Z", "", url)  # a cluster has one database: /0 is the only one to name
    if re.search(r"//[^/]*/.", address):
        raise FrontierError(f"{shown_url(url)} names a database; a Redis Cluster has database 0 only")
    try:
        with talking(url, "open"):
            return redis.cluster.RedisCluster.from_url(address, socket_timeout=30.0, socket_connect_timeout=10.0)
    except ValueError as exc:
        raise FrontierError(f"{url!r} is not a Redis URL ({exc}); write redis://host:6379") from None


def is_cluster(client: Any) -> bool:
    """True if ``client`` is a ``RedisCluster``."""
    import redis.cluster

    return isinstance(client, redis.cluster.RedisCluster)


def servers(client: Any) -> list[Any]:
    """A plain client of each master ``client`` talks to (one unless it is a ``RedisCluster``)."""
    if not is_cluster(client):
        return [client]
    return [client.get_redis_connection(node) for node in client.get_primaries()]


def node_client(client: Any, key: str) -> Any:
    """A plain client of the master that holds ``key`` (``client`` itself unless it is a ``RedisCluster``)."""
    if not is_cluster(client):
        return client
    return client.get_redis_connection(client.get_node_from_key(key))


class talking:  # noqa: N801 - used as a function: ``with talking(url, what):``
    """Turn the errors of a Redis call into ``RedisUnavailable`` / ``FrontierError`` (a class rather than a
    generator: it is entered on every call, and only an error costs more than a few attribute writes)."""

    __slots__ = ("url", "what")

    def __init__(self, url: str, what: str) -> None:
        self.url, self.what = url, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: Any) -> None:
        if exc is None:
            return
        import redis.exceptions as rx

        if isinstance(exc, rx.RedisError):
            raise_redis_error(self.url, self.what, exc)


def raise_redis_error(url: str, what: str, exc: BaseException) -> NoReturn:
    """Raise ``exc`` (a redis-py error of ``what``, at ``url``) as what it means to diskfrontier."""
    import redis.exceptions as rx

    if isinstance(exc, (rx.ConnectionError, rx.TimeoutError)):
        state = "is loading its data" if isinstance(exc, rx.BusyLoadingError) else "could not be reached"
        raise RedisUnavailable(f"{what}: Redis at {shown_url(url)} {state} ({exc}); the call may not have been "
                               f"applied: try it again when Redis is back") from None
    if isinstance(exc, rx.NoPermissionError):
        raise FrontierError(f"{what}: Redis at {shown_url(url)} refused the command ({exc}); the user needs "
                            f"EVALSHA, HSET, ZADD, TIME and INFO on the crawl's keys") from None
    if not isinstance(exc, rx.ResponseError):
        raise FrontierError(f"{what}: Redis at {shown_url(url)}: {type(exc).__name__}: {exc}") from None
    text, place = script_error(str(exc))
    if "DFNOCRAWL" in text:
        raise FrontierError(f"{what}: the crawl's keys are gone from Redis at {shown_url(url)} (deleted or evicted "
                            f"while this client had it open)") from None
    if text.startswith("DFDAMAGED "):
        key, _, problem = text[len("DFDAMAGED "):].partition(" ")
        raise damaged(url, key, f"{problem} (found by {what})") from None
    if text.startswith("DFEVICTION "):
        raise evicting(url, text[len("DFEVICTION "):], what) from None
    if text.startswith("WRONGTYPE"):
        raise CrawlDamaged("a key of the crawl", f"is of a type diskfrontier never made ({what}: {text})",
                           hint="run 'diskfrontier verify URL --crawl NAME' to find it") from None
    if isinstance(exc, rx.OutOfMemoryError) or text.startswith("OOM"):
        raise FrontierError(f"{what}: Redis at {shown_url(url)} is out of memory ({text}); nothing was "
                            f"changed: raise maxmemory or free memory") from None
    at = f" (in {place})" if place and not text.startswith(place) else ""
    raise FrontierError(f"{what}: Redis at {shown_url(url)} answered with an error: {text}{at}") from None


def script_error(text: str) -> tuple[str, str | None]:
    """A Redis error without what Redis 7 appends to a script's (`` script: SHA, on @user_script:N.``), and the
    place that names as ``lua/FILE:LINE`` (``lua.where``; None if not a script of this package). An error Lua
    raises begins with its place (``user_script:N: ...``), which is then given as ``lua/FILE:LINE`` too."""
    found = _SCRIPT_WHERE.search(text)
    if found is None:
        return text, None
    from . import lua  # only once a script failed: a client that runs none never reads the scripts' files

    text, sha = text[:found.start()], found.group(1)
    place = lua.where(sha, int(found.group(2)))
    lead = _SCRIPT_LINE.match(text)
    if lead is not None:
        named = lua.where(sha, int(lead.group(1)))
        if named is not None:
            return named + text[lead.end() - 1:], named
    return text, place


def damaged(url: str, key: str, problem: str) -> CrawlDamaged:
    """The ``CrawlDamaged`` of ``key`` (a key of a crawl at ``url``) with ``problem``, saying how to repair."""
    key, _, part = key.partition(" ")  # "KEY field F": the problem is of the field
    found = _CRAWL_OF_KEY.match(key)
    return CrawlDamaged(key, f"{part} {problem}" if part else problem,
                        hint=repair_hint(url, found.group(1) if found else "NAME"))


def repair_hint(url: str, crawl: str) -> str:
    """What to do about damage found in crawl ``crawl`` at ``url``."""
    return (f"keys of the crawl were deleted, evicted or changed from outside: run 'diskfrontier verify "
            f"{shown_url(url)} --crawl {crawl}' to see every problem, and with --repair to rebuild the crawl's "
            f"indexes from its stored requests")


def evicting(url: str, policy: str, what: str) -> RedisMisconfigured:
    """The error of a server found evicting (``policy``) after the crawl was opened."""
    return RedisMisconfigured(
        f"{what}: Redis at {shown_url(url)} has maxmemory-policy {policy} now (it was changed after the crawl was "
        f"opened): it may drop keys of the crawl (pending requests, leases, fingerprints) without a word, and may "
        f"have done so already; set 'maxmemory-policy noeviction' (CONFIG SET maxmemory-policy noeviction, and in "
        f"redis.conf), then run 'diskfrontier verify URL --crawl NAME' to see whether anything was lost")


def shown_url(url: str) -> str:
    """``url`` without its password."""
    return re.sub(r"//[^@/]*@", "//***@", url)


# (server's run id, crawl) pairs this process has warned of: one warning for a crawl, not one for each
# client or command that opens it (a server restarted has a new run id, and is looked at again)
_WARNED_AOF: set[tuple[Any, str]] = set()


def check_server(client: Any, url: str, crawl: str, *, warn: bool = True) -> None:
    """Refuse a server (each master of a cluster) that may evict keys; warn when it does not log writes.

    The warning is given once a process for a crawl, and only if ``warn``: a client that may make the
    crawl (a crawler, a seeding push) is told, a command that reads or steers an existing crawl is not
    (it changes nothing about where the crawl's writes go, and would repeat it at every call).
    """
    for server in servers(client):
        _check_one(server, url, crawl, warn)


def _check_one(client: Any, url: str, crawl: str, warn: bool) -> None:
    with talking(url, "open"):
        memory = client.info("memory")
        persistence = client.info("persistence")
        about = client.info("server")
    version = about.get("redis_version", "0")
    if tuple(int(x) for x in re.findall(r"\d+", str(version))[:2]) < (6, 2):
        raise RedisMisconfigured(f"Redis at {shown_url(url)} is version {version}; diskfrontier needs 6.2 or later")
    policy = memory.get("maxmemory_policy", "noeviction")
    if policy != "noeviction":
        raise RedisMisconfigured(
            f"Redis at {shown_url(url)} has maxmemory-policy {policy}: when memory is full it would drop keys of "
            f"crawl {crawl!r} (pending requests, leases, fingerprints) without a word; set "
            f"'maxmemory-policy noeviction' (CONFIG SET maxmemory-policy noeviction, and in redis.conf)")
    if not persistence.get("aof_enabled") and warn and (about.get("run_id"), crawl) not in _WARNED_AOF:
        _WARNED_AOF.add((about.get("run_id"), crawl))
        log.warning("Redis at %s has appendonly off: a Redis crash loses what was written since its last "
                    "snapshot; set 'appendonly yes' (and appendfsync always for every acknowledged call)",
                    shown_url(url))
