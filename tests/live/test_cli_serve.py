"""The serve command: a real server on a free loopback port, the refusals before it listens, and
the error of a Python without aiohttp."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

from click.testing import CliRunner
from livecrawl import DONE
from servekit import Served

from diskfrontier.cli import main
from diskfrontier.cli.serve import is_loopback


def get(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=data, headers=headers or {})  # noqa: S310 - http on loopback
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - the test's loopback server
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_a_read_only_dashboard_on_every_interface_serves_the_page_and_refuses_control(jobdir):
    """No token needed to share the figures on a LAN: bound to 0.0.0.0 it serves the page, its JSON and
    /metrics to the names it answers, and refuses every control call, a guessed token or not."""
    with Served(jobdir, "--listen", "0.0.0.0", "--allowed-host", "crawler.lan", "--interval", "0.5") as served:  # noqa: S104
        assert served.url.startswith("http://0.0.0.0:") and served.token is None
        assert served.lines.wait_for("read-only, to every machine that reaches this address", 10)
        port = served.url.rsplit(":", 1)[1].strip("/")
        base = f"http://127.0.0.1:{port}/"
        for host in (None, f"crawler.lan:{port}"):
            headers = {} if host is None else {"Host": host}
            status, page = get(base, headers=headers)
            assert status == 200 and b'<script src="/static/app.js"' in page
            status, body = get(base + "api/stats", headers=headers)
            assert status == 200 and json.loads(body)["control"] is False
            assert json.loads(body)["snapshot"]["stats"]["done"] == DONE
        request = urllib.request.Request(base, headers={"Host": f"crawler.lan:{port}"})
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - the test's own server
            assert "default-src 'self'" in answer.headers["Content-Security-Policy"]
        status, body = get(base + "api/stats", headers={"Host": f"evil.example:{port}"})
        assert status == 421 and b"--allowed-host" in body
        fields = {"pause": {}, "resume": {}, "host": {"host": "h1.example", "action": "block", "seconds": 60},
                  "push": {"urls": "https://seed.example/a"}}
        for verb, args in fields.items():
            for token in ({}, {"X-Diskfrontier-Token": "guessed"}):
                status, body = get(base + f"api/{verb}", data=json.dumps(args).encode(),
                                   headers={"Content-Type": "application/json", **token})
                assert status == 403 and "control is off" in json.loads(body)["error"], (verb, body)
        status, body = get(base + "api/stats?refresh=1")
        hosts = {h["host"]: h for h in json.loads(body)["snapshot"]["hosts"]}
        assert not hosts["h1.example"]["blocked_until"] and json.loads(body)["snapshot"]["paused_since"] is None


def test_loopback_addresses():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LOCALHOST"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com", ""))  # noqa: S104


def test_the_usage_errors_of_the_target(jobdir, tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["serve", "redis://127.0.0.1:1/0"])
    assert result.exit_code == 2 and "--crawl" in result.output
    result = runner.invoke(main, ["serve", jobdir, "--crawl", "news"])
    assert result.exit_code == 2 and "is a job directory" in result.output
    result = runner.invoke(main, ["serve", str(tmp_path)])
    assert result.exit_code == 1 and "not a diskfrontier job directory" in result.output


def test_without_aiohttp_serve_says_what_to_install(jobdir):
    code = ("import sys; sys.modules['aiohttp'] = None\n"
            "from diskfrontier.cli import main\n"
            f"main(['serve', {jobdir!r}])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "pip install 'diskfrontier[serve]'" in result.stderr and "Traceback" not in result.stderr


def test_a_real_server_answers_and_stops_on_sigterm(jobdir):
    with Served(jobdir, "--interval", "0.5") as served:
        assert served.url.startswith("http://127.0.0.1:") and served.token is None
        status, body = get(served.url + "api/stats")
        assert status == 200 and json.loads(body)["snapshot"]["stats"]["done"] == DONE
        status, body = get(served.url + "metrics")
        assert status == 200 and f"diskfrontier_done_total {DONE}.0".encode() in body
        status, body = get(served.url + "api/pause", data=b"")
        assert status == 403
        code, stderr = served.stop()
    assert code == 0 and stderr == ""
    assert "stopped" in "".join(served.lines.seen) or served.lines.wait_for("stopped", 10)


def test_the_interval_and_the_history_kept(jobdir):
    with Served(jobdir, "--interval", "0.3", "--history", "60") as served:
        status, body = get(served.url + "api/stats")
    data = json.loads(body)
    assert status == 200 and data["interval"] == 0.3 and data["keep"] == 60
    result = CliRunner().invoke(main, ["serve", jobdir, "--history", "5"])
    assert result.exit_code == 2 and "--history" in result.output


def test_allow_control_prints_a_token_that_the_server_takes(jobdir):
    with Served(jobdir, "--allow-control") as served:
        assert served.token and len(served.token) >= 30
        assert any(f"#token={served.token}" in line for line in served.lines.seen) or served.lines.wait_for(
            "#token=", 10)
        body = json.dumps({"host": "h1.example", "action": "block", "seconds": 60}).encode()
        status, _ = get(served.url + "api/host", data=body, headers={"Content-Type": "application/json"})
        assert status == 403
        status, answer = get(served.url + "api/host", data=body, headers={
            "Content-Type": "application/json", "X-Diskfrontier-Token": served.token})
        assert status == 200 and json.loads(answer)["host"]["blocked_until"] is not None
    with Served(jobdir, "--allow-control") as other:
        assert other.token != served.token  # a new token each start


def test_a_port_in_use_is_one_line(jobdir):
    with Served(jobdir) as served:
        port = served.url.rsplit(":", 1)[1].strip("/")
        result = subprocess.run([sys.executable, "-m", "diskfrontier", "serve", jobdir, "--port", port],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stderr.startswith("Error: ") and "Traceback" not in result.stderr
