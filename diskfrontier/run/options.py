"""The options ``crawl()`` and ``acrawl()`` share: one definition, with their defaults, meaning and checks.

``RunOptions`` is what both functions make of their keyword arguments (``options_of``), checked once, with
the messages that name the function called; ``RunKeywords`` lists the same names and types for type checkers
(``**options: Unpack[RunKeywords]``), and a test holds the two to the same fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypedDict

from ..contract.protocol import FrontierProtocol
from .failurekinds import Classify
from .policy import RetryPolicy
from .revisit import Revisit
from .robots import DEFAULT_TIMEOUT, Fetch, RobotsRules

__all__ = ["RunKeywords", "RunOptions", "check_argument", "options_of", "retry_policy", "robots_rules"]


@dataclass(frozen=True)
class RunOptions:
    """The options of ``crawl()`` and ``acrawl()``, given to either as keyword arguments of the same names
    (``crawl(frontier, handler, workers=16, robots=True, user_agent="mybot/1.0")``), with these defaults.
    Each call checks them before it starts: a value that does not fit raises ValueError or TypeError naming
    the function and the option."""

    workers: int = 8
    """How many requests are handled at once: worker threads, or tasks for a coroutine handler."""
    duration: float | None = None
    """Seconds after which a run stops (None: no limit)."""
    max_requests: int | None = None
    """Requests after which a run stops (None: no limit)."""
    retries: int = 3
    """Times a request whose handler raised is retried (through the frontier, so that politeness and crash
    safety hold) before it is recorded as failed with the error text (``frontier.failed()``)."""
    backoff: float = 1.0
    """Seconds before the first retry, doubled for each further attempt."""
    progress: bool | None = None
    """Progress on stderr: pending, in hand, done, retried, failed, rate. None: a line redrawn in place on a
    terminal, else a plain line every ``progress_every`` seconds (a log sees the crawl go on); True: the line
    redrawn in place wherever stderr goes; False: nothing."""
    progress_every: float = 5.0
    """Seconds between the plain progress lines written when stderr is not a terminal."""
    classify: Classify | None = None
    """``classify(request, error)`` says what a handler's error is: ``"retry"``, ``"fail"`` (at once),
    ``"backoff"`` (retried, and its host blocked at once) or None for the rule: a ``PermanentError`` fails at
    once, anything else is retried (``FailureKind``)."""
    host_errors: int | None = 5
    """Failures of a host in a row (errors retried, and each ``"backoff"``) after which it is blocked (None:
    never, but a ``"backoff"`` still blocks at once); a done of any of its requests ends the streak
    (``frontier.host_failed``)."""
    host_backoff: float = 60.0
    """Seconds a failing host is blocked for, doubled for each further failure; also how long a site whose
    robots.txt could not be fetched is held back."""
    host_backoff_max: float = 3600.0
    """The longest a failing host is blocked, or a site held back."""
    robots: bool = False
    """Fetch each site's (origin's) robots.txt once before its first request, keep it in the frontier and
    obey it for ``user_agent``: a disallowed request is recorded as failed (``robots.txt``), its Crawl-delay
    becomes the host's delay (never below the frontier's), a 4xx allows all, a 5xx or no answer within
    ``robots_timeout`` holds that site back and its requests wait for it (``diskfrontier.run.robots``)."""
    user_agent: str | None = None
    """The name your crawler gives in User-agent, whose robots.txt rules are obeyed: needed with
    ``robots=True`` (``"mybot/1.0"``)."""
    robots_ttl: float = 86400.0
    """Seconds after which a kept robots.txt is fetched again."""
    fetch_robots: Fetch | None = None
    """``fetch_robots(url, user_agent) -> (status, body)`` fetches a robots.txt (status 0: no answer; None:
    urllib). Under ``acrawl()`` it may be a coroutine function, run as a task and cancelled if it outlasts
    ``robots_timeout``; a plain one runs in a thread of its own."""
    robots_timeout: float = DEFAULT_TIMEOUT
    """Seconds for a whole robots.txt fetch (connect, headers, body, redirects); no whole answer by then is
    no answer."""
    grace: float | None = 10.0
    """Seconds the handlers under way are given to finish after a stop (None: as long as they take); then the
    run returns and leaves them behind: their requests stay in flight and come back (``abandoned``)."""
    revisit: Revisit | None = None
    """Come back to each page (``diskfrontier.Revisit``): a handler that returns a ``Fetched`` (its status,
    body or signature, ETag, Last-Modified) has its request finished with its next visit scheduled at the
    interval its changes call for, its ``request.revisit`` state stored with it (send
    ``request.revisit.etag`` and ``.last_modified`` back as ``If-None-Match`` and ``If-Modified-Since``:
    ``diskfrontier.run.revisit.conditional_headers``). A handler that returns nothing finishes it as
    without. A revisit that fails after its retries is tried again later, up to ``give_up`` times in a
    row; a ``PermanentError`` (a 404) ends the page's revisits."""


class RunKeywords(TypedDict, total=False):
    """The keyword arguments that make a ``RunOptions``, for type checkers: ``crawl()`` and ``acrawl()`` take
    ``**options: Unpack[RunKeywords]``."""

    workers: int
    duration: float | None
    max_requests: int | None
    retries: int
    backoff: float
    progress: bool | None
    progress_every: float
    classify: Classify | None
    host_errors: int | None
    host_backoff: float
    host_backoff_max: float
    robots: bool
    user_agent: str | None
    robots_ttl: float
    fetch_robots: Fetch | None
    robots_timeout: float
    grace: float | None
    revisit: Revisit | None


_NAMES = frozenset(option.name for option in fields(RunOptions))


def options_of(function: str, arguments: Mapping[str, Any]) -> RunOptions:
    """The options of a call of ``function`` (``"crawl"`` or ``"acrawl"``) given its keyword ``arguments``,
    checked: TypeError for a name it does not take, as Python says it; ValueError or TypeError naming
    ``function`` and the option for a value that does not fit."""
    for name in arguments:
        if name not in _NAMES:
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")
    options = RunOptions(**arguments)
    _check(function, options)
    return options


def _check(function: str, options: RunOptions) -> None:
    def number(name: str, *, whole: bool = False, least: float = 0.0, none: bool = True) -> None:
        check_argument(function, name, getattr(options, name), whole=whole, least=least, none=none)

    number("workers", whole=True, least=1, none=False)
    number("duration")
    number("max_requests", whole=True, least=1)
    number("retries", whole=True, none=False)
    number("backoff", none=False)
    number("grace")
    number("progress_every", least=0.1, none=False)
    if options.classify is not None and not callable(options.classify):
        raise TypeError(f"{function}(): classify must be a function (request, error) -> 'retry', 'fail', "
                        f"'backoff' or None, got {options.classify!r}")
    number("host_errors", whole=True, least=1)
    number("host_backoff", none=False)
    number("host_backoff_max", none=False)
    if not isinstance(options.robots, bool):
        raise TypeError(f"{function}(): robots must be True or False, got {options.robots!r}")
    number("robots_ttl", none=False)
    number("robots_timeout", least=0.001, none=False)
    if options.fetch_robots is not None and not callable(options.fetch_robots):
        raise TypeError(f"{function}(): fetch_robots must be a function (url, user_agent) -> (status, body), "
                        f"got {options.fetch_robots!r}")
    if options.revisit is not None and not isinstance(options.revisit, Revisit):
        raise TypeError(f"{function}(): revisit must be a diskfrontier.Revisit or None, got {options.revisit!r:.80}")
    if options.robots and (not isinstance(options.user_agent, str) or not options.user_agent.strip()):
        raise ValueError(f"{function}(): robots=True needs user_agent=, the name your crawler gives in "
                         f"User-agent (the robots.txt rules for it are obeyed), e.g. user_agent='mybot/1.0'")


def retry_policy(options: RunOptions) -> RetryPolicy:
    """How the runs of a call treat a handler's error."""
    return RetryPolicy(options.retries, options.backoff, options.classify, options.host_errors,
                       options.host_backoff, options.host_backoff_max, options.revisit)


def robots_rules(options: RunOptions, frontier: FrontierProtocol) -> RobotsRules | None:
    """The robots.txt of the sites the runs of a call meet, kept in ``frontier`` and in memory for all of them;
    None without ``robots=True``."""
    if not options.robots:
        return None
    assert options.user_agent is not None  # _check made sure
    return RobotsRules(frontier, options.user_agent, ttl=options.robots_ttl, fetch=options.fetch_robots,
                       backoff=options.host_backoff, backoff_max=options.host_backoff_max,
                       timeout=options.robots_timeout)


def check_argument(function: str, name: str, value: Any, *, whole: bool = False, least: float = 0.0,
                   none: bool = True) -> None:
    """ValueError naming ``function`` and ``name`` unless ``value`` is a finite number of at least
    ``least`` (a whole one if ``whole``), or None when ``none``."""
    if value is None and none:
        return
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) or value < least:
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"{function}(): {name} must be {kind} of at least {least:g}{' or None' if none else ''}, "
                         f"got {value!r}")
