"""The package's layers (docs/design.md, "Layers"): a module imports only from its own layer or a lower one.

Every module of the package must have a layer here, so that a new module is placed on purpose.
"""

from __future__ import annotations

import ast
import os

import diskfrontier

PACKAGE = os.path.dirname(diskfrontier.__file__)

# (module name or sub-package prefix, layer); the first that matches a module decides
LAYERS = [
    ("errors", 1),
    ("files", 2),
    ("request", 3), ("failures", 3), ("contract", 3), ("snapshot", 3), ("failurekinds", 3),
    ("politeness", 4),
    ("scrapyfiles", 5),
    ("jobdir", 6), ("redisfrontier.leases", 6), ("redisfrontier", 6),
    ("transfer", 7), ("targets", 7), ("asyncfrontier", 7),
    ("runs", 8), ("runpolicy", 8), ("asynccrawl", 8), ("robots", 8), ("robotsfetch", 8), ("demo", 8), ("scrapy", 8),
    ("cli", 8),
    ("live", 8),
    ("frontier", 9), ("jobinfo", 9), ("verify", 9), ("__init__", 9), ("__main__", 9),  # old paths, the package
]


def layer_of(module: str) -> int:
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    raise AssertionError(f"diskfrontier.{module} has no layer: give it one in tests/test_layers.py and docs/design.md")


def modules() -> dict[str, str]:
    """Every module of the package (dotted, without the package's own name) and its file."""
    out = {}
    for root, _dirs, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(root, name), PACKAGE)[:-3].replace(os.sep, ".")
                out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(root, name)
    return out


def imports_of(module: str, path: str) -> set[str]:
    """The package's modules that ``module`` imports (relative or absolute)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = set()
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node.test)
                   for n in ast.walk(node)}  # imports for annotations only: no dependency at run time
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[:len(base) - (node.level - 1)]
                if node.module is None:  # from . import a, b: each a module (or a name) of that package
                    found |= {".".join([*base, alias.name]) for alias in node.names}
                    continue
                target = ".".join([*base, node.module])
            elif node.module and node.module.startswith("diskfrontier"):
                target = node.module[len("diskfrontier."):] if node.module != "diskfrontier" else ""
            else:
                continue
            found.add(target)
        elif isinstance(node, ast.Import):
            found |= {a.name[len("diskfrontier."):] for a in node.names if a.name.startswith("diskfrontier.")}
    return {t for t in found if t}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def test_every_module_imports_only_from_its_layer_or_below():
    found = modules()
    assert len(found) > 40 and "jobdir.frontier" in found
    wrong = []
    for module, path in sorted(found.items()):
        own = layer_of(module)
        for target in sorted(imports_of(module, path)):
            if layer_of(target) > own:
                wrong.append(f"{module} (layer {own}) imports {target} (layer {layer_of(target)})")
    assert wrong == []


def test_the_check_sees_an_import_from_above(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("from ..cli import main\nfrom . import journal\n")
    assert imports_of("jobdir.probe", str(path)) == {"cli", "jobdir.journal"}
    assert layer_of("cli") > layer_of("jobdir.probe")
