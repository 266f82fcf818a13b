"""diskfrontier: a resumable, disk-persistent crawl frontier that survives ``kill -9``."""

from .contract import FrontierProtocol
from .errors import (
    CallbackRefused,
    CrawlDamaged,
    DiskFull,
    FormatError,
    FrontierClosed,
    FrontierError,
    IncompleteCopy,
    JobDirCorrupt,
    JobDirLocked,
    JobDirNotOwned,
    JobDirUnsafe,
    JobDirWriteError,
    NotInFlight,
    RequestTooLarge,
    ScrapyQueueFound,
)
from .failures import FailedRequest
from .jobdir.frontier import Frontier
from .redisfrontier import LeaseExpired, RedisFrontier, RedisMisconfigured, RedisUnavailable
from .request.model import Request
from .runs import CrawlStats, RunStats, crawl

__all__ = [
    "CallbackRefused",
    "CrawlDamaged",
    "CrawlStats",
    "DiskFull",
    "FailedRequest",
    "FormatError",
    "Frontier",
    "FrontierClosed",
    "FrontierError",
    "FrontierProtocol",
    "IncompleteCopy",
    "JobDirCorrupt",
    "JobDirLocked",
    "JobDirNotOwned",
    "JobDirUnsafe",
    "JobDirWriteError",
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
