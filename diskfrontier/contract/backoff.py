"""How long a host that keeps failing is blocked: the rule ``host_failed`` applies on both backends (the Redis
backend's ``HOST_FAILED`` script computes the same, ``redisfrontier/lua/host_failed.lua``)."""

from __future__ import annotations


def host_backoff(failures: int, block_after: int, backoff: float, backoff_max: float) -> float:
    """How long a host with ``failures`` consecutive failures is blocked: 0 below ``block_after``, then
    ``backoff`` doubled for each failure past it, at most ``backoff_max``."""
    if failures < block_after:
        return 0.0
    steps = min(failures - block_after, 64)
    return min(backoff * 2.0 ** steps, backoff_max)
