"""The dashboard in a real headless Chromium (Debian's, /usr/bin/chromium, driven by Playwright):
its figures and charts follow a crawl running in another process, its controls show only with
--allow-control and work with the token, and nothing on it breaks the page's rules (no script
error, no request refused by its content security policy). The browser resolves a few names of
its own to 127.0.0.1, as a DNS rebinding attacker's would: a page opened under such a name gets
nothing, and a page of another site cannot use the controls, even with the token.

Skipped only when Chromium is missing and DISKFRONTIER_REQUIRE_BROWSER is not set (CI sets it).
"""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from livecrawl import publish_status
from paths import KITS
from servekit import CHROMIUM, Lines, Served, script

REQUIRE = bool(os.environ.get("DISKFRONTIER_REQUIRE_BROWSER"))
if not os.path.exists(CHROMIUM) and not REQUIRE:
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; DISKFRONTIER_REQUIRE_BROWSER=1 makes this "
                f"a failure)", allow_module_level=True)

pytestmark = pytest.mark.timeout(600)

CHILD = os.path.join(KITS, "dashboard_crawl_child.py")
INTERVAL = 0.5
EVIL, ATTACKER, LAN = "evil.example", "attacker.example", "crawler.lan"
"""Names that the browser resolves to 127.0.0.1."""


@pytest.fixture(scope="module")
def browser():
    assert os.path.exists(CHROMIUM), f"DISKFRONTIER_REQUIRE_BROWSER is set and there is no Chromium at {CHROMIUM}"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        rules = ",".join(f"MAP {name} 127.0.0.1" for name in (EVIL, ATTACKER, LAN))
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[f"--host-resolver-rules={rules}"])
        yield browser
        browser.close()


class Watched:
    """A page of the browser, with every script error and console error it logs."""

    def __init__(self, browser, url: str) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.problems: list[str] = []
        self.page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        self.page.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}")
                     if m.type in ("error", "warning") else None)
        started = time.monotonic()
        self.page.goto(url)
        self.page.wait_for_function("() => /[0-9]/.test(document.getElementById('v-done').textContent)")
        self.first_figures = time.monotonic() - started  # the page's own time to its first figures

    def number(self, selector: str) -> int:
        return int(self.page.inner_text(selector).replace(",", ""))

    def close(self, *expected: str) -> None:
        """Close the page: it logged no problem but the ``expected`` ones (substrings)."""
        self.page.close()
        assert [p for p in self.problems if not any(e in p for e in expected)] == []


def start_crawl(jobdir: str, *more: str) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, CHILD, jobdir, "--workers", "2", "--page-delay", "0.02", *more],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    Lines(process).wait_for("crawling", 60)
    return process


def stop_crawl(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)  # crawl() finishes the pages in hand and closes the frontier
    try:
        process.wait(120)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def inspect(jobdir: str) -> dict:
    out = subprocess.run([script(), "inspect", jobdir, "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("publish", [False, True], ids=["files", "status.json"])
def test_the_page_follows_a_crawl_running_in_another_process(browser, tmp_path, publish):
    jobdir = str(tmp_path / "job")
    crawl = start_crawl(jobdir, *(["--publish"] if publish else []))
    try:
        with Served(jobdir, "--interval", str(INTERVAL)) as served:
            watched = Watched(browser, served.url)
            page = watched.page
            # A bound from what this machine shows: the page's first figures and the refresh interval.
            patience = 30_000 + 20_000 * (watched.first_figures + INTERVAL)
            origin = "status.json published by the crawl" if publish else "the job directory's files"
            page.wait_for_function("o => document.getElementById('facts').textContent.includes(o)", arg=origin,
                                   timeout=patience)
            page.wait_for_function("() => Number(document.getElementById('chart-done').dataset.points) >= 2",
                                   timeout=patience)
            done = watched.number("#v-done")
            line = page.get_attribute("#chart-done path.line", "d")
            points = int(page.get_attribute("#chart-done", "data-points"))
            page.wait_for_function(f"() => Number(document.getElementById('v-done').textContent.replace(/,/g, '')) "
                                   f"> {done} && Number(document.getElementById('chart-done').dataset.points) "
                                   f"> {points}", timeout=patience)
            assert watched.number("#v-done") > done
            assert page.get_attribute("#chart-done path.line", "d") != line
            assert page.get_attribute("#badge", "data-state") == "running"
            assert page.locator("#hosts tbody tr").count() >= 2
            assert any(c in "123456789" for c in page.inner_text("#v-rate"))
            if publish:
                assert page.inner_text("#v-in_flight") != "n/a"
            page.wait_for_function("() => document.querySelectorAll('#failures tbody tr').length > 0",
                                   timeout=patience)  # every 37th page fails: the crawl gets there
            stop_crawl(crawl)
            page.wait_for_function("() => ['stopped', 'finished'].includes("
                                   "document.getElementById('badge').dataset.state)", timeout=patience)
            final = inspect(jobdir)
            page.wait_for_function(f"() => document.getElementById('v-done').textContent.replace(/,/g, '') === "
                                   f"'{final['done']}'", timeout=patience)
            assert watched.number("#v-failed") == final["failed"] > 0
            assert page.locator("#failures tbody tr").count() == min(20, final["failed"])
            assert "HTTP 500 Internal Server Error" in page.inner_text("#failures")
            assert page.is_hidden("#error")
            watched.close()
    finally:
        stop_crawl(crawl)


def test_the_controls_show_only_with_allow_control(browser, jobdir):
    with Served(jobdir) as served:
        watched = Watched(browser, served.url)
        page = watched.page
        assert page.is_hidden("#run-controls") and page.is_hidden("#control-panel")
        assert page.locator("#hosts button").count() == 0
        assert page.inner_text("#badge-text") == "Not running"
        assert page.inner_text("#v-pending") == "355" and page.locator("#hosts tbody tr").count() == 7
        blocked = page.locator("#hosts tbody tr", has_text="h3.example")
        assert "in 60 min" in blocked.inner_text() or "in 59 min" in blocked.inner_text()
        assert "<b>not markup</b>" in page.inner_text("#failures")  # shown as text, never as markup
        watched.close()


def test_the_controls_work_with_the_token(browser, jobdir):
    with Served(jobdir, "--allow-control", "--interval", str(INTERVAL)) as served:
        anonymous = Watched(browser, served.url)
        assert anonymous.page.is_visible("#token-form")  # no token yet: the page asks for it
        anonymous.close()
        watched = Watched(browser, f"{served.url}#token={served.token}")
        page = watched.page
        assert "token" not in page.url  # taken from the address, then out of it
        assert page.is_visible("#control-panel") and page.is_hidden("#token-form")
        row = page.locator("#hosts tbody tr", has_text="h1.example")
        page.once("dialog", lambda dialog: dialog.accept("600"))
        row.get_by_role("button", name="Block").click()
        page.wait_for_function("() => [...document.querySelectorAll('#hosts tbody tr')].some("
                               "r => r.textContent.includes('h1.example') && r.querySelector('.pill'))")
        pending = watched.number("#v-pending")
        page.fill("#push-urls", "https://seed.example/a\nhttps://seed.example/b")
        page.click("#push-form button[type=submit]")
        page.wait_for_function(f"() => document.getElementById('v-pending').textContent.replace(/,/g, '') === "
                               f"'{pending + 2}'")
        assert "Queued 2" in page.inner_text("#toast")

        assert page.is_visible("#pause")
        watched.close()


def blocked_until(served: Served, host: str) -> object:
    """The host's block as ``serve`` reads it now, asked the way a script asks."""
    with urllib.request.urlopen(f"{served.url}api/stats?refresh=1", timeout=60) as answer:  # noqa: S310 - loopback
        hosts = {h["host"]: h for h in json.load(answer)["snapshot"]["hosts"]}
    return hosts[host]["blocked_until"]


def port_of(served: Served) -> int:
    return int(served.url.rsplit(":", 1)[1].strip("/"))


def test_a_page_under_another_name_gets_nothing(browser, jobdir):
    with Served(jobdir, "--allow-control") as served:
        rebound = browser.new_page()
        for path in ("/", "/api/stats", "/metrics"):
            answer = rebound.goto(f"http://{EVIL}:{port_of(served)}{path}")
            assert answer is not None and answer.status == 421, path
            assert "not a name of this server" in rebound.inner_text("body") and "snapshot" not in rebound.content()
        rebound.close()


def test_a_page_under_an_allowed_name_controls_the_crawl(browser, jobdir):
    with Served(jobdir, "--allow-control", "--allowed-host", LAN, "--interval", str(INTERVAL)) as served:
        port = port_of(served)
        watched = Watched(browser, f"http://{LAN}:{port}/#token={served.token}")
        page = watched.page
        row = page.locator("#hosts tbody tr", has_text="h1.example")
        page.once("dialog", lambda dialog: dialog.accept(""))
        row.get_by_role("button", name="Block").click()
        page.wait_for_function("() => [...document.querySelectorAll('#hosts tbody tr')].some("
                               "r => r.textContent.includes('h1.example') && r.querySelector('.pill'))")
        assert blocked_until(served, "h1.example") == "forever"
        watched.close()


class AttackerPage(http.server.BaseHTTPRequestHandler):
    """Another site's page: a form posting to serve's control endpoint with the token, posted at load."""

    html = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.html)))
        self.end_headers()
        self.wfile.write(self.html)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the signature of http.server
        pass


@pytest.mark.parametrize("name", [ATTACKER, "127.0.0.1"], ids=["cross-site", "same-site"])
def test_a_form_of_another_site_cannot_control_the_crawl(browser, jobdir, name):
    with Served(jobdir, "--allow-control") as served:
        fields = "".join(f'<input name="{k}" value="{v}">' for k, v in
                         (("host", "h1.example"), ("action", "block"), ("token", served.token)))
        AttackerPage.html = (f'<form method="post" action="{served.url}api/host">{fields}</form>'
                             f'<script>document.forms[0].submit()</script>').encode()
        attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), AttackerPage)
        threading.Thread(target=attacker.serve_forever, daemon=True).start()
        try:
            page = browser.new_page()
            with page.expect_response(f"{served.url}api/host") as posted:
                page.goto(f"http://{name}:{attacker.server_address[1]}/")
            answer = posted.value
            assert answer.request.method == "POST" and answer.status == 403
            assert "refused" in answer.json()["error"]
            page.close()
        finally:
            attacker.shutdown()
            attacker.server_close()
        assert not blocked_until(served, "h1.example")


def test_the_revisits_card_shows_what_the_holder_counted(browser, tmp_path):
    """A crawl that revisits publishes its revisits, the changes they found and their 304s; the card shows them,
    and stays hidden for a crawl that does not revisit."""
    from diskfrontier import Frontier, Request, RevisitState

    jobdir = str(tmp_path / "job")
    with Frontier(jobdir) as frontier, Served(jobdir, "--interval", str(INTERVAL)) as served:
        for n in range(6):
            frontier.push(Request(f"https://r.example/{n}"))
        watched = Watched(browser, served.url)
        page = watched.page
        assert page.is_hidden("#card-revisits")
        now = time.time()
        for n in range(6):
            request = frontier.pop()
            assert request is not None
            changed = n < 2
            request.revisit = RevisitState(60, now, visits=3, changes=1, changed_at=now if changed else now - 99,
                                           last_status=200 if changed else 304, not_modified=0 if changed else 1)
            frontier.done(request, refetch_after=60)
        stats = frontier.stats()
        assert (stats["revisits"], stats["revisit_changes"], stats["revisit_not_modified"]) == (6, 2, 4)
        page.wait_for_function("() => !document.getElementById('card-revisits').classList.contains('hidden')",
                               timeout=60_000)
        page.wait_for_function("() => document.getElementById('v-revisits').textContent === '6'", timeout=60_000)
        assert page.inner_text("#s-revisits") == "2 changed, 4 not modified (304)"
        watched.close()


def test_the_hosts_are_the_busiest_by_activity_and_all_are_a_click_away(browser, tmp_path):
    """60 hosts with requests pending, 5 whose requests are all done and a blocked one: the table lists the 50
    busiest by activity (the blocked host first, the finished ones by their done count, not crowded out), and
    "Show all" lists all 66. A directory that nothing changes says idle, not a rate."""
    from diskfrontier import Frontier, Request
    from diskfrontier.contract.snapshot import TOP_HOSTS

    jobdir = str(tmp_path / "job")
    with Frontier(jobdir) as frontier:
        for n in range(5):
            frontier.push_many(Request(f"https://d{n}.example/{k}") for k in range(30 + n))
        frontier.push(Request("https://blocked.example/0"))
        while (request := frontier.pop()) is not None:
            frontier.done(request)
        frontier.push_many(Request(f"https://p{n}.example/{k}") for n in range(60) for k in range(2))
        frontier.block("blocked.example", time.time() + 3600)
        frontier.set_delay("p1.example", 2.5)
    assert TOP_HOSTS == 50
    with Served(jobdir, "--interval", str(INTERVAL)) as served:
        watched = Watched(browser, served.url)
        page = watched.page
        rows = page.locator("#hosts tbody tr")
        assert rows.count() == TOP_HOSTS
        names = [rows.nth(i).locator("td.host").inner_text() for i in range(7)]
        assert names == ["blocked.example", *(f"d{n}.example" for n in reversed(range(5))), names[6]]
        assert names[6].startswith("p")
        assert "busiest 50 of 66" in page.inner_text("#hosts-summary")
        page.click("#hosts-all")
        page.wait_for_function("() => document.querySelectorAll('#hosts tbody tr').length === 66")
        assert "66 hosts" in page.inner_text("#hosts-summary")
        row = page.locator("#hosts tbody tr", has_text="p1.example")
        assert row.locator("td").nth(4).inner_text() == "2.5 s"
        assert page.locator("#hosts tbody tr", has_text="p2.example").locator("td").nth(4).inner_text() == "crawl's"
        page.click("#hosts-all")
        page.wait_for_function(f"() => document.querySelectorAll('#hosts tbody tr').length === {TOP_HOSTS}")
        page.wait_for_function("() => document.getElementById('v-rate').textContent === 'idle'", timeout=60_000)
        assert "over the last" in page.inner_text("#s-rate")
        assert page.inner_text("#v-eta") == "\u2013" and "no rate to go by" in page.inner_text("#s-eta")
        watched.close()


def test_paused_says_paused_and_delays_have_one_source_and_one_format(browser, tmp_path):
    """A paused crawl's "Next ready" says paused (not blocked); the crawl's 5 ms delay reads the same in the
    Crawl panel and for each host that has no delay of its own."""
    from diskfrontier import Frontier, Request

    jobdir = str(tmp_path / "job")
    with Frontier(jobdir, delay=0.005, watch=False) as frontier:  # held here: serve reads the status.json below
        frontier.push_many(Request(f"https://h{n % 3}.example/{n}") for n in range(9))
        frontier.set_delay("h2.example", 2.5)
        frontier.pause()
        publish_status(frontier)
        with Served(jobdir, "--interval", str(INTERVAL)) as served:
            watched = Watched(browser, served.url)
            page = watched.page
            assert page.inner_text("#v-next") == "paused"
            assert page.inner_text("#s-next").startswith("since ")
            assert "Delay\n5 ms between a host's requests" in page.inner_text("#facts")
            delays = {page.locator("#hosts tbody tr").nth(i).locator("td.host").inner_text():
                      page.locator("#hosts tbody tr").nth(i).locator("td").nth(4).inner_text() for i in range(3)}
            assert delays == {"h0.example": "5 ms", "h1.example": "5 ms", "h2.example": "2.5 s"}
            watched.close()


def test_the_new_panels_follow_a_crawl(browser, tmp_path):
    """Against a real crawl in another process: time left at the current rate, the bytes on disk and their
    growth, the retries charted, the failures by kind; of the responses panel only the fetch time, while the
    crawl reports no status or bytes."""
    jobdir = str(tmp_path / "job")
    crawl = start_crawl(jobdir, "--publish")
    try:
        with Served(jobdir, "--interval", str(INTERVAL)) as served:
            watched = Watched(browser, served.url)
            page = watched.page
            patience = 30_000 + 20_000 * (watched.first_figures + INTERVAL)
            page.wait_for_function("() => Number(document.getElementById('chart-disk').dataset.points) >= 3 && "
                                   "Number(document.getElementById('chart-retried').dataset.points) >= 3",
                                   timeout=patience)
            page.wait_for_function("() => document.getElementById('error-kinds').textContent.includes("
                                   "'RuntimeError · HTTP 500')", timeout=patience)
            page.wait_for_function("() => document.getElementById('s-disk').textContent.includes('+')",
                                   timeout=patience)
            assert re.fullmatch(r"[\d.]+ (KiB|MiB)", page.inner_text("#v-disk"))
            assert "journal" in page.inner_text("#s-disk")
            priorities = page.inner_text("#priorities").strip()  # bars of the crawl's priorities, or none left
            assert re.fullmatch(r"(priority -?\d+\n[\d,]+\n?)+|Nothing pending\.", priorities), priorities
            kinds = page.inner_text("#error-kinds").split("\n")
            assert kinds[0] == "RuntimeError · HTTP 500" and int(kinds[1].replace(",", "")) >= 1
            page.wait_for_function("() => /left at [0-9.,]+\\/s/.test(document.getElementById('s-eta').textContent)",
                                   timeout=patience)
            assert re.fullmatch(r"[\d.]+ (s|min|h|days)|less than a second", page.inner_text("#v-eta"))
            assert "over the last" in page.inner_text("#s-rate")
            # crawl() times each handler; this one reports no status or bytes: only the fetch time shows
            page.wait_for_function("() => document.getElementById('response-facts').textContent.includes("
                                   "'Fetch time')", timeout=patience)
            assert page.inner_text("#responses") == "No responses counted yet."
            assert page.is_hidden("#figure-bytes_rate") and page.is_visible("#figure-latency")
            watched.close()
    finally:
        stop_crawl(crawl)


def test_the_responses_panel_shows_the_outcome_counters_a_crawl_keeps(browser, tmp_path):
    """A crawl whose runner counts its responses (status classes, bytes, fetch time) has them shown: bars by
    status class, the bytes received and a chart of them a second, the average fetch time."""
    from diskfrontier import Frontier, Request

    jobdir = str(tmp_path / "job")
    counters = {"responses_2xx": 90, "responses_3xx": 4, "responses_4xx": 5, "responses_5xx": 1,
                "received_bytes": 3 << 20, "fetch_seconds_sum": 25.0, "fetch_seconds_count": 100}
    with Frontier(jobdir, watch=False) as frontier:  # the test publishes its status.json, no one else
        frontier.push(Request("https://a.example/"))
        shot = publish_status(frontier)
        with Served(jobdir, "--interval", str(INTERVAL)) as served:
            watched = Watched(browser, served.url)
            page = watched.page
            assert page.is_hidden("#responses-panel")  # every counter at 0: nothing counted yet
            for step in (1, 2, 3):
                time.sleep(INTERVAL * 2)
                publish_status(frontier, taken=time.time(),
                               stats={**shot["stats"], **{k: v * step for k, v in counters.items()}})
            page.wait_for_function("() => document.getElementById('responses-summary').textContent === "
                                   "'300 responses'", timeout=60_000)  # the last one published
            page.wait_for_function("() => Number(document.getElementById('chart-bytes_rate').dataset.points) >= 1",
                                   timeout=60_000)
            bars = page.inner_text("#responses")
            assert "2xx\n270" in bars and "5xx\n3" in bars
            facts = page.inner_text("#response-facts")
            assert "Received\n9 MiB" in facts and "Fetch time\n250 ms average" in facts
            assert page.is_visible("#figure-latency")
            watched.close()


def test_the_log_panel_shows_the_end_of_the_crawls_log(browser, tmp_path):
    """serve --log FILE: the page shows the last lines of the crawl's log as it grows, as text; without --log
    there is no log panel."""
    jobdir = str(tmp_path / "job")
    log = tmp_path / "crawl.log"
    with open(log, "a") as out:  # appended to, as the test appends a line of its own
        process = subprocess.Popen([sys.executable, CHILD, jobdir, "--workers", "2", "--page-delay", "0.02"],
                                   stdout=subprocess.PIPE, stderr=out, text=True)
    try:
        Lines(process).wait_for("crawling", 60)
        with Served(jobdir, "--log", str(log), "--interval", str(INTERVAL)) as served:
            watched = Watched(browser, served.url)
            page = watched.page
            patience = 30_000 + 20_000 * (watched.first_figures + INTERVAL)
            page.wait_for_function("() => document.getElementById('log-tail').textContent.includes("
                                   "'RuntimeError: HTTP 500')", timeout=patience)  # every 37th page fails
            with open(log, "a") as out:
                out.write("a line with <b>markup</b> in it\n")
            page.wait_for_function("() => document.getElementById('log-tail').textContent.includes("
                                   "'<b>markup</b>')", timeout=patience)
            assert page.locator("#log-tail b").count() == 0  # shown as text
            assert str(log) in page.inner_text("#log-summary")
            watched.close()
        with Served(jobdir, "--interval", str(INTERVAL)) as served:
            watched = Watched(browser, served.url)
            assert watched.page.is_hidden("#log-panel")
            watched.close()
    finally:
        stop_crawl(process)
