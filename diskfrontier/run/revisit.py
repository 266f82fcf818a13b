"""``Revisit``: a crawl that comes back to each page, at an interval learned from how often it changes.

After each fetch of a page the runner (``crawl()``, ``acrawl()``, the Scrapy scheduler) tells
whether it changed since the last one: unchanged when the server answered 304 Not Modified, gave
the same ``ETag``, or the content has the same signature; changed when the signature (or, without
one, the ``ETag`` or ``Last-Modified``) differs. The page's interval is multiplied by ``1 + inc``
when it is unchanged and by ``1 - dec`` when it changed, kept within ``min`` and ``max`` (Nutch's
``AdaptiveFetchSchedule`` rule), and the request is finished with its next visit scheduled that
far ahead (``done(request, refetch_after=...)``), its ``RevisitState`` stored with it.

A changed page whose ``Last-Modified`` says when the version fetched appeared (after the last
fetch, not after now) tells more than "it changed": the version's age is about the time between
its changes. With ``by_age`` (the default) the interval becomes at most that age, so that a page
that changes far more often than its interval gets there in one visit instead of a dozen (the
use Nutch's ``sync_delta`` makes of the modification time; the rule above then keeps it there).

A revisit that fails (after the run's retries) is tried again after twice its interval (within
``max``); after ``give_up`` failures in a row, or at once for a page that is gone (404, 410:
``PermanentError``), the request is failed for good and its revisits end.
"""

from __future__ import annotations

import dataclasses
import datetime
import email.utils
import hashlib
import re
from typing import Any

from ..request.model import Request
from ..request.revisit import MAX_VALIDATOR, RevisitState

_MAX_SECONDS = 10**10
NEW, CHANGED, UNCHANGED, UNKNOWN = "new", "changed", "unchanged", "unknown"
"""What a fetch found: the page's first fetch, changed, unchanged, or no way to tell."""


@dataclasses.dataclass(frozen=True)
class Fetched:
    """What a handler tells the runner of a fetch, for the page's next visit.

    ``status``: the HTTP status (304: not modified). ``body``: the content, from which a signature
    is computed (a 16-byte BLAKE2b digest); or ``signature``: one of the handler's own (bytes, for
    a content signature that ignores what changes on every fetch, such as a clock in the page).
    ``etag`` and ``last_modified``: the response's validators, sent back on the next visit as
    ``If-None-Match`` and ``If-Modified-Since``.
    """

    status: int
    body: bytes | None = None
    etag: str | None = None
    last_modified: str | None = None
    signature: bytes | None = None

    def __post_init__(self) -> None:
        if isinstance(self.status, bool) or not isinstance(self.status, int) or not 100 <= self.status <= 999:
            raise ValueError(f"Fetched.status must be an HTTP status from 100 to 999, got {self.status!r}")
        if self.body is not None and not isinstance(self.body, (bytes, bytearray, memoryview)):
            raise TypeError(f"Fetched.body must be bytes or None, got {type(self.body).__name__}")
        if self.signature is not None and (not isinstance(self.signature, bytes) or not 1 <= len(self.signature) <= 64):
            raise ValueError(f"Fetched.signature must be None or 1 to 64 bytes, got {self.signature!r:.80}")
        for name in ("etag", "last_modified"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"Fetched.{name} must be a str or None, got {type(value).__name__}")

    def content_signature(self) -> bytes | None:
        """The signature given, else one of the body; None without either (or for a 304, which has none)."""
        if self.signature is not None:
            return self.signature
        if self.body is None or self.status == 304:
            return None
        return hashlib.blake2b(bytes(self.body), digest_size=16).digest()


@dataclasses.dataclass(frozen=True)
class RevisitRule:
    """Other bounds for some pages: those of ``host`` (a request's slot, exactly) and/or whose URL ``match``
    (a regular expression, searched) finds. ``min``, ``max`` and ``initial`` left None keep the policy's."""

    host: str | None = None
    match: str | None = None
    min: float | None = None
    max: float | None = None
    initial: float | None = None

    def __post_init__(self) -> None:
        if self.host is None and self.match is None:
            raise ValueError("a RevisitRule needs host= or match= (or both)")
        if self.host is not None and not isinstance(self.host, str):
            raise TypeError(f"RevisitRule.host must be a str, got {type(self.host).__name__}")
        if self.match is not None:
            try:
                re.compile(self.match)
            except (re.error, TypeError) as exc:
                raise ValueError(f"RevisitRule.match {self.match!r} is not a regular expression: {exc}") from None
        for name in ("min", "max", "initial"):
            value = getattr(self, name)
            if value is not None:
                _seconds(f"RevisitRule.{name}", value)

    def applies(self, request: Request) -> bool:
        """True if this rule is for ``request``."""
        if self.host is not None and request.slot != self.host:
            return False
        return self.match is None or re.search(self.match, request.url) is not None


@dataclasses.dataclass(frozen=True)
class Revisit:
    """How a crawl comes back to the pages it fetched: each page's interval learned from its changes.

    ``initial``: the interval after a page's first fetch (seconds; default a day). ``min`` and
    ``max``: the bounds of every interval (an hour and 30 days). ``inc`` and ``dec``: an unchanged
    page's interval grows by ``1 + inc``, a changed page's shrinks by ``1 - dec`` (0.4 and 0.2, as
    Nutch's adaptive schedule; StormCrawler keeps 1 hour to 14 days, Heritrix's ``WaitEvaluator``
    multiplies and divides by 1.5 within 1 hour to 4 weeks). ``rules``: other bounds for some hosts
    or URLs, the first that applies wins. ``give_up``: failed revisits in a row after which the
    page is failed for good. ``by_age``: a changed page's interval is at most the age of the
    version fetched, when its ``Last-Modified`` lies between the page's last fetch and now.
    """

    initial: float = 86400.0
    min: float = 3600.0
    max: float = 30 * 86400.0
    inc: float = 0.4
    dec: float = 0.2
    rules: tuple[RevisitRule, ...] = ()
    give_up: int = 5
    by_age: bool = True

    def __post_init__(self) -> None:
        for name in ("initial", "min", "max"):
            _seconds(f"Revisit.{name}", getattr(self, name))
        if self.min > self.max:
            raise ValueError(f"Revisit.min ({self.min}) must not be more than Revisit.max ({self.max})")
        for name in ("inc", "dec"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ValueError(f"Revisit.{name} must be a number from 0 to less than 1, got {value!r}")
        rules = tuple(self.rules)
        for rule in rules:
            if not isinstance(rule, RevisitRule):
                raise TypeError(f"Revisit.rules must hold RevisitRule objects, got {type(rule).__name__}")
        object.__setattr__(self, "rules", rules)
        if isinstance(self.give_up, bool) or not isinstance(self.give_up, int) or self.give_up < 1:
            raise ValueError(f"Revisit.give_up must be a whole number of at least 1, got {self.give_up!r}")
        if not isinstance(self.by_age, bool):
            raise TypeError(f"Revisit.by_age must be True or False, got {self.by_age!r}")

    def bounds(self, request: Request) -> tuple[float, float, float]:
        """(initial, min, max) for ``request``: the first rule that applies, else the policy's own."""
        for rule in self.rules:
            if rule.applies(request):
                low = self.min if rule.min is None else rule.min
                high = self.max if rule.max is None else rule.max
                if low > high:  # a rule that narrows one bound past the other: its own bound wins
                    low, high = (low, low) if rule.min is not None else (high, high)
                initial = self.initial if rule.initial is None else rule.initial
                return min(max(initial, low), high), low, high
        return min(max(self.initial, self.min), self.max), self.min, self.max

    def judge(self, state: RevisitState | None, fetched: Fetched) -> str:
        """What ``fetched`` says of the page: ``NEW`` (no earlier fetch), ``CHANGED``, ``UNCHANGED`` or ``UNKNOWN``."""
        if state is None:
            return NEW
        if fetched.status == 304:
            return UNCHANGED
        if fetched.etag is not None and fetched.etag == state.etag:
            return UNCHANGED
        signature = fetched.content_signature()
        if signature is not None and state.signature is not None:
            return UNCHANGED if signature == state.signature else CHANGED
        if fetched.etag is not None and state.etag is not None:
            return CHANGED
        if fetched.last_modified is not None and state.last_modified is not None:
            return UNCHANGED if fetched.last_modified == state.last_modified else CHANGED
        return UNKNOWN

    def after_fetch(self, request: Request, fetched: Fetched, now: float) -> tuple[str, RevisitState]:
        """What the fetch found, and the page's state for its next visit."""
        state = request.revisit
        verdict = self.judge(state, fetched)
        initial, low, high = self.bounds(request)
        if state is None:
            interval = initial
        elif verdict == CHANGED:
            interval = state.interval * (1 - self.dec)
            age = _version_age(fetched.last_modified, state.fetched_at, now) if self.by_age else None
            if age is not None:
                interval = min(interval, age)
        elif verdict == UNCHANGED:
            interval = state.interval * (1 + self.inc)
        else:
            interval = state.interval
        interval = min(max(interval, low), high)
        signature = fetched.content_signature()
        etag, modified = _validator(fetched.etag), _validator(fetched.last_modified)
        if fetched.status == 304 and state is not None:  # a 304 keeps what the page was, unless it says more
            signature = state.signature
            etag = etag or state.etag
            modified = modified or state.last_modified
        return verdict, RevisitState(
            interval=interval,
            fetched_at=now,
            etag=etag,
            last_modified=modified,
            signature=signature,
            visits=1 if state is None else min(state.visits + 1, 2**32 - 1),
            changes=(0 if state is None else state.changes) + (verdict == CHANGED),
            changed_at=now if verdict == CHANGED else (None if state is None else state.changed_at),
            failures=0,
            not_modified=(0 if state is None else state.not_modified) + (fetched.status == 304),
            last_status=fetched.status,
        )

    def after_failure(self, request: Request, now: float) -> RevisitState | None:
        """A revisit of ``request`` failed: its state for another try later, or None to fail it for good
        (a page never fetched, or ``give_up`` failures in a row)."""
        state = request.revisit
        if state is None or state.failures + 1 >= self.give_up:
            return None
        _initial, low, high = self.bounds(request)
        return dataclasses.replace(state, interval=min(max(state.interval * 2, low), high), fetched_at=now,
                                   failures=state.failures + 1)


def conditional_headers(request: Request) -> dict[str, str]:
    """``If-None-Match`` and ``If-Modified-Since`` from the request's revisit state (empty without one)."""
    state = request.revisit
    headers: dict[str, str] = {}
    if state is not None:
        if state.etag is not None:
            headers["If-None-Match"] = state.etag
        if state.last_modified is not None:
            headers["If-Modified-Since"] = state.last_modified
    return headers


def _version_age(last_modified: str | None, last_fetch: float, now: float) -> float | None:
    """How long ago the version fetched ``now`` appeared, by its ``Last-Modified``; None without one that
    parses, or with one from before the page's last fetch (not a new version: a server's date to ignore) or
    after now (a clock ahead of ours)."""
    if last_modified is None:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(last_modified)
        modified = (parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if not last_fetch < modified <= now:
        return None
    return now - modified


def _validator(value: str | None) -> str | None:
    return value if value is not None and len(value) <= MAX_VALIDATOR else None


def _seconds(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= _MAX_SECONDS:
        raise ValueError(f"{name} must be a number of seconds from 0 to {_MAX_SECONDS:,}, got {value!r}")
