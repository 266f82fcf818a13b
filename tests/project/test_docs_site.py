"""The documentation site as built (``mkdocs build --strict``), read in a real headless Chromium at
1280 px: no line of code or signature runs past the edge of its block on any page."""

from __future__ import annotations

import functools
import glob
import http.server
import os
import subprocess
import sys
import threading

import pytest
from paths import REPO
from servekit import CHROMIUM

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings")
pytest.importorskip("playwright")
if not os.path.exists(CHROMIUM):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

WIDTH = 1280
# every block of code (its lines, once laid out) whose content is wider than the block shows
CUT_OFF = """() => [...document.querySelectorAll('.md-content pre > code, .md-content .doc-signature')]
    .filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => [e.scrollWidth, e.clientWidth,
               e.textContent.split('\\n').reduce((a, b) => a.length > b.length ? a : b)])"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the built site without a log line per request."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built into a temporary folder, served on a loopback port: (base URL, its pages)."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)], cwd=REPO,
                           capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-3000:]
    assert "Formatting signatures requires" not in built.stderr, built.stderr
    handler = functools.partial(_QuietHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    pages = sorted(os.path.relpath(p, out).removesuffix("index.html") for p in glob.glob(str(out / "**" / "index.html"),
                                                                                     recursive=True))
    yield f"http://127.0.0.1:{server.server_address[1]}/", pages
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_no_line_of_code_is_cut_off_at_1280_px(site, tmp_path):
    from playwright.sync_api import sync_playwright

    base, pages = site
    assert "reference/api/" in pages and "guide/crawl/" in pages, pages
    cut: dict[str, list] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            for name in pages:
                page.goto(base + name)
                page.wait_for_load_state("load")
                assert page.evaluate("() => document.querySelectorAll('.md-content').length") == 1, name
                if found := page.evaluate(CUT_OFF):
                    cut[name] = found
            page.goto(base + "guide/crawl/")
            page.screenshot(path=str(tmp_path / "crawl-1280.png"))
        finally:
            browser.close()
    assert cut == {}, cut
