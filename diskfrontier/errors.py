"""The exceptions diskfrontier raises. Every one a user can meet derives from FrontierError."""

from __future__ import annotations

import os


class FrontierError(Exception):
    """Base class of every error diskfrontier raises about a job directory."""


class JobDirLocked(FrontierError):
    """Another process has the job directory open."""

    def __init__(self, path: str | os.PathLike[str], pid: int | None) -> None:
        self.path = os.fspath(path)
        self.pid = pid
        holder = f"held by pid {pid}" if pid else "held by another process"
        super().__init__(
            f"job directory {self.path} is in use ({holder}); stop that crawl first, "
            f"or use 'diskfrontier inspect' to look at it without opening it"
        )


class JobDirCorrupt(FrontierError):
    """A file of the job directory holds bytes that are not a valid record."""

    def __init__(self, file: str | os.PathLike[str], offset: int, problem: str, *, hint: str | None = None) -> None:
        self.file = os.fspath(file)
        self.offset = offset
        self.problem = problem
        if hint is None:
            hint = (f"run 'diskfrontier verify --repair {os.path.dirname(self.file) or '.'}' "
                    f"to recover every intact record")
        super().__init__(f"{self.file} is damaged at byte {offset}: {problem}; {hint}")


class ScrapyQueueFound(FrontierError):
    """The directory holds Scrapy's own (pickled) request queue, which is only read on request."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        super().__init__(
            f"{self.path} holds Scrapy's own request queue (requests.queue/, pickled requests), which "
            f"diskfrontier does not read by itself; run 'diskfrontier adopt-scrapy {self.path}' to keep "
            f"Scrapy's seen fingerprints and set its queue aside, or add --trust-pickle to import its "
            f"pending requests as well (unpickling runs code: only for a job directory you trust)"
        )


class FormatError(FrontierError):
    """The job directory is of a format this version cannot read."""


class NotInFlight(FrontierError, ValueError):
    """done() was given a request that this frontier did not hand out, or that is already done."""


class FrontierClosed(FrontierError):
    """The frontier was used after close()."""
