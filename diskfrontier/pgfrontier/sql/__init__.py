"""The SQL of the PostgreSQL backend, as ``.sql`` files of this package read with ``importlib.resources``.

``tables.sql`` makes a crawl's tables (in its own schema); the other files define the functions each step
runs as one call (one transaction, one round trip): ``helpers.sql`` (the clock, counters, a host's row, a
request put in its place, requests due and leases run out taken back), ``push.sql``, ``pop.sql`` (and
``next_ready``), ``finish.sql`` (the ends and renewals of leases), ``failed.sql``, ``hostrules.sql``,
``reading.sql`` (``stats``) and ``steering.sql`` (pause, drop, the clients' beats). Each file is sent as it
is, so the server's line numbers in an error are the file's. ``CODE`` names the functions' text: a crawl
whose functions were installed from other text gets these installed again at open.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import resources

from ...core.errors import FrontierError

TABLES = "tables.sql"
FUNCTIONS = ("helpers.sql", "push.sql", "pop.sql", "finish.sql", "failed.sql", "hostrules.sql", "reading.sql",
             "steering.sql")


def read(name: str) -> str:
    """The text of the SQL file ``name`` of this package."""
    try:
        return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        raise FrontierError(f"the SQL file {name} of diskfrontier.pgfrontier.sql is missing: the package is "
                            f"incomplete, install diskfrontier again") from None


@functools.cache
def functions() -> tuple[tuple[str, str], ...]:
    """(file name, text) of every file of functions, in the order they are installed."""
    return tuple((name, read(name)) for name in FUNCTIONS)


@functools.cache
def code_version() -> str:
    """A digest of the functions' text: what a crawl records as the code it runs."""
    digest = hashlib.sha256()
    for name, text in functions():
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()[:16]
