"""The Redis backend: the job directory's contract for many crawler processes on many machines.

``RedisFrontier`` is imported when first used; the errors and ``is_redis_url`` (what the command
line needs to tell a Redis URL from a job directory) at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .connection import LeaseExpired, NotReplicated, RedisMisconfigured, RedisUnavailable, is_redis_url

if TYPE_CHECKING:
    from .frontier import RedisFrontier

__all__ = ["LeaseExpired", "NotReplicated", "RedisFrontier", "RedisMisconfigured", "RedisUnavailable", "is_redis_url"]

if not TYPE_CHECKING:  # hidden from type checkers, which would otherwise accept any name of the package

    def __getattr__(name: str) -> Any:
        """``RedisFrontier``, imported from ``frontier.py`` on first use (PEP 562)."""
        if name != "RedisFrontier":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from .frontier import RedisFrontier

        globals()[name] = RedisFrontier
        return RedisFrontier
