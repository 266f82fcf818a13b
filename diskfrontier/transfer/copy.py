"""Copying a crawl between a job directory, Redis and PostgreSQL (any two of them, or two of one).

What is copied: every pending request (a job directory's requests in flight at a crash or
at its close, and a Redis crawl's leased ones, come over as pending) with its priority,
slot, attempts and not_before; every failed request with its error, attempts and time;
the whole seen set (the fingerprints of requests already done included); each host's
delay, block and budget, and its done count.

The source is only read: a job directory through the read-only views of ``jobinfo`` (no
lock taken, so a live crawl is neither disturbed nor refused), a Redis crawl with scans, a PostgreSQL crawl
page by page.
The destination must be new or empty, and appears only when the copy is complete
(``transfer/destination.py``): a copy stopped at any point is redone by running it again. Pending
requests are pushed before the rest of the seen set is marked, so that a fingerprint
marked first cannot make the push of its own pending request count as a duplicate;
failed requests come before the hosts' done counts, which they are part of.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..access.targets import CrawlView, HostCopy, backend_name, is_server_target, open_view
from ..contract.protocol import FrontierProtocol
from ..contract.values import FailedRequest
from ..core.errors import FrontierError
from ..jobdir.recovery import Progress
from ..request.model import Request
from .destination import Build, JobDirBuild, PostgresBuild, RedisBuild

BATCH = 10_000  # requests or fingerprints per push_many / mark_seen call
REDIS_MAX_BUDGET = 2**53 - 1  # the largest budget a Redis or PostgreSQL crawl keeps


@dataclass
class CopyReport:
    """What ``copy_crawl`` did."""

    source: str
    destination: str
    order: str
    pending: int = 0  # pending requests read from the source
    queued: int = 0  # of them, pushed to the destination
    duplicates: int = 0  # of them, refused as duplicates (another pending request had the fingerprint)
    failed: int = 0  # failed requests copied, with their errors, attempts and times
    seen_read: int = 0  # fingerprints read from the source's seen set (a few may be read twice)
    seen: int = 0  # fingerprints in the destination's seen set at the end
    host_settings: int = 0  # hosts whose delay, block or budget was copied
    host_done: int = 0  # hosts whose done count was copied
    done: int = 0  # their done counts added up
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def shown_url(url: str) -> str:
    """``url`` without its password."""
    return re.sub(r"//[^@/]*@", "//***@", url)


def describe(target: str, crawl: str | None) -> str:
    """A job directory's path, or ``crawl 'name' at redis://...`` (no password)."""
    return target if crawl is None else f"crawl {crawl!r} at {shown_url(target)}"


# ------------------------------------------------------------------ the copy
def _check_hosts(hosts: Iterable[HostCopy], dst: str) -> None:
    """Refuse, before anything is written, a host setting the destination ``dst`` cannot hold."""
    if not is_server_target(dst):
        return
    for h in hosts:
        if h.budget is not None and h.budget > REDIS_MAX_BUDGET:
            raise FrontierError(f"host {h.host!r} has a budget of {h.budget:,}; {backend_name(dst)} keeps budgets up "
                                f"to 2**53 - 1: lower it in the source first (diskfrontier host ... --budget N)")


def _batches(items: Iterable[Request]) -> Iterator[list[Request]]:
    batch: list[Request] = []
    for item in items:
        batch.append(item)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _settings_note(report: CopyReport, source: CrawlView, src: str, to_jobdir: bool) -> None:
    settings = source.settings
    if settings is None or not to_jobdir:
        return
    own = []
    if settings["delay"]:
        own.append(f"delay={settings['delay']:g}")
    if settings["per_host"] is not None:
        own.append(f"per_host={settings['per_host']}")
    if settings["prefer"] != "priority":
        own.append(f"prefer={settings['prefer']!r}")
    if own:
        report.notes.append(f"the {backend_name(src)} crawl's settings ({', '.join(own)}) are not kept in a job "
                            f"directory: pass them to Frontier() when the crawl is opened")


def _copy(source: CrawlView, destination: FrontierProtocol, hosts: list[HostCopy], report: CopyReport,
          progress: Progress | None) -> None:
    """Write the whole copy into ``destination``: pending requests, seen set, failed requests, hosts."""
    total = source.pending_count()
    for batch in _batches(source.pending_requests()):
        report.queued += destination.push_many(batch)
        report.pending += len(batch)
        if progress is not None:
            progress(report.pending, max(total, report.pending))
    report.duplicates = report.pending - report.queued

    marked: list[bytes] = []

    def take(fingerprint: bytes) -> None:
        marked.append(fingerprint)
        report.seen_read += 1
        if len(marked) >= BATCH:
            destination.mark_seen(marked)
            marked.clear()

    for fingerprint in source.seen_fingerprints():
        take(fingerprint)
    if marked:
        destination.mark_seen(marked)
    failed: list[FailedRequest] = []
    for entry in source.failed():  # before the hosts: a failure counts in its host's done count
        failed.append(entry)
        if len(failed) >= BATCH:
            report.failed += destination.record_failed(failed)
            failed.clear()
    if failed:
        report.failed += destination.record_failed(failed)
    for h in hosts:  # done counts first: a host setting then places the host knowing them
        if h.done:
            destination.set_done_count(h.host, h.done)
            report.host_done += 1
            report.done += h.done
    for h in hosts:
        if h.delay is not None:
            destination.set_delay(h.host, h.delay)
        if h.blocked_until:
            destination.block(h.host, h.blocked_until)
        if h.budget is not None:
            destination.set_budget(h.host, h.budget)
        report.host_settings += h.has_settings
    report.seen = int(destination.stats()["seen"])


def copy_crawl(src: str, dst: str, *, from_crawl: str | None = None, to_crawl: str | None = None,
               progress: Progress | None = None, shards: int | None = None) -> CopyReport:
    """Copy the crawl at ``src`` into ``dst`` (each a job directory, or a Redis URL with its crawl
    name in ``from_crawl`` / ``to_crawl``); ``dst`` must be new or empty, or an unfinished copy
    (which is deleted and copied again).

    ``dst`` appears only when the copy is complete: a job directory is built under another
    name and renamed into place, a Redis crawl is marked until the end (``IncompleteCopy`` for
    any other open of it). After an error or an interrupt a job directory's unfinished copy is
    removed; a Redis crawl's stays marked until the copy is run again. ``shards``: the number of
    shards of a Redis crawl made (None: one; see ``RedisFrontier``); a job directory has none.

    FrontierError for a source that cannot be read, a destination that is not empty, or a
    failure while writing.
    """
    if is_server_target(src) != (from_crawl is not None) or is_server_target(dst) != (to_crawl is not None):
        raise ValueError("give from_crawl exactly when src is a Redis or PostgreSQL URL, and to_crawl when dst is one")
    source = open_view(src, from_crawl)
    try:
        if source.dedupe == "bloom":
            raise FrontierError(f"{describe(src, from_crawl)} dedupes with a Bloom filter, whose fingerprints cannot "
                                f"be listed: a copy would lose its seen set, and the URLs already crawled would be "
                                f"crawled again. Export its pending requests instead (diskfrontier export, without "
                                f"--seen) and import them where you want them")
        hosts = source.host_copies()
        _check_hosts(hosts, dst)
        report = CopyReport(describe(src, from_crawl), describe(dst, to_crawl), source.order)
        build: Build
        if to_crawl is None:
            if shards is not None:
                raise ValueError(f"shards= is for a Redis destination, and {dst} is a job directory")
            build = JobDirBuild(dst, source.order, report.source)
        elif backend_name(dst) == "PostgreSQL":
            if shards is not None:
                raise ValueError(f"shards= is for a Redis destination, and {report.destination} is in PostgreSQL")
            build = PostgresBuild(dst, to_crawl, order=source.order, settings=source.settings,
                                  where=report.destination)
        else:
            expected = 2 * (source.seen_estimate() + source.pending_count())
            build = RedisBuild(dst, to_crawl, order=source.order, source=report.source, settings=source.settings,
                               expected=expected, where=report.destination, shards=shards)
        report.notes += build.notes
        try:
            _copy(source, build.frontier, hosts, report, progress)
            build.finish()
        except BaseException as exc:
            build.abandon()
            if not isinstance(exc, (FrontierError, OSError, ValueError, TypeError)):
                raise
            what = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.filename else str(exc)
            left = ("it is marked unfinished: run the same copy again to redo it" if isinstance(build, RedisBuild)
                    else "nothing of it was left")
            raise FrontierError(f"{what} (the copy to {report.destination} did not finish; {left})") from None
        _settings_note(report, source, src, to_crawl is None)
        if source.seen_bits is not None and to_crawl is None:
            report.notes.append(f"the source's seen set keeps {source.seen_bits} bits of each fingerprint: those of "
                                f"requests no longer stored were written to requests.seen as their {source.seen_bits} "
                                f"bits and zero bytes, which dedupe exactly as the whole fingerprints did (the job "
                                f"directory's index keys by the same {source.seen_bits} bits)")
        return report
    finally:
        source.close()


__all__ = ["CopyReport", "HostCopy", "copy_crawl", "describe", "shown_url"]
