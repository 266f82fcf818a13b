"""Revisits in a Scrapy crawl: each finished request comes back at the interval its page's changes call for.

With ``DISKFRONTIER_REVISIT`` set (a dict of ``diskfrontier.Revisit``'s options; ``rules`` a list of dicts of
``RevisitRule``'s), ``RevisitMiddleware`` (a downloader middleware, ``revisitmiddleware.py``) adds
``If-None-Match`` and ``If-Modified-Since`` from the page's stored state to each request the scheduler hands
out, and notes each response for the scheduler: its status, ``ETag``, ``Last-Modified`` and a signature of its
body. When the engine has finished with the request, the scheduler finishes it with its next visit scheduled
(``done(request, refetch_after=...)``), its state stored with it. A 304 is "unchanged" (Scrapy's
``HttpErrorMiddleware`` then drops the response, as for any status the spider does not handle); a 404 or 410
ends the page's revisits; a revisit that got no response (a failed download, another status) is backed off
and, after ``give_up`` in a row, no longer revisited. A request whose ``meta`` has ``"diskfrontier_revisit":
False`` is not revisited.

    DOWNLOADER_MIDDLEWARES = {"diskfrontier.scrapy.RevisitMiddleware": 580}
    DISKFRONTIER_REVISIT = {"initial": 86400, "min": 3600, "max": 30 * 86400}
"""

from __future__ import annotations

import collections
import time
from typing import Any

from scrapy import Request as ScrapyRequest
from scrapy.http import Response

from ..request.model import Request
from ..run.revisit import Fetched, Revisit, RevisitRule

GONE, SKIP = "gone", "skip"
OPT_OUT = "diskfrontier_revisit"  # a Scrapy request's meta key: False keeps it from being revisited


def revisit_policy(value: Any) -> Revisit | None:
    """The policy ``DISKFRONTIER_REVISIT`` describes (None when unset); ``ValueError`` naming what is wrong."""
    if value in (None, False, ""):
        return None
    if isinstance(value, Revisit):
        return value
    if value is True:
        return Revisit()
    if not isinstance(value, dict):
        raise ValueError(f"DISKFRONTIER_REVISIT must be a dict of diskfrontier.Revisit's options, got {value!r:.80}")
    options = dict(value)
    rules = options.pop("rules", ())
    try:
        built = tuple(rule if isinstance(rule, RevisitRule) else RevisitRule(**rule) for rule in rules)
        return Revisit(**options, rules=built)
    except TypeError as exc:
        raise ValueError(f"DISKFRONTIER_REVISIT: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"DISKFRONTIER_REVISIT: {exc}") from None


class Revisits:
    """What the downloader saw of the requests handed out, until the engine has finished with them."""

    def __init__(self, policy: Revisit) -> None:
        self.policy = policy
        self._seen: dict[int, Fetched | str] = {}  # id of the frontier request -> its fetch, GONE or SKIP
        self.counts: collections.Counter[str] = collections.Counter()  # for Scrapy's stats, taken by the scheduler

    def note(self, stored: Request, request: ScrapyRequest, response: Response) -> str | None:
        """Note ``response`` to ``request`` (made from ``stored``); return what it was taken for."""
        if request.meta.get(OPT_OUT) is False:
            self._seen[id(stored)] = SKIP
            return SKIP
        status = response.status
        if status == 304:
            self.counts["revisit/not_modified"] += 1
        if status in (404, 410):
            self._seen[id(stored)] = GONE
            return GONE
        if not (200 <= status < 300 or status == 304):
            return None  # a redirect or an error: no fetch of the page to learn from
        headers = response.headers
        self._seen[id(stored)] = Fetched(
            status,
            body=None if status == 304 else response.body,
            etag=_text(headers.get(b"ETag")),
            last_modified=_text(headers.get(b"Last-Modified")),
        )
        return "fetched"

    def forget(self, stored: Request) -> None:
        """``stored`` goes back to the frontier as a retry: what was noted of it no longer holds."""
        self._seen.pop(id(stored), None)

    def split(self, finished: list[Request], now: float | None = None) -> tuple[list[Request], list[Request]]:
        """The finished requests to mark done, and those to finish with their next visit (their ``revisit``
        state set, ``revisit.interval`` from now)."""
        now = time.time() if now is None else now
        plain: list[Request] = []
        again: list[Request] = []
        for stored in finished:
            seen = self._seen.pop(id(stored), None)
            if isinstance(seen, Fetched):
                verdict, stored.revisit = self.policy.after_fetch(stored, seen, now)
                self.counts[f"revisit/{verdict}"] += 1
                again.append(stored)
            elif seen is None and stored.revisit is not None:
                state = self.policy.after_failure(stored, now)
                self.counts["revisit/failed" if state is not None else "revisit/given_up"] += 1
                if state is None:
                    plain.append(stored)
                else:
                    stored.revisit = state
                    again.append(stored)
            else:
                if seen == GONE:
                    self.counts["revisit/gone"] += 1
                plain.append(stored)
        return plain, again


def _text(value: bytes | None) -> str | None:
    if value is None:
        return None
    try:
        return value.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes any bytes
        return None
