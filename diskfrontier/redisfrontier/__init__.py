"""The Redis backend: the job directory's contract for many crawler processes on many machines."""

from .connection import LeaseExpired, RedisMisconfigured, RedisUnavailable, is_redis_url
from .frontier import RedisFrontier

__all__ = ["LeaseExpired", "RedisFrontier", "RedisMisconfigured", "RedisUnavailable", "is_redis_url"]
