"""Benchmark tables for the documentation site, made from the JSON files the benchmarks write.

A page asks for the tables of one benchmark run with a line of its own::

    <!-- benchmark-tables: bench_frontier -->

or for some of them, by their index in the file::

    <!-- benchmark-tables: bench_hosts 0,1 -->

and the line is replaced, at build time, by the run's command, date and machine, then each table
with its notes, from ``benchmarks/results/<name>.json`` (written by ``benchmarks/benchresults.py``).

A single figure goes into a sentence with::

    <!-- benchmark-figure: bench_frontier 0 library push / Scrapy -->

replaced by the figure the run printed in the ``measured`` column of the one row of table 0 whose
first cell begins with the text given (``3.83x``: the cell up to its details in parentheses).
A missing or malformed file, an index out of range, or a row not found or found twice stops the build.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"^<!-- benchmark-tables: ([A-Za-z0-9_]+)(?: ([0-9, ]+))? -->$", re.M)
FIGURE = re.compile(r"<!-- benchmark-figure: ([A-Za-z0-9_]+) ([0-9]+) (.+?) -->")


def _results_dir(config: Any) -> str:
    root = os.path.dirname(os.path.abspath(config["config_file_path"]))
    return os.path.join(root, "benchmarks", "results")


def _cell(value: Any, fmt: str | None) -> str:
    if value is None:
        return "-"
    if fmt is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        text = fmt.format(value)
    else:
        text = str(value)
    return text.replace("|", "\\|")


def render_table(table: dict[str, Any]) -> str:
    """One table as Markdown: its title, the table (numbers right-aligned), its notes."""
    columns, formats, rows = table["columns"], table["formats"], table["rows"]
    numeric = [any(isinstance(row[i], (int, float)) for row in rows) for i in range(len(columns))]
    lines = [f"**{table['title']}**", "", "| " + " | ".join(columns) + " |",
             "|" + "|".join("---:" if n else ":---" for n in numeric) + "|"]
    for row in rows:
        if len(row) != len(columns):
            raise PluginError(f"benchmark table {table['title']!r}: a row of {len(row)} cells for "
                              f"{len(columns)} columns")
        lines.append("| " + " | ".join(_cell(v, f) for v, f in zip(row, formats, strict=True)) + " |")
    lines.append("")
    lines.extend(f"- {note}" for note in table.get("notes", []))
    return "\n".join(lines).rstrip() + "\n"


def render_run(document: dict[str, Any], which: list[int] | None = None) -> str:
    machine = document.get("machine", {})
    head = (f"Run `{document['command']}` on {document['when']} (Python {machine.get('python')}, "
            f"{machine.get('cpus')} CPUs, load average {machine.get('load')} at the end); "
            f"from `benchmarks/results/{document['benchmark']}.json`.")
    tables = document["tables"]
    if which is not None:
        bad = [i for i in which if not 0 <= i < len(tables)]
        if bad:
            raise PluginError(f"{document['benchmark']}.json has {len(tables)} tables: no table {bad[0]}")
        tables = [tables[i] for i in which]
    return "\n".join([head, "", *(render_table(t) for t in tables)])


def figure(document: dict[str, Any], table: int, row: str) -> str:
    """The ``measured`` figure of the one row of table ``table`` whose first cell begins with ``row``,
    as the run printed it, without the details in parentheses after it."""
    tables = document["tables"]
    if not 0 <= table < len(tables):
        raise PluginError(f"{document['benchmark']}.json has {len(tables)} tables: no table {table}")
    columns = tables[table]["columns"]
    if "measured" not in columns:
        raise PluginError(f"{document['benchmark']}.json table {table} has no 'measured' column: {columns}")
    at = columns.index("measured")
    found = [r for r in tables[table]["rows"] if str(r[0]).startswith(row)]
    if len(found) != 1:
        raise PluginError(f"{document['benchmark']}.json table {table}: {len(found)} rows begin with {row!r}, "
                          f"not one")
    return str(found[0][at]).split(" (", 1)[0]


def load(directory: str, name: str) -> dict[str, Any]:
    path = os.path.join(directory, f"{name}.json")
    try:
        with open(path) as f:
            document = json.load(f)
    except (OSError, ValueError) as exc:
        raise PluginError(f"benchmark results {path}: {exc}; run the benchmark that writes it (python "
                          f"benchmarks/{name}.py, or the command its page names, with --results)") from exc
    for key in ("benchmark", "command", "when", "tables"):
        if key not in document:
            raise PluginError(f"benchmark results {path}: no {key!r}")
    return document


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    directory = _results_dir(config)

    def replace(match: re.Match[str]) -> str:
        which = [int(i) for i in match.group(2).replace(" ", "").split(",") if i] if match.group(2) else None
        return render_run(load(directory, match.group(1)), which)

    def replace_figure(match: re.Match[str]) -> str:
        return figure(load(directory, match.group(1)), int(match.group(2)), match.group(3))

    return FIGURE.sub(replace_figure, MARKER.sub(replace, markdown))


def on_config(config: Any) -> Any:
    """Rebuild when a result file changes under ``mkdocs serve``."""
    directory = _results_dir(config)
    if os.path.isdir(directory) and directory not in config["watch"]:
        config["watch"].append(directory)
    return config
