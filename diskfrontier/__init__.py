"""diskfrontier: a resumable, disk-persistent crawl frontier that survives ``kill -9``."""

from .errors import (
    CrawlDamaged,
    FormatError,
    FrontierClosed,
    FrontierError,
    JobDirCorrupt,
    JobDirLocked,
    JobDirNotOwned,
    JobDirUnsafe,
    NotInFlight,
    RequestTooLarge,
    ScrapyQueueFound,
)
from .failures import FailedRequest
from .frontier import Frontier
from .redisfrontier import LeaseExpired, RedisFrontier, RedisMisconfigured, RedisUnavailable
from .request import Request
from .runs import CrawlStats, RunStats, crawl

__all__ = [
    "CrawlDamaged",
    "CrawlStats",
    "FailedRequest",
    "FormatError",
    "Frontier",
    "FrontierClosed",
    "FrontierError",
    "JobDirCorrupt",
    "JobDirLocked",
    "JobDirNotOwned",
    "JobDirUnsafe",
    "LeaseExpired",
    "NotInFlight",
    "RedisFrontier",
    "RedisMisconfigured",
    "RedisUnavailable",
    "Request",
    "RequestTooLarge",
    "RunStats",
    "ScrapyQueueFound",
    "crawl",
]
__version__ = "0.1.0"
