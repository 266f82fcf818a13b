"""What is shipped: the wheel and the sdist hold the whole package, and CI tests the installed wheel.

DISKFRONTIER_INSTALLED_TEST=1 (set by .ci/run) says the tests are meant to run against the
package installed from the wheel, not against the source tree; the tests below then check
that they do, in this process and in a child process started the way the other tests start theirs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest
from paths import REPO

import diskfrontier

SOURCE = os.path.join(REPO, "diskfrontier")
INSTALLED_TEST = os.environ.get("DISKFRONTIER_INSTALLED_TEST") == "1"
MIN_SETUPTOOLS = 77  # as in pyproject.toml's [build-system]


def _from_source(path: str) -> bool:
    path = os.path.realpath(path)
    return path == SOURCE or path.startswith(SOURCE + os.sep)


def _package_files(root: str) -> set[str]:
    """Every .py file and py.typed under root, as paths relative to its parent (diskfrontier/...)."""
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py") or name == "py.typed":
                rel = os.path.relpath(os.path.join(folder, name), os.path.dirname(root))
                found.add(rel.replace(os.sep, "/"))
    return found


needs_installed = pytest.mark.skipif(
    not INSTALLED_TEST,
    reason="DISKFRONTIER_INSTALLED_TEST=1 is not set: the source tree may be under test (see .ci/run)",
)


@needs_installed
def test_the_installed_package_is_under_test():
    path = os.path.dirname(os.path.realpath(diskfrontier.__file__))
    assert not _from_source(path), f"diskfrontier imported from the source tree: {path}"
    assert "site-packages" in path.split(os.sep), path


@needs_installed
def test_child_processes_import_the_installed_package():
    # The same way the tests start their children: same interpreter, cwd and environment inherited.
    code = "import diskfrontier, os; print(os.path.dirname(os.path.realpath(diskfrontier.__file__)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    path = out.stdout.strip()
    assert not _from_source(path), f"a child process (cwd {os.getcwd()}) imported diskfrontier from {path}"
    assert "site-packages" in path.split(os.sep), path
    script = os.path.join(os.path.dirname(sys.executable), "diskfrontier")
    assert os.path.exists(script), f"no console script at {script}"


@needs_installed
def test_the_installed_package_has_every_module_of_the_source():
    installed = _package_files(os.path.dirname(os.path.realpath(diskfrontier.__file__)))
    missing = _package_files(SOURCE) - installed
    assert not missing, f"in the source tree but not installed: {sorted(missing)}"


def _copy_source(dest: str) -> str:
    """A copy of the project without what a build or a development tree leaves behind."""
    ignore = shutil.ignore_patterns(
        ".git", ".venv", "venv", "build", "dist", "*.egg-info", ".*_cache", ".hypothesis", "__pycache__",
        "*.py[cod]", "demo-crawl", "bench-out",
    )
    shutil.copytree(REPO, dest, ignore=ignore, symlinks=True)
    return dest


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The wheel and the sdist built from a copy of the source tree, offline, by the PEP 517 backend."""
    try:
        import setuptools
    except ImportError:
        setuptools = None
    version = int(setuptools.__version__.split(".")[0]) if setuptools else 0
    if version < MIN_SETUPTOOLS:
        message = (f"setuptools>={MIN_SETUPTOOLS} is needed to build offline (found {version or 'none'}): "
                   "pip install '.[test]'")
        if INSTALLED_TEST:
            pytest.fail(message)
        pytest.skip(message)
    base = tmp_path_factory.mktemp("build")
    src = _copy_source(str(base / "src"))
    out = str(base / "out")
    os.mkdir(out)
    code = ("import sys, setuptools.build_meta as backend; out = sys.argv[1]; backend.build_wheel(out); "
            "backend.build_sdist(out)")
    result = subprocess.run([sys.executable, "-c", code, out], cwd=src, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    wheels = [n for n in os.listdir(out) if n.endswith(".whl")]
    sdists = [n for n in os.listdir(out) if n.endswith(".tar.gz")]
    assert len(wheels) == 1 and len(sdists) == 1, os.listdir(out)
    return {
        "wheel": os.path.join(out, wheels[0]),
        "sdist": os.path.join(out, sdists[0]),
        "log": result.stdout + result.stderr,
    }


def test_the_build_has_no_deprecation_warnings(built):
    assert "Deprecat" not in built["log"], built["log"]


def test_the_wheel_holds_every_module_and_the_license(built):
    with zipfile.ZipFile(built["wheel"]) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = wheel.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    expected = _package_files(SOURCE)
    assert "diskfrontier/py.typed" in expected and "diskfrontier/scrapy/scheduler.py" in expected
    missing = expected - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    assert not [n for n in names if n.startswith(("tests/", "jobdir-example/", "benchmarks/"))]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)
    assert "License-Expression: BSD-3-Clause" in metadata
    assert "diskfrontier = diskfrontier.cli:main" in entry_points


def test_the_sdist_holds_the_package_tests_and_example(built):
    with tarfile.open(built["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    wanted = _package_files(SOURCE) | {
        "LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "mkdocs.yml", "docs/index.md",
        "jobdir-example/make_example.py", "jobdir-example/job/frontier.json", "jobdir-example/job/requests.urls",
        "tests/conftest.py", "tests/project/test_packaging.py", "tests/kits/paths.py",
    }
    missing = wanted - names
    assert not missing, f"not in the sdist: {sorted(missing)}"
    assert not [n for n in names if n.endswith((".pyc", ".pyo")) or "/.hypothesis/" in f"/{n}"]


def _static_files() -> set[str]:
    """The dashboard's page (diskfrontier serve): its HTML, CSS, script and icon, package data."""
    folder = os.path.join(SOURCE, "live", "static")
    return {f"diskfrontier/live/static/{name}" for name in os.listdir(folder)}


def test_the_wheel_and_the_sdist_hold_the_dashboards_page(built):
    static = _static_files()
    assert {"diskfrontier/live/static/index.html", "diskfrontier/live/static/app.js",
            "diskfrontier/live/static/style.css"} <= static
    with zipfile.ZipFile(built["wheel"]) as wheel:
        names = set(wheel.namelist())
    assert static - names == set(), "not in the wheel"
    with tarfile.open(built["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert static - names == set(), "not in the sdist"


@needs_installed
def test_the_installed_package_serves_its_page():
    from diskfrontier.live.server import static_file

    for path in _static_files():
        assert static_file(os.path.basename(path))
