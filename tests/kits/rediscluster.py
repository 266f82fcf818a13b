"""A real Redis Cluster for the tests: 6 redis-server processes (3 masters, 3 replicas) on free loopback
ports in a temporary folder, joined by ``redis-cli --cluster create``."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time

import pytest
from redisserver import RedisServer, require_redis_server

NODE_TIMEOUT_MS = 1000  # how long a master may be silent before its replica takes over


def redis_cli_binary() -> str:
    """The redis-cli beside redis-server (skip, or fail under DISKFRONTIER_REQUIRE_REDIS, if there is none)."""
    server = require_redis_server()
    beside = os.path.join(os.path.dirname(server), "redis-cli")
    binary = beside if os.path.exists(beside) else shutil.which("redis-cli")
    if binary is None:
        if os.environ.get("DISKFRONTIER_REQUIRE_REDIS"):
            pytest.fail("redis-cli is not installed (DISKFRONTIER_REQUIRE_REDIS is set)")
        pytest.skip("redis-cli is not installed (apt-get install redis-tools)")
    return binary


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ports_of_no_outgoing_connection() -> range:
    """Ports for cluster nodes: each, and its bus port 10,000 higher, below the range the kernel
    hands out to outgoing connections (and to ``bind`` on port 0), so that neither a client
    socket nor a server of another test takes one between the look and the server's start."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    top = low - 10000
    return range(10000 if top - 10000 >= 1000 else 1024, max(top, 1025))  # clear of the usual services


def cluster_port(taken: set[int]) -> int:
    """A free loopback port whose cluster bus port (10,000 higher) is free too, neither in ``taken``
    (which gets both)."""
    ports = _ports_of_no_outgoing_connection()
    while True:
        port = random.choice(ports)
        if port not in taken and port + 10000 not in taken and _free(port) and _free(port + 10000):
            taken |= {port, port + 10000}
            return port


class RedisCluster:
    """Six nodes, each a ``RedisServer`` with cluster mode on: ``start()`` makes the cluster and waits
    until it serves every slot; ``kill(node)`` is a real SIGKILL; ``masters()`` asks the cluster."""

    def __init__(self, folder: str, nodes: int = 6, replicas: int = 1) -> None:
        self.cli = redis_cli_binary()
        self.folder = folder
        self.replicas = replicas
        self.nodes: list[RedisServer] = []
        taken: set[int] = set()
        for k in range(nodes):
            node_folder = os.path.join(folder, f"node{k}")
            self.nodes.append(RedisServer(node_folder, aof=True, fsync="everysec", extra=(
                "--cluster-enabled", "yes", "--cluster-config-file", os.path.join(node_folder, "nodes.conf"),
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--appendfilename", "appendonly.aof",
                "--repl-diskless-sync-delay", "0"),  # replicas synced at once: one never synced cannot take over
                choose_port=lambda: cluster_port(taken)))

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}"

    def start(self, timeout: float = 60.0) -> None:
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        subprocess.run([self.cli, "--cluster", "create", *addresses, "--cluster-replicas", str(self.replicas),
                        "--cluster-yes"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=timeout)
        self.wait_ok(timeout)
        for node in self.nodes:
            if node not in self.masters():
                self.wait_replica_synced(node, timeout)

    def wait_ok(self, timeout: float = 60.0, *, masters: int = 3) -> float:
        """Wait until every live node says ``cluster_state:ok`` and ``masters`` masters serve the slots;
        how long it took."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            try:
                live = [node for node in self.nodes if node.proc is not None and node.proc.poll() is None]
                if all(node.client().cluster("info")["cluster_state"] == "ok" for node in live) and len(
                        self.masters()) == masters:
                    return time.monotonic() - started
            except Exception:  # noqa: S110 (a node still starting, or the cluster's views not settled yet)
                pass
            time.sleep(0.05)
        raise RuntimeError(f"the cluster did not reach cluster_state:ok with {masters} masters in {timeout}s")

    def node_of_port(self, port: int) -> RedisServer:
        return next(node for node in self.nodes if node.port == port)

    def masters(self) -> list[RedisServer]:
        """The live nodes that are masters serving slots now, as a live node sees the cluster."""
        live = [node for node in self.nodes if node.proc is not None and node.proc.poll() is None]
        out = []
        for address, info in live[0].client().cluster("nodes").items():
            if "master" in info["flags"] and "fail" not in info["flags"] and info["slots"]:
                out.append(self.node_of_port(int(address.rsplit(":", 1)[1])))
        return out

    def master_of_slot(self, slot: int) -> RedisServer:
        """The live master that serves ``slot`` now."""
        live = [node for node in self.nodes if node.proc is not None and node.proc.poll() is None]
        for address, info in live[0].client().cluster("nodes").items():
            if "master" in info["flags"] and "fail" not in info["flags"] and any(
                    int(first) <= slot <= int(last) for first, last, *_ in info["slots"]):
                return self.node_of_port(int(address.rsplit(":", 1)[1]))
        raise RuntimeError(f"no live master serves slot {slot}")

    def wait_failover(self, slot: int, old: RedisServer, timeout: float = 60.0) -> float:
        """Wait until a node other than ``old`` (killed) serves ``slot`` and the cluster is ok; how long it took."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            try:
                if self.master_of_slot(slot) is not old:
                    break
            except Exception:  # noqa: S110 (no master of the slot while the replicas elect one)
                pass
            time.sleep(0.02)
        else:
            raise RuntimeError(f"no replica took over slot {slot} in {timeout}s")
        self.wait_ok(timeout)
        return time.monotonic() - started

    def live_url(self) -> str:
        """The URL of a node that is running."""
        node = next(node for node in self.nodes if node.proc is not None and node.proc.poll() is None)
        return f"redis://127.0.0.1:{node.port}"

    def wait_replica_synced(self, node: RedisServer, timeout: float = 60.0) -> None:
        """Wait until ``node`` is a replica whose link to its master is up (its full sync is over)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                info = node.client().info("replication")
                if info.get("role") == "slave" and info.get("master_link_status") == "up":
                    return
            except Exception:  # noqa: S110 (still loading its data)
                pass
            time.sleep(0.05)
        raise RuntimeError(f"node {node.port} did not become a synced replica in {timeout}s")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
