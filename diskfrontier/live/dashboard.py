"""The dashboard's state, apart from HTTP: the latest reading of a crawl, the history of its
counts kept in this process, and the JSON that ``/api/stats`` answers.

``Dashboard.refresh()`` reads the source (blocking: the server runs it in a thread), adds a point
to the history (pending, in flight, done, failed, retried, the done rate, the job directory's and
journal's bytes, and the outcome counters the crawl keeps; one every refresh, for ``keep``
seconds), and says when the next refresh is due: every ``interval`` seconds, or later when a read
is slow (no more than a fifth of the time goes to reading).

The rate the page shows is the requests done over the last ``RATE_WINDOW`` seconds of snapshots
(``window_rate``), stated with the seconds it covers; the crawl is said idle as soon as about
``POINT_RATE_WINDOW`` seconds pass with nothing done.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ..core.errors import FrontierError
from .sources import Reading, Source, json_safe

POINT_RATE_WINDOW = 10.0
"""The done rate of a point (the rate chart) is the average over about this many seconds before it."""
RATE_WINDOW = 60.0
"""The rate the page states: requests done over the last this many seconds, from successive snapshots."""
POINT_KEYS = ("pending", "in_flight", "done", "failed", "retried", "journal_bytes", "received_bytes",
              "fetch_seconds_sum", "fetch_seconds_count", "responses_2xx", "responses_3xx", "responses_4xx",
              "responses_5xx", "responses_other")
"""The counts each point of the history keeps (None when the crawl does not give one)."""
READ_SHARE = 5.0
"""The next refresh comes no sooner than this many times the last read's duration."""
STALE_AFTER = 3.0
"""A snapshot older than this many refresh intervals (and 5 seconds) is shown as stale."""

STATES = {
    "running": "Running", "paused": "Paused", "waiting": "Waiting", "idle": "Idle", "finished": "Finished",
    "stopped": "Not running", "stale": "Stale", "unknown": "No data",
}


def crawl_state(reading: Reading | None, rate: float | None, now: float, interval: float) -> str:
    """One word for the badge: running, paused, waiting (pending, none ready yet), idle (pending and
    ready, nothing taken), finished (nothing pending or in flight), stopped (a job directory no
    process holds), stale (the holder's snapshot stopped coming), unknown (nothing read yet)."""
    if reading is None:
        return "unknown"
    shot = reading.snapshot
    if reading.origin == "status.json" and now - float(shot.get("taken") or 0) > max(5.0, STALE_AFTER * interval):
        return "stale"
    if shot.get("paused_since") is not None:
        return "paused"
    stats = shot.get("stats") or {}
    pending, in_flight = stats.get("pending") or 0, stats.get("in_flight") or 0
    if not pending and not in_flight:
        return "finished"
    if reading.origin == "files" and reading.holder is None:
        return "stopped"
    if in_flight or (rate or 0) > 0:
        return "running"
    next_ready = shot.get("next_ready")
    if pending and (next_ready is None or (isinstance(next_ready, (int, float)) and next_ready > now)):
        return "waiting"
    return "idle"


class Dashboard:
    """A source watched: its latest reading and the history of its counts."""

    def __init__(self, source: Source, *, interval: float = 2.0, keep: float = 3600.0, control: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        self.source = source
        self.interval = interval
        self.keep = keep
        self.control = control
        self.actions: list[str] = []  # the control actions the page may offer
        self.log: str | None = None  # the log file whose last lines the page shows (serve --log)
        self.clock = clock
        self.reading: Reading | None = None
        self.error: str | None = None
        self.checked: float | None = None  # when the source was last asked
        self.next_due = 0.0  # time.monotonic() of the next refresh
        self.read_seconds: float | None = None  # how long the last refresh took
        self.history: deque[dict[str, Any]] = deque(maxlen=max(2, int(keep / max(interval, 0.05)) + 2))
        self._lock = threading.Lock()

    # -------------------------------------------------------------- reading
    def refresh(self) -> None:
        """Read the source once (the caller runs one refresh at a time)."""
        started = time.monotonic()
        try:
            reading = self.source.read()
        except FrontierError as exc:
            self._failed(str(exc) or type(exc).__name__, started)
            return
        except Exception as exc:  # an OSError, a Redis client's ConnectionError: shown, and tried again
            self._failed(f"{type(exc).__name__}: {exc}", started)
            return
        with self._lock:
            self.reading, self.error, self.checked = reading, None, self.clock()
            self._add_point(reading.snapshot)
        took = time.monotonic() - started
        self.read_seconds = took
        self.next_due = started + max(self.interval, READ_SHARE * took)

    def _failed(self, message: str, started: float) -> None:
        with self._lock:
            self.error, self.checked = message, self.clock()
        self.next_due = started + self.interval

    def _add_point(self, shot: dict[str, Any]) -> None:
        taken = shot.get("taken")
        if not isinstance(taken, (int, float)):
            return
        if self.history and taken <= self.history[-1]["t"]:
            return  # the same snapshot again (a holder's status.json not yet replaced)
        stats = shot.get("stats") or {}
        point = {"t": taken, **{key: _count(stats.get(key)) for key in POINT_KEYS}}
        point["disk_bytes"] = self.reading.disk_bytes if self.reading is not None else None
        point["rate"] = self._rate(point)
        self.history.append(point)
        while self.history and self.history[0]["t"] < taken - self.keep:
            self.history.popleft()

    def _rate(self, point: dict[str, Any]) -> float | None:
        """Requests done a second, over the points of about the last ``POINT_RATE_WINDOW`` seconds (None
        across a restart of the counts, or for the first point)."""
        done = point["done"]
        if done is None:
            return None
        base = None
        for earlier in reversed(self.history):
            if earlier["done"] is None or earlier["done"] > done:
                break  # the counts started again (a new run of the holder)
            base = earlier
            if point["t"] - earlier["t"] >= POINT_RATE_WINDOW:
                break
        if base is None or point["t"] <= base["t"]:
            return None
        return (done - base["done"]) / (point["t"] - base["t"])

    def window_rate(self) -> tuple[float | None, float]:
        """Requests done a second over the last ``RATE_WINDOW`` seconds of snapshots, and the seconds that
        covers (less while the history is younger; since a restart of the counts, only after it). None
        before two snapshots."""
        if not self.history:
            return None, 0.0
        last = self.history[-1]
        if last["done"] is None:
            return None, 0.0
        base = None
        for earlier in reversed(self.history):
            if earlier["done"] is None or earlier["done"] > last["done"]:
                break
            base = earlier
            if last["t"] - earlier["t"] >= RATE_WINDOW:
                break
        if base is None or last["t"] <= base["t"]:
            return None, 0.0
        seconds = last["t"] - base["t"]
        return (last["done"] - base["done"]) / seconds, seconds

    # -------------------------------------------------------------- answering
    def latest_snapshot(self) -> dict[str, Any] | None:
        reading = self.reading
        return None if reading is None else reading.snapshot

    def payload(self, since: float | None = None) -> dict[str, Any]:
        """What ``/api/stats`` answers: the current snapshot, the history (after ``since``, if given),
        the state and how old the data is."""
        now = self.clock()
        with self._lock:
            reading = self.reading
            history = [p for p in self.history if since is None or p["t"] > since]
            rate, rate_seconds = self.window_rate()
            recent = self.history[-1]["rate"] if self.history else None
            error, checked = self.error, self.checked
        state = crawl_state(reading, recent, now, self.interval)
        shot = None if reading is None else reading.snapshot
        taken = shot.get("taken") if shot else None
        return json_safe({
            "name": self.source.name,
            "snapshot": shot,
            "origin": None if reading is None else reading.origin,
            "holder": None if reading is None else reading.holder,
            "note": None if reading is None else reading.note,
            "read_seconds": self.read_seconds,
            "state": state,
            "state_label": STATES[state],
            "rate": rate,
            "rate_seconds": rate_seconds,
            "rate_window": RATE_WINDOW,
            "idle": recent == 0,  # nothing done over the last POINT_RATE_WINDOW seconds
            "error_kinds": None if reading is None else reading.error_kinds,
            "disk_bytes": None if reading is None else reading.disk_bytes,
            "now": now,
            "checked": checked,
            "age": None if not isinstance(taken, (int, float)) else max(0.0, now - taken),
            "error": error,
            "interval": self.interval,
            "keep": self.keep,
            "control": self.control,
            "actions": self.actions,
            "log": self.log,
            "history": history,
        })


def _count(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value
