"""Folders are the layers (docs/design.md, "Layers"): a module imports only from its own layer or a lower one, and
no import goes round in a circle, those made for type checking (``if TYPE_CHECKING:``) included.

Every module of the package sits in a folder of the map below, or is one of the shims kept at the top for old
import paths (which nothing of the package imports), so that a new module is placed on purpose. The design
page's table says the same as the map: the test reads it.
"""

from __future__ import annotations

import ast
import os
import re

from paths import REPO

import diskfrontier

PACKAGE = os.path.dirname(diskfrontier.__file__)  # the installed package: what the wheel ships
DESIGN = os.path.join(REPO, "docs", "design.md")

# folder -> layer: a module imports from its own layer or a lower one
FOLDERS = {
    "core": 1,
    "files": 2,
    "contract": 3, "request": 3,
    "politeness": 4,
    "scrapyfiles": 5,
    "jobdir": 6, "redisfrontier": 6, "pgfrontier": 6,
    "access": 7, "transfer": 7,
    "run": 8, "scrapy": 8, "cli": 8, "live": 8,
}
# the package's own modules at its top: what it exports, and the old import paths it keeps (shims)
TOP = {"__init__", "__main__"}
SHIMS = {"errors", "failures", "frontier", "jobinfo", "verify"}
PACKAGE_LAYER = 9


def layer_of(module: str) -> int:
    top = module.split(".")[0]
    if top in FOLDERS:
        return FOLDERS[top]
    if module in TOP or module in SHIMS or module == "":
        return PACKAGE_LAYER
    raise AssertionError(f"diskfrontier.{module} is in no folder of the layers: move it into one (the map in "
                         f"tests/project/test_layers.py and the table of docs/design.md)")


def modules() -> dict[str, str]:
    """Every module of the package (dotted, without the package's own name) and its file."""
    out = {}
    for root, _dirs, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(root, name), PACKAGE)[:-3].replace(os.sep, ".")
                if rel == "__init__":
                    rel = ""
                out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(root, name)
    return out


def imports_of(module: str, path: str) -> set[str]:
    """The package's modules that ``module`` imports (relative or absolute; for type checking too)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = set()
    known = modules_known()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[:len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            elif node.module and (node.module == "diskfrontier" or node.module.startswith("diskfrontier.")):
                target = node.module[len("diskfrontier."):] if node.module != "diskfrontier" else ""
            else:
                continue
            for alias in node.names:  # from . import a: a may be a module of that package
                sub = f"{target}.{alias.name}" if target else alias.name
                found.add(sub if sub in known else target)
        elif isinstance(node, ast.Import):
            found |= {a.name[len("diskfrontier."):] for a in node.names if a.name.startswith("diskfrontier.")}
    return {t for t in found if t and t != module}


_KNOWN: set[str] = set()


def modules_known() -> set[str]:
    if not _KNOWN:
        _KNOWN.update(modules())
    return _KNOWN


def test_every_module_is_in_a_folder_of_the_layers():
    found = modules()
    assert len(found) > 60 and "jobdir.frontier" in found
    for module in found:
        layer_of(module)
    assert "" in found  # the package itself


def test_every_module_imports_only_from_its_layer_or_below():
    wrong = []
    for module, path in sorted(modules().items()):
        own = layer_of(module)
        for target in sorted(imports_of(module, path)):
            if layer_of(target) > own:
                wrong.append(f"{module} (layer {own}) imports {target} (layer {layer_of(target)})")
    assert wrong == []


def test_nothing_of_the_package_imports_a_shim():
    wrong = [f"{module} imports diskfrontier.{target}" for module, path in sorted(modules().items())
             for target in imports_of(module, path) if target in SHIMS and module not in SHIMS]
    assert wrong == []


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself) of ``graph``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:  # Tarjan's algorithm, without recursion
        nonlocal counter
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph.get(node, ()):
                        found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_goes_round_in_a_circle():
    found = modules()
    graph = {module: {t for t in imports_of(module, path) if t in found} for module, path in found.items()}
    assert circles(graph) == []


def test_the_checks_see_what_they_look_for(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("from ..cli import main\nfrom . import journal\nif TYPE_CHECKING:\n    from ..run import crawl\n")
    assert imports_of("jobdir.probe", str(path)) == {"cli", "jobdir.journal", "run.crawl"}
    assert layer_of("cli") > layer_of("jobdir.probe")
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_design_page_shows_the_same_map():
    with open(DESIGN, encoding="utf-8") as f:
        text = f.read()
    table = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    shown: dict[str, int] = {}
    for row in re.findall(r"^\| (\d+) \| ([^|]+) \|", table, flags=re.M):
        layer, folders = int(row[0]), row[1]
        for folder in re.findall(r"`([a-z_]+)/`", folders):
            shown[folder] = layer
    assert shown == FOLDERS
