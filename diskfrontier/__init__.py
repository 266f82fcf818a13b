"""diskfrontier: a resumable, disk-persistent crawl frontier that survives ``kill -9``.

The public names are imported when first used (``from diskfrontier import Frontier`` imports the
job directory's frontier, not the Redis backend or ``crawl()``), so that a program, or a command of
``diskfrontier``, loads only what it needs. The errors are light and imported at once.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.errors import (
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
    PermanentError,
    RequestTooLarge,
    ScrapyQueueFound,
)

if TYPE_CHECKING:  # what type checkers see; at run time each comes from _LAZY when first asked for
    from .access.asyncfrontier import AsyncFrontier
    from .contract.protocol import FrontierProtocol
    from .contract.values import FailedRequest
    from .jobdir.frontier import Frontier
    from .jobdir.upkeep import Maintenance
    from .pgfrontier import PostgresFrontier, PostgresUnavailable
    from .redisfrontier import LeaseExpired, NotReplicated, RedisFrontier, RedisMisconfigured, RedisUnavailable
    from .request.model import Request
    from .request.revisit import RevisitState
    from .run.acrawl import acrawl
    from .run.crawl import CrawlStats, RunStats, crawl
    from .run.failurekinds import FailureKind
    from .run.options import RunOptions
    from .run.revisit import Fetched, Revisit, RevisitRule

# name -> the module that defines it, imported on first use
_LAZY = {
    "AsyncFrontier": ".access.asyncfrontier",
    "acrawl": ".run.acrawl",
    "FrontierProtocol": ".contract.protocol",
    "FailedRequest": ".contract.values",
    "Frontier": ".jobdir.frontier",
    "LeaseExpired": ".redisfrontier",
    "Maintenance": ".jobdir.upkeep",
    "NotReplicated": ".redisfrontier",
    "PostgresFrontier": ".pgfrontier",
    "PostgresUnavailable": ".pgfrontier",
    "RedisFrontier": ".redisfrontier",
    "RedisMisconfigured": ".redisfrontier",
    "RedisUnavailable": ".redisfrontier",
    "Request": ".request.model",
    "RevisitState": ".request.revisit",
    "Fetched": ".run.revisit",
    "Revisit": ".run.revisit",
    "RevisitRule": ".run.revisit",
    "CrawlStats": ".run.crawl",
    "FailureKind": ".run.failurekinds",
    "RunOptions": ".run.options",
    "RunStats": ".run.crawl",
    "crawl": ".run.crawl",
}

__all__ = [
    "AsyncFrontier",
    "CallbackRefused",
    "CrawlDamaged",
    "CrawlStats",
    "DiskFull",
    "FailedRequest",
    "FailureKind",
    "Fetched",
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
    "Maintenance",
    "NotInFlight",
    "NotReplicated",
    "PermanentError",
    "PostgresFrontier",
    "PostgresUnavailable",
    "RedisFrontier",
    "RedisMisconfigured",
    "RedisUnavailable",
    "Request",
    "RequestTooLarge",
    "Revisit",
    "RevisitRule",
    "RevisitState",
    "RunOptions",
    "RunStats",
    "ScrapyQueueFound",
    "acrawl",
    "crawl",
]
__version__ = "0.1.0"

if not TYPE_CHECKING:  # hidden from type checkers, which would otherwise accept any name of the package

    def __getattr__(name: str) -> Any:
        """A public name of ``_LAZY``, imported from its module and kept here (PEP 562)."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_LAZY})
