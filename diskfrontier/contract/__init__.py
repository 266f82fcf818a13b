"""The contract: what every frontier promises (the layer both backends and everything built on them rest on).

``protocol``: ``FrontierProtocol`` and its local and shared forms; ``values``: the values a frontier hands back
and the keys of its stats; ``checks``: the limits and the argument checks both backends apply (the same values
refused with the same message); ``backoff``: how long a failing host is blocked; ``snapshot``: a crawl's state
at one moment, as one JSON-ready dict. Modules of the package import these modules, never this one.
"""

from .backoff import host_backoff
from .checks import (
    MAX_ATTEMPTS,
    MAX_ERROR,
    MAX_ROBOTS,
    MAX_SECONDS,
    MAX_TIME,
    check_attempts,
    check_drop,
    check_host,
    check_host_failed,
    check_robots,
    check_seconds,
    check_time,
)
from .protocol import FrontierProtocol, LocalFrontierProtocol, SharedFrontierProtocol
from .values import SHARED_STATS, Dropped, FailedRequest, HostInfo, RobotsEntry

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_ERROR",
    "MAX_ROBOTS",
    "MAX_SECONDS",
    "MAX_TIME",
    "SHARED_STATS",
    "Dropped",
    "FailedRequest",
    "FrontierProtocol",
    "HostInfo",
    "LocalFrontierProtocol",
    "RobotsEntry",
    "SharedFrontierProtocol",
    "check_attempts",
    "check_drop",
    "check_host",
    "check_host_failed",
    "check_robots",
    "check_seconds",
    "check_time",
    "host_backoff",
]
