"""The exceptions diskfrontier raises. Every one a user can meet derives from FrontierError."""

from __future__ import annotations

import os


class FrontierError(Exception):
    """Base class of every error diskfrontier raises about a job directory."""


class PermanentError(Exception):
    """Raised by a ``crawl()`` handler for a failure that trying again cannot mend (a 404, a page
    that cannot be parsed): the request is recorded as failed at once, with no retry, and its
    host is not counted as failing. Anything else a handler raises is retried with backoff.

    Not a ``FrontierError``: the handler raises it, not diskfrontier.
    """


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


class IncompleteCopy(FrontierError):
    """The destination of ``diskfrontier copy`` is not finished: the copy was stopped before its
    end (or is still running). Running the same copy again redoes it."""


class FrontierClosed(FrontierError):
    """The frontier was used after close()."""


class CrawlDamaged(FrontierError):
    """A Redis crawl's keys disagree with each other or hold values diskfrontier never wrote: keys
    were deleted, evicted or changed from outside. ``key`` names the key found wrong."""

    def __init__(self, key: str, problem: str, *, hint: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"{key}: {problem}; {hint}")


class JobDirUnsafe(FrontierError):
    """An entry of the job directory is a symbolic link, or not the kind of file it should be."""

    LINK = "is a symbolic link"
    LINK_WHY = ("diskfrontier never follows links inside a job directory "
                "(a link there could make it overwrite files elsewhere)")

    def __init__(
        self, path: str | os.PathLike[str], problem: str = LINK, *, why: str | None = None,
        fix: str = "replace it with the real file",
    ) -> None:
        self.path = os.fspath(path)
        self.problem = problem
        if why is None and problem == self.LINK:
            why = self.LINK_WHY
        because = f"; {why}" if why else ""
        super().__init__(f"{self.path} {problem}{because}: {fix}")


class JobDirNotOwned(FrontierError):
    """The frontier was used in a process that did not open it (a child forked from the one that did)."""

    def __init__(self, path: str | os.PathLike[str], owner: int | None) -> None:
        self.path = os.fspath(path)
        self.owner = owner
        self.pid = os.getpid()
        opener = f"pid {owner}" if owner else "another process"
        super().__init__(
            f"the frontier of {self.path} was opened by {opener}, not by this process (pid {self.pid}, "
            f"a forked child): only the process that opened a job directory may use or close it; "
            f"open the frontier in the child itself, after the parent has closed it"
        )


class CallbackRefused(FrontierError, ValueError):
    """A stored Scrapy callback or errback names something that is not a callback method of the spider."""

    def __init__(self, name: object, role: str, spider: str | None, problem: str) -> None:
        self.name = name
        self.role = role
        self.problem = problem
        super().__init__(
            f"the stored {role} {name!r:.100} cannot be bound to the spider {spider!r} ({problem}): "
            f"only the spider's own methods are callbacks; the request is not handed out (a job directory "
            f"from elsewhere may have been altered, or the spider changed: restore the method)"
        )


class RequestTooLarge(ValueError):
    """A request exceeds what a job directory can hold: its URL, body, stored size or nesting depth.

    An input error like any other bad ``Request`` field, so a ``ValueError`` (not a
    ``FrontierError``, which is about the job directory): ``push`` and ``push_many`` raise
    it before anything is written. The limits are ``MAX_URL_LENGTH``, ``MAX_BODY_BYTES``,
    ``MAX_RECORD_BYTES`` and ``MAX_DEPTH`` in ``diskfrontier.request``.
    """


class JobDirWriteError(FrontierError, OSError):
    """A write to a file failed for a reason outside the program: an I/O error, a read-only disk.

    Also an ``OSError`` (with the original ``errno`` and the file as ``filename``), so that
    code catching ``OSError`` around a write still does. The call that failed completed
    nothing: the frontier is as before it, or marked to be rebuilt from its journal.
    """

    def __init__(self, path: str | os.PathLike[str], cause: OSError, fix: str | None = None) -> None:
        self.path = os.fspath(path)
        reason = cause.strerror or str(cause)
        if fix is None:
            fix = (f"check the disk that holds {os.path.dirname(self.path) or '.'} and try again; "
                   f"nothing acknowledged was lost (the call that failed did not complete)")
        super().__init__(f"cannot write {self.path}: {reason}; {fix}")
        self.errno = cause.errno
        self.strerror = cause.strerror
        self.filename = self.path

    def __str__(self) -> str:
        return str(self.args[0])


class DiskFull(JobDirWriteError):
    """A write failed because the disk is full or a disk quota is reached (ENOSPC, EDQUOT)."""

    def __init__(self, path: str | os.PathLike[str], cause: OSError, fix: str | None = None) -> None:
        where = os.path.dirname(os.fspath(path)) or "."
        super().__init__(path, cause, fix=f"free space on the disk that holds {where} (or raise the quota) and " + (
            fix or "open it again; nothing acknowledged was lost (the call that failed did not complete)"))
