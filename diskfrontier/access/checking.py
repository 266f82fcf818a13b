"""``verify_target``: check a crawl of any backend (a job directory, or a crawl in Redis or PostgreSQL) and, with
``repair``, mend what its stored requests tell, with one report of the same shape for all three.

Each backend's own verifier does the work (``jobdir/maintenance/verify.py``, ``redisfrontier/verify.py``,
``pgfrontier/verify.py`` and ``pgfrontier/repair.py``); this module picks it by the target (``backend_of``) and
says what it found in the terms ``diskfrontier verify`` prints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .targets import backend_of

if TYPE_CHECKING:
    from ..jobdir.replay import Progress


@dataclass(frozen=True)
class Problem:
    """One problem: where (a file and offset, a Redis key, a PostgreSQL table and row) and what is wrong."""

    where: str
    offset: int | None
    problem: str

    def __str__(self) -> str:
        at = f" at byte {self.offset}" if self.offset is not None else ""
        return f"{self.where}{at}: {self.problem}"


@dataclass
class Verified:
    """What ``verify_target`` found (and, with repair, did), whatever the backend.

    ``checked``: journal records (job directory), stored requests (Redis) or rows (PostgreSQL) read;
    ``kept``: stored requests a Redis repair kept; ``dropped_bytes``: damaged bytes a job directory's repair
    dropped; ``set_aside``: side files or keys repair moved aside; ``repaired``: damage was found and mended
    (a later verify finds the crawl sound, unless a note says what could not be mended)."""

    backend: str
    target: str
    crawl: str | None
    checked: int = 0
    findings: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    repaired: bool = False
    dropped_bytes: int | None = None
    kept: int | None = None
    set_aside: list[str] = field(default_factory=list)

    @property
    def sound(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        """The report as ``verify --json`` gives it."""
        return {"backend": self.backend, "sound": self.sound, "checked": self.checked, "repaired": self.repaired,
                "dropped_bytes": self.dropped_bytes, "kept": self.kept, "notes": self.notes,
                "set_aside": self.set_aside,
                "findings": [{"where": f.where, "offset": f.offset, "problem": f.problem} for f in self.findings]}


def verify_target(target: str | os.PathLike[str], crawl: str | None = None, *, repair: bool = False,
                  progress: Progress | None = None) -> Verified:
    """Check the crawl at ``target`` (a job directory, or a Redis or PostgreSQL URL with ``crawl``); with
    ``repair``, mend it (stop the crawl's clients first). ``progress``: a job directory's progress callback."""
    kind = backend_of(target)
    if kind == "jobdir":
        if crawl is not None:
            raise ValueError(f"crawl= names a crawl in Redis or PostgreSQL, and {os.fspath(target)} is a job directory")
        return _jobdir(os.fspath(target), repair, progress)
    if crawl is None:
        raise ValueError("a server's URL names a server: give the crawl's name as crawl=")
    url = os.fspath(target)
    return _redis(url, crawl, repair) if kind == "redis" else _postgres(url, crawl, repair)


def _jobdir(path: str, repair: bool, progress: Progress | None) -> Verified:
    from ..jobdir.maintenance.verify import verify

    report = verify(path, repair=repair, progress=progress)
    return Verified("jobdir", path, None, report.records,
                    [Problem(f.file, f.offset, f.problem) for f in report.findings], list(report.notes),
                    report.repaired, report.dropped_bytes, None, list(report.set_aside))


def _redis(url: str, crawl: str, repair: bool) -> Verified:
    from ..redisfrontier.verify import verify_crawl

    report = verify_crawl(url, crawl, repair=repair)
    return Verified("redis", url, crawl, report.requests, [Problem(f.key, None, f.problem) for f in report.findings],
                    list(report.notes), report.repaired, None, report.kept, list(report.set_aside))


def _postgres(url: str, crawl: str, repair: bool) -> Verified:
    from ..pgfrontier.verify import verify_crawl

    report = verify_crawl(url, crawl)
    out = Verified("postgres", url, crawl, report.rows, [Problem(where, None, what) for where, what in report.findings])
    if not repair or report.sound:
        return out
    if _absent(report.findings):
        out.notes.append("not repaired: the crawl is not there, or its meta table holds no format or order this "
                         "version reads, and its rows cannot tell them")
        return out
    from ..pgfrontier.repair import repair_crawl

    done = repair_crawl(url, crawl)
    out.notes += done.notes
    after = verify_crawl(url, crawl)
    for where, what in after.findings:
        out.notes.append(f"not repaired: {where}: {what} (left in place: the rows do not tell what it should be)")
    out.repaired = True
    return out


def _absent(findings: list[tuple[str, str]]) -> bool:
    """Whether the crawl was not there, or its meta table is one no repair can use."""
    return any(where.startswith(("df_", "meta ")) for where, _ in findings)
