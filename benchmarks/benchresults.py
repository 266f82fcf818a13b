"""What a benchmark run measured, written as JSON for the documentation site.

Every benchmark prints its tables and also writes them, with the raw figures behind them, to
``benchmarks/results/<benchmark>.json`` (``--results FILE`` writes elsewhere, ``--results ''``
writes nothing). The site's benchmark pages are generated from these files when it is built
(``docs/gen_benchmarks.py``), so a figure in the documentation is always one a run wrote.

A file holds::

    {"benchmark": "bench_frontier", "command": "python benchmarks/bench_frontier.py -n 20000",
     "when": "2026-12-06T03:20:00Z", "machine": {"python": ..., "cpus": ..., "load": ...},
     "parameters": {...}, "tables": [TABLE, ...], "figures": {...}}

and a TABLE is ``{"title": str, "columns": [str], "formats": [str | null], "rows": [[cell]],
"notes": [str]}``: a numeric cell is shown with its column's format (``"{:,.0f}"``), any other
cell as it is, ``null`` as "-".
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from collections.abc import Iterable, Sequence
from typing import Any

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def add_argument(parser: argparse.ArgumentParser, name: str) -> None:
    """Add ``--results FILE`` (default ``benchmarks/results/<name>.json``) to a benchmark's parser."""
    default = os.path.join(RESULTS, f"{name}.json")
    parser.add_argument("--results", metavar="FILE", default=default,
                        help=f"write the tables as JSON to FILE ('' for none; default {os.path.relpath(default)})")


def table(title: str, columns: Sequence[tuple[str, str | None]], rows: Iterable[Sequence[Any]],
          notes: Iterable[str] = ()) -> dict[str, Any]:
    """One table: ``columns`` are (header, format for numbers or None), ``rows`` lists of cells."""
    rows = [list(row) for row in rows]
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"table {title!r}: a row of {len(row)} cells for {len(columns)} columns: {row}")
    return {"title": title, "columns": [c for c, _ in columns], "formats": [f for _, f in columns],
            "rows": rows, "notes": list(notes)}


def write(path: str, name: str, parameters: dict[str, Any], tables: list[dict[str, Any]],
          figures: dict[str, Any] | None = None) -> None:
    """Write one run's tables and figures to ``path`` (atomically; nothing when ``path`` is empty)."""
    if not path:
        return
    argv = list(sys.argv[1:])
    if "--results" in argv:  # where the file went is not part of the command that measured
        i = argv.index("--results")
        del argv[i:i + 2]
    document = {
        "benchmark": name,
        "command": " ".join(["python", f"benchmarks/{name}.py", *argv]),
        "when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"python": platform.python_version(), "implementation": platform.python_implementation(),
                    "system": platform.system(), "cpus": os.cpu_count(),
                    "load": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None},
        "parameters": {k: v for k, v in parameters.items() if k != "results"},
        "tables": tables,
        "figures": figures or {},
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temp = f"{path}.{os.getpid()}.tmp"
    with open(temp, "w") as f:
        json.dump(document, f, indent=1, sort_keys=False, default=str)
        f.write("\n")
    os.replace(temp, path)
    print(f"results written to {path}", file=sys.stderr)
