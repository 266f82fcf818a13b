"""The note ``adopt-scrapy`` leaves in a job directory: Scrapy already issued this crawl's start requests.

Scrapy's scheduler records no fingerprint for a start request (they are ``dont_filter``), so
after adoption the start URLs look new, and a resumed crawl would fetch them again. The note
(``scrapy-adopted.json``) tells the diskfrontier scheduler's next run that a start request
it has not seen was issued by Scrapy's run: it is remembered as seen instead of being queued
(those that were still waiting in Scrapy's queue were imported with ``--trust-pickle``).
The scheduler removes the note when that run closes; from then on start requests are
deduplicated as usual.
"""

from __future__ import annotations

import contextlib
import os

from ..core.errors import FrontierError
from ..files import boundedjson
from ..files.atomic import write_json_atomic
from ..files.safefs import open_file

NOTE = "scrapy-adopted.json"


def note_path(jobdir: str) -> str:
    return os.path.join(jobdir, NOTE)


def write_note(jobdir: str) -> None:
    """Record that the crawl in ``jobdir`` was adopted from Scrapy, its start requests issued."""
    write_json_atomic(note_path(jobdir), {"start_requests": "issued by Scrapy"})


def has_note(jobdir: str) -> bool:
    """True if ``jobdir`` was adopted from Scrapy and no diskfrontier run has closed since."""
    try:
        with open_file(note_path(jobdir)) as f:
            note = boundedjson.loads(f.read(boundedjson.MAX_JSON_BYTES + 1))
    except FileNotFoundError:
        return False
    except (OSError, ValueError, FrontierError):  # unreadable or a link: start requests are deduplicated as usual
        return False
    return isinstance(note, dict) and note.get("start_requests") == "issued by Scrapy"


def remove_note(jobdir: str) -> None:
    """Forget the note (the first run after adoption has closed)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(note_path(jobdir))
