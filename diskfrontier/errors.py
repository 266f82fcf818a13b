"""The old import path of ``diskfrontier.core.errors`` (the one exception tree), which keeps working."""

from .core.errors import (  # noqa: F401 - re-exported
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
