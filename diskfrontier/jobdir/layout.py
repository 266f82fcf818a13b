"""The job directory: its file names, ``frontier.json`` and the ``lock``.

Format 4 (docs/format.md describes every file)::

    JOBDIR/
      frontier.json        {"format": "diskfrontier", "version": 6, "order", "id", "created", ...}
      lock                 flock()ed by the one process that has the frontier open; its pid (lock.py)
      requests.seen        every accepted fingerprint (Scrapy's format, seen.py)
      requests.seen.sums   a crc32 of every 64 KiB block of requests.seen (seen.py)
      requests.seen.index  the seen index as saved at a clean close, loaded in bulk (seenindex.py)
      requests.queue/      per-priority queuelib queues of journal offsets + active.json (queues.py)
      requests.urls        the journal: every accepted push and done (journal.py)
      requests.cursor      the checkpoint (checkpoint.py)
      requests.hosts       the host table and delayed requests at the last clean close (jobdir/hostfile.py)
      hosts.health         sidecar: each failing host's consecutive failures (jobdir/hostmeta.py)
      outcomes.json        the outcome counters: statuses, bytes, fetch times, failures (jobdir/outcomefile.py)
      robots/              sidecar: each host's robots.txt, one file a host (jobdir/hostmeta.py)

Format 1, 2 and 3 directories are upgraded in place when they are opened (maintenance/upgrade.py).

``id`` is 16 random hex digits made when the directory is created. Folded to 32 bits it is
the directory's *salt* (``salt_of``), which every journal record's checksums and every
seen-file block's checksum hold, so that a record taken from another job directory (even
one built by the same steps, byte for byte) is damage here, not data.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from ..core.errors import FormatError, JobDirCorrupt
from ..files import boundedjson
from ..files.atomic import write_json_atomic
from ..files.safefs import DIRECTORY, FILE, open_file
from .lock import Lock, probe_lock  # noqa: F401 - the lock lives in lock.py; imported from here too

FORMAT_NAME = "diskfrontier"
FORMAT_VERSION = 6
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)  # 1 to 5 are upgraded on open
JOURNAL_FORMAT = 4  # the journal's own format (its magic): formats 5 and 6 only added to what its records hold
SALTED_FROM = 4  # the first format whose checksums hold the directory's salt (and whose frontier.json has an id)
ID_PATTERN = re.compile(r"[0-9a-f]{16}")
FINGERPRINT_VERSION = "scrapy-sha1-1"


@dataclass(frozen=True)
class Layout:
    """The paths of a job directory's files."""

    root: str

    @property
    def meta(self) -> str:
        return os.path.join(self.root, "frontier.json")

    @property
    def lock(self) -> str:
        return os.path.join(self.root, "lock")

    @property
    def seen(self) -> str:
        return os.path.join(self.root, "requests.seen")

    @property
    def seen_index(self) -> str:
        return os.path.join(self.root, "requests.seen.index")

    @property
    def queue_dir(self) -> str:
        return os.path.join(self.root, "requests.queue")

    @property
    def active(self) -> str:
        return os.path.join(self.root, "requests.queue", "active.json")

    @property
    def journal(self) -> str:
        return os.path.join(self.root, "requests.urls")

    @property
    def cursor(self) -> str:
        return os.path.join(self.root, "requests.cursor")

    @property
    def seen_sums(self) -> str:
        return os.path.join(self.root, "requests.seen.sums")

    @property
    def hosts(self) -> str:
        return os.path.join(self.root, "requests.hosts")

    @property
    def status(self) -> str:
        return os.path.join(self.root, "status.json")

    @property
    def health(self) -> str:
        return os.path.join(self.root, "hosts.health")

    @property
    def compacting(self) -> str:
        return os.path.join(self.root, "requests.urls.compact")

    def entries(self) -> dict[str, str]:
        """Each entry of the job directory and its kind, for ``safefs.check_entries``."""
        files = ("frontier.json", "lock", "requests.seen", "requests.seen.sums", "requests.seen.index",
                 "requests.urls", "requests.cursor", "requests.urls.compact", "requests.hosts", "status.json",
                 "hosts.health", "outcomes.json")
        return {**dict.fromkeys(files, FILE), "requests.queue": DIRECTORY, "inbox": DIRECTORY, "robots": DIRECTORY}


_META_HINT = (
    'restore it from a backup, or write it anew as {"format": "diskfrontier", "version": 4, '
    '"order": "lifo", "id": ID} (or "fifo": FIFO queues are folders in requests.queue/), where ID is the "id" '
    'that requests.cursor names'
)


def read_meta(layout: Layout) -> dict[str, Any]:
    """Read and check ``frontier.json`` (format 1 or 2; ``meta["version"]`` says which)."""
    try:
        with open_file(layout.meta) as f:
            meta = boundedjson.loads(f.read(boundedjson.MAX_JSON_BYTES + 1))
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise JobDirCorrupt(layout.meta, 0, f"unreadable frontier.json ({exc})", hint=_META_HINT) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise FormatError(f"{layout.meta} is not a diskfrontier job directory description")
    version = meta.get("version")
    if version not in READABLE_VERSIONS:
        raise FormatError(
            f"{layout.root}: incompatible job directory format (got v{version}, can handle "
            f"v{READABLE_VERSIONS[0]} to v{FORMAT_VERSION}); use the diskfrontier release that wrote it"
        )
    if meta.get("order") not in ("lifo", "fifo"):
        raise JobDirCorrupt(layout.meta, 0, f"unknown queue order {meta.get('order')!r}", hint=_META_HINT)
    if (version >= SALTED_FROM or "id" in meta) and not (isinstance(meta.get("id"), str) and ID_PATTERN.fullmatch(
            meta["id"]) and fold_id(meta["id"])):
        raise JobDirCorrupt(layout.meta, 0, f"its id {meta.get('id')!r} is not 16 hex digits", hint=_META_HINT)
    return meta


def journal_format(version: int) -> int:
    """The format of the journal of a job directory of format ``version`` (its records' framing)."""
    return min(version, JOURNAL_FORMAT)


def new_id() -> str:
    """A new job directory id: 16 random hex digits whose salt is not 0."""
    while True:
        made = secrets.token_hex(8)
        if fold_id(made):
            return made


def fold_id(made: str) -> int:
    """An id (16 hex digits) folded to the 32-bit salt that checksums hold."""
    value = int(made, 16)
    return (value ^ (value >> 32)) & 0xFFFFFFFF


def salt_of(meta: dict[str, Any]) -> int:
    """The salt of the files of a job directory described by ``meta`` (checked by ``read_meta``): its ``id``
    folded to 32 bits in format 4; 0 in formats 1 to 3, whose checksums hold none (an upgrade under way may
    have given ``frontier.json`` an id already: its files get the salt when the upgrade writes them)."""
    if meta.get("version", 0) < SALTED_FROM:
        return 0
    return fold_id(meta["id"])


def write_meta(layout: Layout, order: str) -> dict[str, Any]:
    """Write a new ``frontier.json``."""
    meta = {
        "format": FORMAT_NAME, "version": FORMAT_VERSION, "order": order, "id": new_id(),
        "fingerprint": FINGERPRINT_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json_atomic(layout.meta, meta)
    return meta
