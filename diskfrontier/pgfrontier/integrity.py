"""What a crawl's schema must hold beside its rows, checked by every open (``schema.py``) and by ``verify``: its
tables and sequences, its functions as this version's SQL files define them, and the ``meta`` rows a step reads
(a ``delay``, a ``per_host`` limit and a ``paused_since`` a step can use). Someone with SQL access may drop a
table or a function, replace a function's body or delete a ``meta`` row; each is named here, so that no step
runs on a crawl it would misread."""

from __future__ import annotations

import functools
import math
import re
from typing import Any

from . import sql

TABLES = ("meta", "counters", "seen", "hosts", "requests", "waiting", "leases", "failed", "robots", "clients")
SEQUENCES = ("places", "lease_nos")
HINT = ("the crawl's schema was changed by something other than diskfrontier: run diskfrontier verify --repair, "
        "restore it from a backup, or delete the crawl")
_FUNCTION = re.compile(r"CREATE OR REPLACE FUNCTION (\w+)\(.*?\bAS \$\$(.*?)\$\$", re.S)


@functools.cache
def bodies() -> dict[str, str]:
    """Each function this version installs: its name and its body, as the server keeps it (``pg_proc.prosrc``)."""
    return {name: body for _file, text in sql.functions() for name, body in _FUNCTION.findall(text)}


def missing_relations(conn: Any, schema: str) -> list[str]:
    """The tables and sequences of a crawl that its schema does not hold."""
    found = {row[0] for row in conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
        "AND c.relkind IN ('r', 'p', 'S')", (schema,)).fetchall()}
    return [name for name in (*TABLES, *SEQUENCES) if name not in found]


def changed_functions(conn: Any, schema: str) -> list[str]:
    """This version's functions that the schema lacks or holds with another body, and functions it holds that
    this version does not define, each as a phrase (empty: the functions are this version's)."""
    held: dict[str, list[str]] = {}
    for name, body in conn.execute("SELECT p.proname, p.prosrc FROM pg_proc p JOIN pg_namespace n ON "
                                   "n.oid = p.pronamespace WHERE n.nspname = %s", (schema,)).fetchall():
        held.setdefault(name, []).append(body)
    out = []
    for name, body in bodies().items():
        if name not in held:
            out.append(f"{name} is missing")
        elif held[name] != [body]:
            out.append(f"{name} is not this version's")
    out += [f"{name} is not one of diskfrontier's" for name in sorted(set(held) - set(bodies()))]
    return out


def install_functions(conn: Any, schema: str) -> None:
    """Drop the schema's functions, whatever their arguments, and install this version's (in the caller's
    transaction, with the schema first on its search path)."""
    from psycopg import sql as psql

    older = conn.execute("SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = "
                         "p.pronamespace WHERE n.nspname = %s", (schema,)).fetchall()
    for (signature,) in older:
        conn.execute(psql.SQL("DROP FUNCTION {}").format(psql.SQL(signature)))
    for _name, text in sql.functions():
        conn.execute(text)


def meta_problems(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """(row, problem) for each ``meta`` row a step reads that is missing or holds a value no client writes."""
    out = []
    delay = meta.get("delay")
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not 0 <= delay < math.inf:
        out.append(("delay", f"is {delay!r}, not a delay in seconds"))
    per_host = meta.get("per_host")
    if isinstance(per_host, bool) or not isinstance(per_host, int) or not 0 <= per_host < 2**31:
        out.append(("per_host", f"is {per_host!r}, not a whole number of at least 0"))
    paused = meta.get("paused_since", "missing")
    if paused is not None and (isinstance(paused, bool) or not isinstance(paused, (int, float))
                               or not 0 <= paused < math.inf):
        out.append(("paused_since", f"is {paused!r}, not null or a time"))
    if not isinstance(meta.get("code"), str):
        out.append(("code", f"is {meta.get('code')!r}, not the digest of the functions installed"))
    return out


META_DEFAULTS = {"delay": 0, "per_host": 0, "paused_since": None, "code": ""}
"""What repair writes for a ``meta`` row that ``meta_problems`` names (``code`` "": an open installs this version's
functions again)."""


_BEHIND = (  # a sequence, what it gives next, and the highest number the rows hold that it gave
    ("places", "SELECT last_value + is_called::integer FROM places",
     "SELECT greatest((SELECT max(id) FROM requests), (SELECT max(id) FROM waiting), (SELECT max(id) FROM leases))"),
    ("lease_nos", "SELECT last_value + is_called::integer FROM lease_nos", "SELECT max(lease_no) FROM leases"),
    ("hosts_id_seq", "SELECT last_value + is_called::integer FROM hosts_id_seq", "SELECT max(id) FROM hosts"),
    ("failed_seq_seq", "SELECT last_value + is_called::integer FROM failed_seq_seq", "SELECT max(seq) FROM failed"),
)


def sequences_behind(conn: Any) -> list[tuple[str, int, int]]:
    """The sequences of a crawl (in its search path) that would give a number its rows hold already: (name, the
    next number it gives, the highest held). A step meeting one fails on a key taken twice."""
    out = []
    for name, upcoming_query, highest_query in _BEHIND:
        highest = conn.execute(highest_query).fetchone()[0]
        upcoming = conn.execute(upcoming_query).fetchone()[0]
        if highest is not None and upcoming <= highest:
            out.append((name, int(upcoming), int(highest)))
    return out
