"""``RevisitState``: what a crawl knows of a page it fetched before, stored with its request.

A request that a crawl keeps coming back to (``diskfrontier.Revisit``) carries the state of its
last fetch: the interval it is revisited at, when it was fetched, the validators the server gave
(``ETag``, ``Last-Modified``) for a conditional request next time, a signature of its content, and
how many of its fetches found it changed. It is stored as the sixth field of the request record
(``docs/format.md``, "The request record") on every backend, so it holds across restarts, kills,
compactions, copies and exports.
"""

from __future__ import annotations

import dataclasses
from typing import Any

MAX_VALIDATOR = 1024
"""The longest ``ETag`` or ``Last-Modified`` value kept (characters); a longer one is not kept."""
MAX_SIGNATURE = 64
"""The most bytes of a content signature kept."""
_MAX_SECONDS = 10**10
_MAX_TIME = 10**11
_MAX_COUNT = 2**32 - 1


@dataclasses.dataclass(frozen=True)
class RevisitState:
    """The state of a page's last fetch, kept with its request.

    ``interval``: seconds until the next visit, as last computed. ``fetched_at``: when it was last
    fetched (``time.time()``). ``etag`` and ``last_modified``: the validators of that fetch's
    response (None if it gave none), for ``If-None-Match`` and ``If-Modified-Since``. ``signature``:
    a digest of its content (None if unknown). ``visits``: fetches so far; ``changes``: how many of
    them found the page changed (the first fetch is not counted as a change); ``not_modified``: how
    many were answered 304. ``changed_at``: when a fetch last found it changed (None: never).
    ``failures``: revisits in a row that failed. ``last_status``: the HTTP status of the last fetch
    (0: not known).
    """

    interval: float
    fetched_at: float
    etag: str | None = None
    last_modified: str | None = None
    signature: bytes | None = None
    visits: int = 1
    changes: int = 0
    changed_at: float | None = None
    failures: int = 0
    not_modified: int = 0
    last_status: int = 0

    def __post_init__(self) -> None:
        _seconds("interval", self.interval)
        _time("fetched_at", self.fetched_at)
        object.__setattr__(self, "interval", float(self.interval))
        object.__setattr__(self, "fetched_at", float(self.fetched_at))
        if self.changed_at is not None:
            _time("changed_at", self.changed_at)
            object.__setattr__(self, "changed_at", float(self.changed_at))
        for name in ("etag", "last_modified"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or len(value) > MAX_VALIDATOR):
                raise ValueError(f"RevisitState.{name} must be None or a str of at most {MAX_VALIDATOR} characters, "
                                 f"got {value!r:.80}")
        signature = self.signature
        if signature is not None and (not isinstance(signature, bytes) or not 1 <= len(signature) <= MAX_SIGNATURE):
            raise ValueError(f"RevisitState.signature must be None or 1 to {MAX_SIGNATURE} bytes, "
                             f"got {signature!r:.80}")
        status = self.last_status
        if isinstance(status, bool) or not isinstance(status, int) or not (status == 0 or 100 <= status <= 999):
            raise ValueError(f"RevisitState.last_status must be an HTTP status from 100 to 999, or 0, "
                             f"got {self.last_status!r}")
        for name in ("visits", "changes", "failures", "not_modified"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_COUNT:
                raise ValueError(f"RevisitState.{name} must be a whole number from 0 to {_MAX_COUNT:,}, got {value!r}")

    @property
    def next_visit(self) -> float:
        """When the page is due again: its last fetch plus its interval."""
        return self.fetched_at + self.interval

    def to_list(self) -> list[Any]:
        """The state as the request record holds it (a msgpack array of eleven values)."""
        return [self.interval, self.fetched_at, self.etag, self.last_modified, self.signature, self.visits,
                self.changes, self.changed_at, self.failures, self.not_modified, self.last_status]

    @classmethod
    def from_list(cls, value: Any) -> RevisitState:
        """The state a record's sixth field holds; ``ValueError`` naming what is wrong if it is not one."""
        if not isinstance(value, list) or len(value) != 11:
            raise ValueError("malformed request record: its revisit state is not an array of eleven values")
        interval, fetched_at, etag, modified, signature, visits, changes, changed_at, failures, not_modified, \
            status = value
        try:
            return cls(_number(interval), _number(fetched_at), etag, modified, signature, visits, changes,
                       None if changed_at is None else _number(changed_at), failures, not_modified, status)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"malformed request record: its revisit state: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        """The state as JSON-ready values (the signature as hex): ``export`` and the command line's views."""
        out = dataclasses.asdict(self)
        out["signature"] = None if self.signature is None else self.signature.hex()
        return out

    @classmethod
    def from_json(cls, value: Any) -> RevisitState:
        """The state ``to_json`` gave; ``ValueError`` naming what is wrong."""
        if not isinstance(value, dict):
            raise ValueError(f"a revisit state must be an object, got {type(value).__name__}")
        fields = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(value) - fields)
        if unknown:
            raise ValueError(f"a revisit state has no field {unknown[0]!r} (it has: {', '.join(sorted(fields))})")
        values = dict(value)
        signature = values.get("signature")
        if signature is not None:
            try:
                values["signature"] = bytes.fromhex(signature)
            except (TypeError, ValueError):
                raise ValueError(f"a revisit state's signature must be hex digits, got {signature!r:.80}") from None
        try:
            return cls(**values)
        except TypeError as exc:
            raise ValueError(f"a revisit state: {exc}") from None


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"a time or interval must be a number, got {type(value).__name__}")
    return float(value)


def _seconds(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= _MAX_SECONDS:
        raise ValueError(f"RevisitState.{name} must be a number of seconds from 0 to {_MAX_SECONDS:,}, got {value!r}")


def _time(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= _MAX_TIME:
        raise ValueError(f"RevisitState.{name} must be a time.time() value (0 to {_MAX_TIME:,}), got {value!r}")


OVERDUE_AFTER = 60.0
"""A page is overdue once it has been due for a tenth of its interval, and at least this many seconds."""


def overdue(state: RevisitState, now: float) -> bool:
    """True if the page has been due for longer than a tenth of its interval (and ``OVERDUE_AFTER``)."""
    return now - state.next_visit > max(OVERDUE_AFTER, state.interval / 10)


@dataclasses.dataclass
class RevisitSummary:
    """The revisits of a crawl's pending requests at one moment (``inspect``, ``hosts --revisits``).

    ``pages``: pending requests with a revisit state; ``due``: of them, those whose next visit has come
    (``overdue``: for longer than ``overdue()`` allows); ``intervals``: the spread of their intervals
    (``min``, ``p10``, ``median``, ``p90``, ``max``, seconds); ``visits``, ``changes`` and ``not_modified``:
    their fetches so far, how many found the page changed, how many were answered 304.
    """

    pages: int = 0
    due: int = 0
    overdue: int = 0
    intervals: dict[str, float] = dataclasses.field(default_factory=dict)
    visits: int = 0
    changes: int = 0
    not_modified: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def summarize(states: Any, now: float) -> RevisitSummary:
    """The summary of an iterable of ``RevisitState`` (the pending requests' states) at ``now``."""
    out = RevisitSummary()
    intervals: list[float] = []
    for state in states:
        out.pages += 1
        intervals.append(state.interval)
        if state.next_visit <= now:
            out.due += 1
            out.overdue += overdue(state, now)
        out.visits += state.visits
        out.changes += state.changes
        out.not_modified += state.not_modified
    if intervals:
        intervals.sort()
        last = len(intervals) - 1
        out.intervals = {"min": intervals[0], "p10": intervals[last // 10], "median": intervals[last // 2],
                         "p90": intervals[last * 9 // 10], "max": intervals[last]}
    return out


REVISIT_COUNTERS = ("revisits", "revisit_changes", "revisit_not_modified")
"""What a backend counts of the pages finished with their next visit scheduled (``revisit_counters``)."""


def revisit_counters(state: RevisitState) -> tuple[str, ...]:
    """The counters a page finished with its next visit scheduled adds to: a revisit (a fetch of a page
    fetched before), one that found the page changed, one answered 304. A failed revisit adds to none."""
    if state.failures or state.visits < 2:
        return ()
    out: tuple[str, ...] = ("revisits",)
    if state.changed_at is not None and state.changed_at == state.fetched_at:
        out += ("revisit_changes",)
    if state.last_status == 304:
        out += ("revisit_not_modified",)
    return out
