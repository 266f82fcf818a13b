"""``Transport``: one of the crawl's scripts run on one of its shards, the way this client talks to Redis.

A script goes on the shard's ``meta`` key (which routes it to the master holding the shard), after the dones of
that shard this client has not sent yet (``ack="deferred"``, ``deferred.py``: a ``POP`` carries them itself), over the
client's own connection on a plain server (``pipelined.py``: also where ``ack="pipelined"`` sends its
acknowledgements), or with ``wait_replicas=k`` followed by ``WAIT`` on the same connection: the step is
then known to have reached k replicas, or ``NotReplicated`` says it is only on the master. In a Redis
Cluster a redirect (the slot moved, as after a failover: the step did not run) has the cluster's layout
read again and the step sent again, twice at most.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import FrontierError
from .connection import NotReplicated, log, node_client, shown_url, talking
from .deferred import DeferredAcks, finish_args
from .pipelined import ScriptChannel
from .settings import BATCH
from .shards import Shard


class Transport:
    """The scripts (name -> redis-py ``Script``) of a crawl of ``shards``, run through the client ``redis``."""

    def __init__(self, redis: Any, url: str, shards: list[Shard], scripts: dict[str, Any], *, cluster: bool,
                 wait_replicas: int = 0, wait_timeout: float = 5.0) -> None:
        self.redis, self.url, self.shards, self.scripts = redis, url, shards, scripts
        self.cluster = cluster
        self.wait_replicas, self.wait_timeout = wait_replicas, wait_timeout
        self.channel: ScriptChannel | None = None
        self.deferred: DeferredAcks | None = None  # the dones not sent yet (ack="deferred")

    def open_channel(self) -> ScriptChannel:
        """Run the scripts from now on over a connection of their own, where a step may also be sent without
        waiting for its reply (``ack="pipelined"``); not with a Redis Cluster."""
        if self.cluster:
            raise ValueError("a connection of the client's own does not go with a Redis Cluster (each step goes "
                             "to the node of its shard there)")
        with talking(self.url, "open"):
            self.channel = ScriptChannel(self.redis, self.scripts)
        return self.channel

    def run(self, what: str, name: str, args: list[Any], shard: int = 0) -> Any:
        """Script ``name`` on ``shard`` with ``args``, after the dones of ``shard`` not sent yet (a ``POP``
        takes them in its own arguments: ``Fanout``); its reply (``what``: the call, for errors)."""
        deferred = self.deferred
        if deferred is not None and deferred.waiting and name != "POP":
            self.send_acks(shard)
        return self._run(what, name, args, shard)

    def send_acks(self, shard: int | None = None) -> None:
        """Send the dones not sent yet of ``shard`` (None: of every shard), ``BATCH`` a ``FINISH``, and see to
        their replies. Those a failed call took are counted as failed (they come back when their leases run
        out), and the error is raised."""
        deferred = self.deferred
        if deferred is None or not deferred.unsettled:
            return
        with deferred.sending:  # a caller that finds another thread sending waits until those are applied
            groups = deferred.take_all() if shard is None else {shard: deferred.take(shard)}
            left = [(at, taken[start:start + BATCH]) for at, taken in groups.items()
                    for start in range(0, len(taken), BATCH)]
            for position, (at, chunk) in enumerate(left):
                try:
                    reply = self._run("done", "FINISH", finish_args(chunk), at)
                except BaseException:
                    for _at, lost in left[position:]:
                        deferred.settle(lost, None)
                    raise
                deferred.settle(chunk, reply)

    def _run(self, what: str, name: str, args: list[Any], shard: int) -> Any:
        meta = self.shards[shard].meta
        # the client's entry written at open and removed at close is bookkeeping a failover may lose
        bookkeeping = name == "LEAVE" or (name == "BEAT" and what == "open")
        if self.wait_replicas and not bookkeeping:
            return self._replicated(what, name, args, meta)
        with talking(self.url, what):
            if self.channel is not None:
                return self.channel.call(name, meta, args)
            return self.scripts[name](keys=[meta], args=args)

    def run_everywhere(self, what: str, name: str, args: list[Any]) -> list[Any]:
        """``run`` on every shard, in order: the replies."""
        return [self.run(what, name, args, shard) for shard in range(len(self.shards))]

    def _replicated(self, what: str, name: str, args: list[Any], meta: str) -> Any:
        """``run`` followed by ``WAIT`` on the same connection (WAIT counts only its own connection's writes):
        one pipeline to the master that holds ``meta``."""
        import redis.exceptions as rx

        for attempt in range(3):
            try:
                with talking(self.url, what):
                    try:
                        pipe = node_client(self.redis, meta).pipeline(transaction=False)
                        self.scripts[name](keys=[meta], args=args, client=pipe)
                        pipe.execute_command("WAIT", self.wait_replicas, max(1, int(self.wait_timeout * 1000)))
                        answer, acked = pipe.execute()
                    except (rx.ConnectionError, rx.TimeoutError):
                        self.reread_layout()
                        raise
            except FrontierError as exc:
                if self.cluster and attempt < 2 and ("MOVED" in str(exc) or "ASK" in str(exc)):
                    self.reread_layout()
                    continue
                raise
            if int(acked) < self.wait_replicas:
                raise NotReplicated(f"{what}: applied on the master of {meta} at {shown_url(self.url)}, but only "
                                    f"{acked} of the {self.wait_replicas} replicas asked for (wait_replicas) had it "
                                    f"after {self.wait_timeout:g}s: a failover now could lose it")
            return answer
        raise AssertionError("unreachable")

    def reread_layout(self) -> None:
        """Have a ``RedisCluster`` read which node holds which slots again (after a failover)."""
        if self.cluster:
            try:
                self.redis.nodes_manager.initialize()
            except Exception as exc:  # the cluster may still be electing a new master: the next call tries again
                log.debug("the cluster's layout could not be read yet: %s", exc)

    def close(self) -> None:
        """Give back the connection of pipelined acknowledgements, and disconnect."""
        if self.channel is not None:
            self.channel.close()
        self.redis.close()
