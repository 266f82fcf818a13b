"""Seeded damage to a PostgreSQL crawl, each case checked against the undamaged crawl.

A fixture is a crawl made once by real clients (requests over several hosts at three priorities, some done,
some failed, some waiting for a time, some leased by a client killed with SIGKILL, a host blocked, a host with
its own delay and a budget, robots.txt kept for two hosts) in the schema ``df_<name>src``, and a second crawl,
``df_<name>other``, whose rows are valid records from elsewhere. Each case copies the fixture's rows into
``df_<name>`` (``restore``), applies ONE damage the way someone with SQL access can (``Damage``), and then:

1. ``verify`` (``verify_target``, what ``diskfrontier verify`` runs): is the damage named?
2. the steps a client takes (``observe``): open (``create=False``), ``len()``, ``stats()``, push every URL
   the crawl holds or finished (each must be a duplicate) and new ones, pop and finish everything,
   ``len()`` and ``stats()`` again, ``failed()``, ``hosts()``, ``robots()``, ``finished``. What they saw is
   compared with what they saw on the undamaged crawl (the model).

The outcome is ``named`` (a step raised a project error naming the damage: the crawl's schema or a table or
function damaged, and verify was not sound), ``exact`` (the steps saw what they saw on the undamaged crawl),
or one of the failures: ``silent`` (a step answered differently without an error), ``misnamed`` (a project
error naming another crawl), ``unnamed`` (a project error that does not say what is damaged), ``raw`` (any
other exception, from the steps or from verify), ``verify-sound`` (the steps named damage verify did not see).
Then, for a named case, the same damage again, ``verify --repair`` and the steps: ``whole`` (sound after
repair, and what the steps saw is the model's), ``recorded`` (the repair names what it could not bring back,
and the steps hand out nothing finished and nothing twice), ``refused`` (repair left the crawl as it was and
said why: verify still names it) or ``wrong``.
"""

# ruff: noqa: S608 -- the damage is SQL built from the fixture's own table, column and schema names, on purpose
from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from damagetally import DamageTally

from diskfrontier import CrawlDamaged, FormatError, FrontierError, PostgresFrontier, Request
from diskfrontier.access.checking import verify_target
from diskfrontier.contract.values import RobotsEntry
from diskfrontier.pgfrontier import sql as pgsql

HOSTS = 12
NEW = 10  # URLs pushed after the damage, never seen before
TABLES = ("meta", "counters", "seen", "hosts", "requests", "waiting", "leases", "failed", "robots", "clients")
SEQUENCES = ("places", "lease_nos")
FUNCTIONS = ("now_s", "setting_delay", "setting_per_host", "bump", "fold_counters", "host_id", "refresh_top",
             "put", "wake", "reclaim", "push", "mark_seen", "pop", "next_ready", "finish", "requeue_failed",
             "record_failed", "set_host", "host_failed", "stats", "set_paused", "drop_ids", "beat")
BLOCKED = "h1.example"  # blocked until unblocked: its requests stay pending
ROBOTS = ("h2.example", "h3.example")
_STATS = ("pending", "in_flight", "delayed", "done", "seen", "pushed", "duplicates", "failed", "ready_hosts",
          "paused_since", "delay", "per_host")


def url_of(i: int, tag: str = "") -> str:
    return f"https://h{i % HOSTS}.example/{tag}{i}"


@dataclass
class Fixture:
    """A crawl made once (``src``), another crawl to copy rows from (``other``), and the model: what the steps
    saw on the undamaged crawl."""

    name: str
    order: str
    known: list[str]  # every URL the crawl holds or finished: each is a duplicate
    fresh: list[str]
    model: dict[str, Any] = field(default_factory=dict)

    @property
    def schema(self) -> str:
        return f"df_{self.name}"

    @property
    def src(self) -> str:
        return f"df_{self.name}src"

    @property
    def other(self) -> str:
        return f"df_{self.name}other"


_LEASER = textwrap.dedent("""
    import os, signal, sys
    from diskfrontier import PostgresFrontier
    f = PostgresFrontier(sys.argv[1], crawl=sys.argv[2], lease=36000.0, renew=False)
    got = f.pop_many(int(sys.argv[3]))
    print(len(got), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def _lease_and_die(url: str, crawl: str, count: int) -> None:
    """A client leases ``count`` requests for ten hours and is killed with SIGKILL (its leases stay)."""
    child = subprocess.run([sys.executable, "-c", _LEASER, url, crawl, str(count)], capture_output=True, text=True,
                           timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert child.stdout.split() == [str(count)], child.stdout


def _make(url: str, crawl: str, order: str, count: int, tag: str) -> list[str]:
    """Make a crawl of ``count`` URLs; the URLs it holds or finished."""
    every = [url_of(i, tag) for i in range(count)]
    with PostgresFrontier(url, crawl=crawl, order=order, renew=False) as f:
        assert f.push_many(Request(u, priority=i % 3) for i, u in enumerate(every[:count - 8])) == count - 8
        later = [Request(u, priority=1) for u in every[count - 8:]]
        assert sum(f.push(r, not_before=4e9) for r in later) == 8  # waiting for a time
        f.set_delay("h4.example", 0.0)
        f.set_budget("h5.example", 10_000)
        f.block(BLOCKED, math.inf)
        for host in ROBOTS:
            f.set_robots(host, RobotsEntry(200, f"User-agent: *\nDisallow: /{host}\n".encode(), 1.7e9))
        popped = f.pop_many(30)
        f.done_many(popped[:24])
        for request in popped[24:28]:
            f.fail(request, "HTTP 500")
        f.retry(popped[28], delay=4e9)  # waits for a time, as a retry
        f.retry(popped[29])
    _lease_and_die(url, crawl, 6)
    return every


def build(url: str, conn: Any, name: str, order: str, count: int = 200) -> Fixture:
    """Make the fixture crawl ``name`` and another crawl to copy rows from, and record the model."""
    known = _make(url, f"{name}src", order, count, "")
    _make(url, f"{name}other", "fifo" if order == "lifo" else "lifo", count // 2, "o")
    fx = Fixture(name, order, known, [f"https://new{i}.example/{i}" for i in range(NEW)])
    restore(conn, fx)
    fx.model = observe(url, fx)
    return fx


def restore(conn: Any, fx: Fixture) -> None:
    """``df_<name>`` made again as a copy of the fixture's rows (its tables, sequences and functions)."""
    conn.execute(f'DROP SCHEMA IF EXISTS "{fx.schema}" CASCADE')
    conn.execute(f'DROP SCHEMA IF EXISTS "{fx.schema}_moved" CASCADE')
    conn.execute(f'CREATE SCHEMA "{fx.schema}"')
    conn.execute(f'SET search_path TO "{fx.schema}", public')
    conn.execute(pgsql.read(pgsql.TABLES))
    for _name, text in pgsql.functions():
        conn.execute(text)
    for table in TABLES:
        conn.execute(f'INSERT INTO "{fx.schema}".{table} OVERRIDING SYSTEM VALUE SELECT * FROM "{fx.src}".{table}')
    for sequence in (*SEQUENCES, "hosts_id_seq", "failed_seq_seq"):
        [(last, called)] = conn.execute(f'SELECT last_value, is_called FROM "{fx.src}".{sequence}').fetchall()
        conn.execute(f"SELECT setval('\"{fx.schema}\".{sequence}', %s, %s)", (last, called))
    conn.execute("SET search_path TO public")


# ------------------------------------------------------------------ damage
@dataclass
class Damage:
    kind: str
    what: str
    names: tuple[str, ...]  # what an error naming the damage may name (a table, a function, meta, the schema)
    statements: list[tuple[str, tuple[Any, ...]]]
    free: bool = False  # it changes a value a client writes as it likes (FREE): no check can tell it from one

    def apply(self, conn: Any) -> bool:
        """Apply the damage; False if the server refused it (a key made a duplicate, a column NULL that may not
        be): nothing was changed."""
        import psycopg

        try:
            with conn.transaction():
                for statement, params in self.statements:
                    conn.execute(statement, params)
        except psycopg.errors.IntegrityError:
            return False
        except psycopg.errors.GeneratedAlways:
            return False
        return True


FREE = {  # table: the columns whose values a client call may set to any value of their kind
    "robots": ("host", "status", "body", "fetched_at"), "failed": ("error", "failed_at"),
    "hosts": ("done", "last_out", "delay", "blocked_until", "budget", "failures"), "waiting": ("due", "priority"),
    "leases": ("client", "expires", "lease_no", "priority"), "requests": ("priority",),
    "counters": ("name", "part", "value"), "seen": ("key",), "clients": ("id", "info", "seen_at")}
"""A row of ``robots``, ``counters`` or ``clients`` deleted or copied from elsewhere is free too: robots.txt is
fetched again, the counters of what was done are history no row tells, clients come and go."""
KINDS = {"delete row": 25, "change column": 35, "copied row": 12, "truncate": 6, "drop table": 4,
         "drop function": 5, "replace function": 5, "format": 4, "sequence": 2, "schema renamed": 2}


def _columns(conn: Any, schema: str, table: str) -> list[tuple[str, str, bool]]:
    return conn.execute("SELECT column_name, data_type, is_nullable = 'YES' FROM information_schema.columns "
                        "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                        (schema, table)).fetchall()


def _values(rng: random.Random, kind: str, nullable: bool, now: Any) -> list[Any]:
    """Values a column of SQL type ``kind`` may be changed to (as SQL literals)."""
    out: list[Any]
    if kind in ("bigint", "integer", "smallint"):
        out = ["0", "1", "-1", "2", "-7", str(rng.randrange(3, 500)), "2147483647"]
        if kind == "bigint":
            out += ["-9223372036854775807", "4611686018427387904"]
    elif kind == "double precision":
        out = ["0", "-1", "'NaN'", "'Infinity'", "'-Infinity'", "1e300", str(rng.uniform(0, 4e9))]
    elif kind == "bytea":
        out = ["''::bytea", f"'\\x{rng.randbytes(rng.choice((1, 8, 20, 40))).hex()}'::bytea",
               f"substring({now} from 1 for {rng.randrange(1, 30)})", f"{now} || '\\x00'::bytea"]
    elif kind == "boolean":
        out = [f"NOT {now}"]
    elif kind == "text":
        out = ["''", "'h9.example'", "'x'", f"{now} || 'x'", "'nothing-here'"]
    elif kind == "jsonb":
        out = ["'null'", "'3'", "'\"lifo\"'", "'\"fifo\"'", "'-1'", "'{}'", "'\"x\"'", "'1e400'"]
    else:
        raise AssertionError(f"no values for {kind}")
    if nullable:
        out.append("NULL")
    return out


def damages(fx: Fixture, conn: Any, rng: random.Random, count: int) -> list[Damage]:
    """``count`` damages drawn with ``KINDS``' weights (read from the fixture's rows)."""
    src, schema, q = fx.src, fx.schema, f'"{fx.schema}"'
    rows = {t: [r[0] for r in conn.execute(f'SELECT ctid::text FROM "{src}".{t} ORDER BY ctid').fetchall()]
            for t in TABLES}
    other = {t: conn.execute(f'SELECT count(*) FROM "{fx.other}".{t}').fetchone()[0] for t in TABLES}
    filled = [t for t in TABLES if rows[t]]
    kinds = list(KINDS)
    out = []
    for _ in range(count):
        kind = rng.choices(kinds, weights=[KINDS[k] for k in kinds])[0]
        if kind == "delete row":
            table = rng.choice(filled)
            tid = rng.choice(rows[table])
            out.append(Damage(kind, f"DELETE a row of {table} ({tid})", (table,),
                              [(f"DELETE FROM {q}.{table} WHERE ctid = %s::tid", (tid,))],
                              free=table in ("robots", "counters", "clients")))
        elif kind == "change column":
            table = rng.choice(filled)
            tid = rng.choice(rows[table])
            column, type_, nullable = rng.choice(_columns(conn, src, table))
            value = rng.choice(_values(rng, type_, nullable, column))
            out.append(Damage(kind, f"UPDATE {table} SET {column} = {value} (row {tid})", (table,),
                              [(f"UPDATE {q}.{table} SET {column} = {value} WHERE ctid = %s::tid", (tid,))],
                              free=column in FREE.get(table, ())))
        elif kind == "copied row":
            table = rng.choice([t for t in TABLES if other[t]])
            n = rng.randrange(other[table])
            key = {"meta": "name", "seen": "key", "hosts": "id", "failed": "seq", "robots": "host", "clients": "id",
                   "counters": None}.get(table, "id")
            replace = [] if key is None else [
                (f"DELETE FROM {q}.{table} WHERE {key} = (SELECT {key} FROM \"{fx.other}\".{table} "
                 f"ORDER BY ctid OFFSET %s LIMIT 1)", (n,))]
            columns = ", ".join(c for c, _t, _n in _columns(conn, src, table))
            out.append(Damage(kind, f"a row of {table} replaced by (or added from) another crawl's (#{n})", (table,), [
                *replace,
                (f"INSERT INTO {q}.{table} OVERRIDING SYSTEM VALUE SELECT {columns} FROM \"{fx.other}\".{table} "
                 f"ORDER BY ctid OFFSET %s LIMIT 1", (n,))], free=table in ("robots", "counters", "clients")))
        elif kind == "truncate":
            table = rng.choice(TABLES)
            out.append(Damage(kind, f"TRUNCATE {table}", (table,), [(f"TRUNCATE {q}.{table}", ())],
                              free=table in ("robots", "clients")))
        elif kind == "drop table":
            table = rng.choice(TABLES)
            out.append(Damage(kind, f"DROP TABLE {table}", (table,), [(f"DROP TABLE {q}.{table} CASCADE", ())]))
        elif kind == "drop function":
            name = rng.choice(FUNCTIONS)
            out.append(Damage(kind, f"DROP FUNCTION {name}", (name, "functions"),
                              [(f"DROP FUNCTION {q}.{name} CASCADE", ())]))
        elif kind == "replace function":
            name = rng.choice(FUNCTIONS)
            out.append(Damage(kind, f"function {name} replaced by one that does nothing", (name, "functions"),
                              [("SELECT set_config('search_path', %s, true)", (q,)), (_hollow(conn, src, name), ())]))
        elif kind == "format":
            value = rng.choice(["'3'", "'0'", "'1'", "'\"2\"'", "'null'", "'2.5'", None])
            statement = (f"DELETE FROM {q}.meta WHERE name = 'format'" if value is None else
                         f"UPDATE {q}.meta SET value = {value} WHERE name = 'format'")
            out.append(Damage(kind, f"meta format {'deleted' if value is None else f'set to {value}'}",
                              ("meta", "format"), [(statement, ())]))
        elif kind == "sequence":
            sequence = rng.choice(SEQUENCES)
            out.append(Damage(kind, f"sequence {sequence} set back to 1", (sequence,),
                              [(f"SELECT setval('{q}.{sequence}', 1, false)", ())]))
        else:
            out.append(Damage(kind, f"schema {schema} renamed", (schema, "no crawl"),
                              [(f'ALTER SCHEMA {q} RENAME TO "{schema}_moved"', ())]))
    return out


def _hollow(conn: Any, schema: str, name: str) -> str:
    """A function of the same signature as ``name`` that does nothing (returns nothing, or NULL)."""
    [(signature, result, returns_set, kind)] = conn.execute(
        "SELECT p.oid::regprocedure::text, pg_get_function_result(p.oid), p.proretset, "
        "pg_get_function_arguments(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = %s AND p.proname = %s", (schema, name)).fetchall()
    arguments = kind
    body = "RETURN;" if returns_set or result == "void" or "OUT " in arguments else "RETURN NULL;"
    bare = signature.split("(", 1)[0]
    return (f"CREATE OR REPLACE FUNCTION {bare}({arguments}) RETURNS {result} LANGUAGE plpgsql AS "
            f"$$ BEGIN {body} END $$") if "OUT " not in arguments else (
            f"CREATE OR REPLACE FUNCTION {bare}({arguments}) LANGUAGE plpgsql AS $$ BEGIN {body} END $$")


# ------------------------------------------------------------------ the steps
def observe(url: str, fx: Fixture) -> dict[str, Any]:
    """What a client sees of the crawl: its counts, pushes of every URL it knows and of new ones, every request
    handed out (in order) and finished, its counts again, failed requests, hosts and robots.txt."""
    seen: dict[str, Any] = {}
    with PostgresFrontier(url, crawl=fx.name, create=False, renew=False) as f:
        seen["len"] = len(f)
        seen["stats"] = {k: f.stats()[k] for k in _STATS}
        seen["known pushed"] = [u for u, new in zip(fx.known, f.push_each([Request(u) for u in fx.known]),
                                                    strict=True) if new]
        seen["fresh refused"] = [u for u, new in zip(fx.fresh, f.push_each([Request(u) for u in fx.fresh]),
                                                     strict=True) if not new]
        handed: list[tuple[str, int]] = []
        while got := f.pop_many(40):
            handed += [(r.url, r.priority) for r in got]
            f.done_many(got)
        seen["handed"] = handed
        seen["len after"] = len(f)
        seen["stats after"] = {k: f.stats()[k] for k in _STATS}
        seen["failed"] = sorted((x.request.url, x.error) for x in f.failed())
        seen["hosts"] = sorted((h.host, h.pending, h.in_flight, h.done, h.delay, h.blocked_until, h.budget,
                                h.failures) for h in f.hosts())
        seen["robots"] = [f.robots(h) for h in ROBOTS]
        seen["pending"] = sorted(r.url for r in f.pending_requests())
        seen["finished"] = f.finished
    return seen


class Wrong(Exception):
    """The steps saw something else than on the undamaged crawl."""


def _compare(model: dict[str, Any], seen: dict[str, Any]) -> None:
    for key, expected in model.items():
        if seen.get(key) != expected:
            got = seen.get(key)
            if isinstance(expected, list) and isinstance(got, list):
                extra = [x for x in got if x not in expected][:2]
                gone = [x for x in expected if x not in got][:2]
                raise Wrong(f"{key}: {len(got)} items, not {len(expected)} (extra {extra}, missing {gone})")
            raise Wrong(f"{key}: {str(got)[:160]}, not {str(expected)[:160]}")


def _verify(url: str, fx: Fixture, repair: bool = False) -> Any:
    return verify_target(url, fx.name, repair=repair)


def _names(exc: BaseException, fx: Fixture, damage: Damage) -> str:
    """'named', 'misnamed' or 'unnamed' for a project error."""
    text = str(exc)
    if any(f"df_{fx.name}{suffix}" in text for suffix in ("other", "src")):
        return "misnamed"
    if isinstance(exc, (CrawlDamaged, FormatError)) or any(n in text for n in (fx.schema, *damage.names)):
        return "named"
    return "unnamed"


def run_case(url: str, conn: Any, fx: Fixture, damage: Damage) -> tuple[str, str, str]:
    """(outcome, repair outcome or '', detail) of one case."""
    restore(conn, fx)
    if not damage.apply(conn):
        return "not applied", "", "the server refused the damage"
    try:
        verify_named = not _verify(url, fx).sound
    except FrontierError:
        verify_named = True
    except Exception as exc:
        return "raw", "", f"verify: {type(exc).__name__}: {exc}"[:300]
    try:
        seen = observe(url, fx)
        _compare(fx.model, seen)
    except Wrong as exc:
        if verify_named:
            return "verify-named", _repair(url, conn, fx, damage), str(exc)
        return ("free value" if damage.free else "silent"), "", str(exc)
    except FrontierError as exc:
        how = _names(exc, fx, damage)
        if how != "named":
            return how, "", f"{type(exc).__name__}: {exc}"[:300]
        if not verify_named:
            return "verify-sound", "", str(exc)[:300]
        return "named", _repair(url, conn, fx, damage), f"{type(exc).__name__}: {exc}"[:200]
    except Exception as exc:
        return "raw", "", f"{type(exc).__name__}: {exc}"[:300]
    return "exact", "", "verify named it" if verify_named else ""


def _repair(url: str, conn: Any, fx: Fixture, damage: Damage) -> str:
    """The same damage again, ``verify --repair``, then the steps: whole, recorded, refused or wrong."""
    restore(conn, fx)
    damage.apply(conn)
    try:
        repaired = _verify(url, fx, repair=True)
    except FrontierError as exc:
        return f"refused: {exc}"[:300]
    except Exception as exc:
        return f"wrong: repair raised {type(exc).__name__}: {exc}"[:300]
    after = _verify(url, fx)
    lost = [n for n in repaired.notes if "could not bring back" in n]
    if not after.sound:
        if not repaired.notes:
            return f"wrong: not sound after repair and nothing said: {after.findings[0]}"
        return "refused: " + repaired.notes[0][:200]
    try:
        seen = observe(url, fx)
    except FrontierError as exc:
        return f"wrong: sound after repair, then {type(exc).__name__}: {exc}"[:300]
    try:
        _compare_after_repair(fx, seen, lost=bool(lost))
    except Wrong as exc:
        return f"wrong: {'a loss recorded' if lost else 'sound'} after repair, and {exc}"[:300]
    return "recorded" if lost else "whole"


def _compare_after_repair(fx: Fixture, seen: dict[str, Any], *, lost: bool) -> None:
    """What a repair promises: nothing finished or known accepted again, nothing handed out twice or that was
    not pending, and (unless it recorded a loss) every pending request handed out and the same counts. The order
    and the host a request is counted under may differ (a request's priority or host column changed)."""
    urls = [u for u, _p in seen["handed"]]
    twice = [u for u, n in Counter(urls).items() if n > 1]
    if twice:
        raise Wrong(f"handed out twice: {twice[0]}")
    if (seen["known pushed"] and not lost) or seen["fresh refused"]:
        raise Wrong(f"dedupe differs: accepted {seen['known pushed'][:2]}, refused {seen['fresh refused'][:2]}")
    expected = {u for u, _p in fx.model["handed"]} | set(seen["known pushed"])  # (a recorded loss of seen keys)
    extra = set(urls) - expected
    if extra:
        raise Wrong(f"handed out what was not pending: {sorted(extra)[0]}")
    if not lost and (set(urls) != expected or seen["len after"] != fx.model["len after"]):
        raise Wrong(f"{len(expected - set(urls))} pending requests were not handed out, {seen['len after']} left")


def Tally() -> DamageTally:  # noqa: N802 - what the campaign's test makes, as a class would be
    """A tally of this campaign's outcomes."""
    return DamageTally(("named", "exact", "not applied", "verify-named", "free value"),
                       ("named", "exact", "not applied", "verify-named", "free value", "silent", "misnamed",
                        "unnamed", "raw", "verify-sound"),
                       ("named", "exact", "silent", "raw", "verify-sound"))


def cases_wanted(default: int, fixtures: int) -> int:
    """Cases per fixture: ``DISKFRONTIER_FUZZ_CASES`` (all fixtures together), else ``default``."""
    return max(10, int(os.environ.get("DISKFRONTIER_FUZZ_CASES", default * fixtures)) // fixtures)
