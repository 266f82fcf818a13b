"""The README's and the documentation site's examples run, and their claims stay true.

Every ```python block of README.md and of every page under docs/ is run (the blocks of one page in
order, in one namespace, in a fresh working directory); the ```py crawler of the crawl() guide is
run as a script against a site on loopback addresses. The references list every command and
every public name.
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import re

import pytest
from paths import REPO

import diskfrontier
from diskfrontier.cli import main

ROOT = REPO
README = os.path.join(ROOT, "README.md")
DOCS = os.path.join(ROOT, "docs")
PAGES = sorted(os.path.relpath(p, DOCS) for p in glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True))


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _page(name: str) -> str:
    return _read(os.path.join(DOCS, name))


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def _python_blocks() -> list[str]:
    return _blocks(_read(README), "python")


def test_readme_library_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks()
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    from diskfrontier import Frontier, Request

    with Frontier("crawls/shop") as frontier:  # the example crawled and finished its seed
        assert len(frontier) == 0
        assert frontier.push(Request("https://shop.example/")) is False


@pytest.mark.parametrize("page", [p for p in PAGES if _blocks(_page(p), "python")])
def test_every_python_block_of_the_docs_runs(page, tmp_path, monkeypatch, request, capsys):
    """The blocks of one page run in order, sharing names, in an empty working directory."""
    monkeypatch.chdir(tmp_path)
    text = _page(page)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    if "redis://" in text:  # a real redis-server from the tests' fixture, and a crawl of the test's own
        url, crawl_name = request.getfixturevalue("redis_url"), request.getfixturevalue("crawl_name")
        text = text.replace("redis://127.0.0.1:6379/0", url).replace('crawl="shop"', f'crawl="{crawl_name}"')
        namespace["fetch"] = lambda request: []  # "your code": a page without links
    if "postgresql://" in text:  # a real PostgreSQL server from the tests' fixture, and a crawl of the test's own
        url, crawl_name = request.getfixturevalue("postgres_url"), request.getfixturevalue("crawl_name")
        text = text.replace("postgresql://postgres@127.0.0.1:5432/crawls", url).replace('crawl="shop"',
                                                                                         f'crawl="{crawl_name}"')
        namespace["fetch"] = lambda request: []  # "your code": a page without links
    for number, block in enumerate(_blocks(text, "python"), 1):
        exec(compile(block, f"docs/{page} block {number}", "exec"), namespace)


def test_every_code_block_of_the_docs_is_run_or_is_a_shell_sample():
    """A block that the tests do not run is a shell sample or plain text, never Python."""
    for page in PAGES:
        for language in re.findall(r"^```(\S*)\n", _page(page), flags=re.M):
            assert language in ("python", "py", "sh", "console", "text", ""), (page, language)
        if page != os.path.join("guide", "crawl.md"):
            assert _blocks(_page(page), "py") == [], f"docs/{page}: use ```python for a block the tests run"


def test_cli_guide_lists_every_command():
    text = _page(os.path.join("guide", "cli.md"))
    for name in main.commands:
        assert f"diskfrontier {name} " in text, name


def test_cli_reference_documents_every_command():
    """The reference page is generated from the click group: render it as the site does."""
    markdown = pytest.importorskip("markdown")
    pytest.importorskip("mkdocs_click")
    text = _page(os.path.join("reference", "cli.md"))
    assert ":module: diskfrontier.cli" in text and ":command: main" in text
    html = markdown.markdown(text, extensions=["mkdocs-click"])
    for name, command in main.commands.items():
        assert f"diskfrontier {name}" in html, name
        first_line = (command.help or "").strip().splitlines()[0]
        assert first_line.split("`")[0][:40] in html.replace("<code>", "").replace("</code>", ""), name


def test_api_reference_documents_every_public_name():
    text = _page(os.path.join("reference", "api.md"))
    documented = re.findall(r"^::: (\S+)$", text, flags=re.M)
    assert len(documented) == len(set(documented)), documented
    names = {d.removeprefix("diskfrontier.") for d in documented}
    assert names - {"scrapy"} == set(diskfrontier.__all__)
    assert all(d.count(".") == 1 for d in documented), "by their top-level import path only"
    scrapy_options = text.split("::: diskfrontier.scrapy", 1)[1]
    for name in ("Scheduler", "RetryAfterMiddleware"):
        assert f"- {name}" in scrapy_options, name


def test_every_page_is_in_the_nav():
    config = _read(os.path.join(ROOT, "mkdocs.yml"))
    for page in PAGES:
        assert page in config, f"docs/{page} is not in mkdocs.yml's nav"


def test_benchmark_pages_name_result_files_that_exist():
    for page in PAGES:
        for name in re.findall(r"<!-- benchmark-tables: (\w+)", _page(page)):
            path = os.path.join(ROOT, "benchmarks", "results", f"{name}.json")
            assert os.path.exists(path), (page, name)
            with open(path) as f:
                script = json.load(f)["benchmark"]  # the script that wrote it (one may write several: --results)
            assert os.path.exists(os.path.join(ROOT, "benchmarks", f"{script}.py")), (page, name, script)


def _sh_blocks() -> list[str]:
    return _blocks(_read(README), "sh")


def test_readme_test_command_tests_the_installed_package_as_ci_does():
    commands = [line for block in _sh_blocks() for line in block.splitlines() if "pytest" in line]
    assert len(commands) == 1, commands
    command = commands[0]
    assert "pip install '.[test]'" in command and "-e" not in command.split()  # not editable
    assert "cd tests && DISKFRONTIER_INSTALLED_TEST=1 pytest -q" in command  # not python -m pytest from the root
    ci = _read(os.path.join(ROOT, ".ci", "run"))
    assert "cd tests && DISKFRONTIER_INSTALLED_TEST=1 pytest -q" in ci


def test_readme_names_the_command_that_serves_the_docs():
    text = _read(README)
    assert "pip install '.[docs]'" in text and "mkdocs serve" in text
    assert "mkdocs build --strict" in _read(os.path.join(ROOT, ".ci", "run"))


def _crawl_one_site(tmp_path, block: str, *, keeps_fresh: bool = False) -> None:
    """Run a documented one-site crawler against a loopback site whose pages link with relative URLs:
    robots.txt fetched once and obeyed, 404s failed at once (one try each), other sites left alone, at most
    5 links deep. ``keeps_fresh``: a crawler that revisits runs until Ctrl-C: it gets a SIGINT once every
    page is fetched, and by then has fetched none twice (its pages come back a day later)."""
    import signal
    import subprocess
    import sys
    import time

    from diskfrontier.run.demo import LinkedSite

    script = tmp_path / "crawler.py"
    script.write_text(block.replace("delay=1.0", "delay=0.002"))  # the site is local: a short delay
    pages, missing, disallowed = 120, {4, 9, 22}, 6
    robots = (200, f"User-agent: *\nDisallow: /docs/{disallowed}.html\n")
    # page m is linked from its parent (m - 1) // 2 only (and from page 0 and its children, after it): found
    # when its parent was fetched and m is at most 5 links deep; the page robots.txt disallows is neither
    # fetched nor failed
    ok: set[int] = set()
    failed: set[int] = set()
    for m in range(2**6 - 1):  # depth 0 to 5
        if m and (m - 1) // 2 not in ok:
            continue
        if m != disallowed:
            (failed if m in missing else ok).add(m)
    expected = {"/robots.txt"} | {f"/docs/{m}.html" for m in ok | failed}
    with LinkedSite(pages, missing=frozenset(missing), robots=robots) as site:
        process = subprocess.Popen([sys.executable, str(script), site.base + "/docs/0.html"], cwd=tmp_path,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if keeps_fresh:
            deadline = time.monotonic() + 120
            while set(site.fetched()) < expected and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)  # anything it would fetch beyond the expected pages, it fetches now
            process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
        fetched = site.fetched()
    assert process.returncode == 0, err[-2000:]
    urls = sorted(f"{site.base}/docs/{m}.html" for m in failed)
    assert out.strip() == f"this run: {len(ok)} pages, {len(failed)} failed; failed in all runs: {urls}", out
    assert fetched["/robots.txt"] == 1
    assert set(fetched) == expected
    assert set(fetched.values()) == {1}  # a 404 is asked for once: failed at once, not retried
    if not keeps_fresh:  # run again: nothing left to fetch in this run, the failures of the first still listed
        again = subprocess.run([sys.executable, str(script), site.base + "/docs/0.html"], cwd=tmp_path,
                               capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr[-2000:]
        assert again.stdout.strip() == f"this run: 0 pages, 0 failed; failed in all runs: {urls}", again.stdout


def test_the_docs_crawler_crawls_one_site_obeying_robots_with_404s_and_a_depth_limit(tmp_path):
    """The crawl() guide's crawler (threads, stdlib HTTP)."""
    (block,) = [b for b in _blocks(_page(os.path.join("guide", "crawl.md")), "py") if "crawl(frontier, fetch" in b]
    assert len([line for line in block.splitlines() if line.strip()]) < 30
    _crawl_one_site(tmp_path, block)


def test_the_readme_crawler_crawls_one_site_obeying_robots_with_404s_and_a_depth_limit(tmp_path):
    """The README's crawler (acrawl, httpx, revisits), extracted from README.md and run as written until Ctrl-C."""
    (block,) = [b for b in _blocks(_read(README), "py") if "await acrawl(" in b]
    assert len([line for line in block.splitlines() if line.strip()]) < 36
    _crawl_one_site(tmp_path, block, keeps_fresh=True)


def test_docs_install_extras_from_the_checkout():
    """The package is installed from a checkout (it is not on an index): extras are ``.[name]``."""
    texts = {"README.md": _read(README), **{f"docs/{p}": _page(p) for p in PAGES}}
    for name, text in texts.items():
        assert re.findall(r"pip install [^\n`]*diskfrontier\[", text) == [], name
    everything = "\n".join(texts.values())
    assert "pip install '.[scrapy]'" in everything and "pip install '.[redis]'" in everything


def test_every_test_file_the_docs_name_exists():
    named = set()
    places = [os.path.join(ROOT, "README.md")]
    for top in ("docs", "diskfrontier"):
        for root, _dirs, names in os.walk(os.path.join(ROOT, top)):
            places += [os.path.join(root, name) for name in names if name.endswith((".md", ".py"))]
    for place in places:
        with open(place, encoding="utf-8") as f:
            named |= set(re.findall(r"\btests/[\w/]+\.py\b", f.read()))
    assert len(named) > 10
    assert sorted(path for path in named if not os.path.isfile(os.path.join(ROOT, path))) == []


def _three_branch_site(pages: int = 51) -> dict[int, list[int]]:
    """The links of a site where some pages are found first along a long path by a depth-first crawl.

    Page 0 links to three branches 1, 2, 3. Branch k links to its hub (2 links from the start) and to a
    path of two pages leading to the next branch's hub (4 links along it). A hub starts a chain of pages,
    the first three within 5 links of the start, the rest further. Whichever branch a depth-first crawl
    takes last, its hub was found first along the path from another branch, 4 links deep: the hub's
    chain would be cut after one page."""
    links: dict[int, list[int]] = {0: [1, 2, 3]}
    hubs = [4 + 6 * k for k in range(3)]
    tails = iter(range(22, pages))
    for k, hub in enumerate(hubs):
        links[1 + k] = [hub, hub + 4]
        links[hub + 4], links[hub + 5] = [hub + 5], [hubs[(k + 1) % 3]]
        chain = [hub, hub + 1, hub + 2, hub + 3] + [next(tails) for _ in range(10 if k < 2 else 9)]
        for here, there in itertools.pairwise(chain):
            links[here] = [there]
    return links


def _crawl_branch_site(tmp_path, block: str, *, keeps_fresh: bool = False) -> None:
    """Run a documented crawler on a 51-page site where some pages are found first along a long path
    (``_three_branch_site``): it must fetch every page within 5 links of the start and none further, each
    once. ``keeps_fresh``: the crawler runs until Ctrl-C, sent once it has fetched them."""
    import signal
    import subprocess
    import sys
    import time
    from collections import deque

    from diskfrontier.run.demosites import LinkedSite

    pages, graph = 51, _three_branch_site()

    class BranchSite(LinkedSite):
        def page(self, n: int) -> str:
            links = [f"{m}.html" for m in graph.get(n, [])] + ["/docs/0.html"]
            return "<html><body>" + "".join(f'<a href="{href}">{href}</a>\n' for href in links) + "</body></html>"

    depth = {0: 0}
    queue = deque([0])
    while queue:
        n = queue.popleft()
        for m in graph.get(n, []):
            if m not in depth:
                depth[m] = depth[n] + 1
                queue.append(m)
    within = {n for n, d in depth.items() if d <= 5}
    assert len(within) == 22 and len(depth) == pages  # the rest are more than 5 links away
    script = tmp_path / "crawler.py"
    script.write_text(block.replace("delay=1.0", "delay=0.002"))
    expected = {"/robots.txt"} | {f"/docs/{n}.html" for n in within}
    with BranchSite(pages) as site:
        process = subprocess.Popen([sys.executable, str(script), site.base + "/docs/0.html"], cwd=tmp_path,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if keeps_fresh:
            deadline = time.monotonic() + 120
            while set(site.fetched()) < expected and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)  # anything it would fetch beyond the expected pages, it fetches now
            process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
        fetched = site.fetched()
    assert process.returncode == 0, err[-2000:]
    got = {int(path.split("/")[-1].split(".")[0]) for path in fetched if path.startswith("/docs/")}
    assert (len(got & within), sorted(within - got), sorted(got - within)) == (len(within), [], [])
    assert out.strip() == f"this run: {len(within)} pages, 0 failed; failed in all runs: []", out
    assert set(fetched.values()) == {1}


def test_the_readme_crawler_fetches_every_page_within_five_links_when_pages_are_found_along_long_paths_first(
        tmp_path):
    (block,) = [b for b in _blocks(_read(README), "py") if "await acrawl(" in b]
    _crawl_branch_site(tmp_path, block, keeps_fresh=True)


def test_the_docs_crawler_fetches_every_page_within_five_links_when_pages_are_found_along_long_paths_first(
        tmp_path):
    (block,) = [b for b in _blocks(_page(os.path.join("guide", "crawl.md")), "py") if "crawl(frontier, fetch" in b]
    _crawl_branch_site(tmp_path, block)


def test_the_docs_extra_installs_what_formats_the_api_signatures():
    """mkdocstrings formats the signatures of the API page (separate_signature) with Black or Ruff; without
    either the build says so and leaves them on one line."""
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert "separate_signature: true" in _read(os.path.join(ROOT, "mkdocs.yml"))
    assert {re.split(r"[<>=\[ ]", need)[0] for need in extras["docs"]} & {"ruff", "black"}, extras["docs"]


def test_every_command_is_summed_up_in_a_whole_sentence_in_help_and_on_the_reference_page():
    """``diskfrontier --help`` and the reference page's list of commands show each command's summary whole:
    the first clause of its help, ending a sentence, never cut at a width or at the end of a line."""
    from click.testing import CliRunner

    listed = CliRunner().invoke(main, ["--help"]).output.split("Commands:", 1)[1]
    assert "..." not in listed, listed
    flat = " ".join(listed.split())
    for name in main.commands:
        command = main.commands[name]
        summary = command.get_short_help_str()
        assert summary.endswith(".") and "\n" not in summary, (name, summary)
        assert " ".join((command.help or "").split()).startswith(summary[:-1]), (name, summary)
        assert f"{name} {summary}" in flat, name
    markdown = pytest.importorskip("markdown")
    pytest.importorskip("mkdocs_click")
    html = markdown.markdown(_page(os.path.join("reference", "cli.md")), extensions=["mkdocs-click"])
    for name in main.commands:
        assert f"<em>{name}</em>: {main.commands[name].get_short_help_str()}</li>" in html, name


def _hook():
    import importlib.util

    pytest.importorskip("mkdocs")
    path = os.path.join(DOCS, "hooks", "benchmark_tables.py")
    spec = importlib.util.spec_from_file_location("benchmark_tables", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_headline_figures_come_first_and_from_the_results_a_run_wrote():
    """The home page says how to install and gives 'N x Scrapy's scheduler' and the kill -9 promise; the
    Benchmarks index and the Frontier page open with those figures, the goals after them. Each figure is
    the one a run printed, read from benchmarks/results at build time, never typed into the page."""
    hook = _hook()
    results = os.path.join(ROOT, "benchmarks", "results")
    home = _page("index.md")
    assert re.search(r"^pip install \.", home, flags=re.M), "no install line on the home page"
    assert "Scrapy's scheduler" in home and "nothing lost after `kill -9`" in home
    rendered: dict[str, str] = {}
    for page in ("index.md", os.path.join("benchmarks", "index.md"), os.path.join("benchmarks", "frontier.md")):
        text = _page(page)
        assert "benchmark-figure: bench_frontier 0 diskfrontier.scrapy.Scheduler enqueue_request" in text, page
        first = text.find("<!-- benchmark-figure:")
        goals = text.find("<!-- benchmark-tables: bench_frontier 0")
        assert goals == -1 or first < goals, f"docs/{page}: the goals table comes before the headline figures"
        rendered[page] = hook.on_page_markdown(text, None, {"config_file_path": os.path.join(ROOT, "mkdocs.yml")},
                                               None)
        assert "benchmark-figure" not in rendered[page]
    document = hook.load(results, "bench_frontier")
    (row,) = [r for r in document["tables"][0]["rows"] if r[0].startswith("diskfrontier.scrapy.Scheduler enqueue")]
    ratio = row[1].split(" (")[0]
    assert re.fullmatch(r"\d+\.\d+x", ratio), row
    assert f"**{ratio}\nScrapy's scheduler**" in rendered["index.md"], rendered["index.md"][:1500]
    with pytest.raises(Exception, match="rows begin with"):
        hook.figure(document, 0, "no such figure")
    with pytest.raises(Exception, match="rows begin with"):
        hook.figure(document, 0, "library")  # two rows: which one is meant is not said
