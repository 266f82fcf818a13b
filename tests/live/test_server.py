"""The HTTP endpoints of serve, through aiohttp's test client: the page and its files, /api/stats,
/metrics, and the control endpoints (403 without the token in its header, 200 with it, through its
inbox while a crawl holds the job directory; hostile field values a 400, never a 500)."""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

import pytest
from livecrawl import DONE, FAILED, PUSHED
from prometheus_client.parser import text_string_to_metric_families
from servekit import with_client
from sharedlive import push_block_pause

from diskfrontier import Frontier, RedisFrontier, Request
from diskfrontier.live.control import ControlError, apply_control
from diskfrontier.live.dashboard import Dashboard
from diskfrontier.live.server import TOKEN_HEADER, DashboardServer, static_file
from diskfrontier.live.sources import open_source

TOKEN = "t0ken-for-the-tests"  # noqa: S105 - the tests' own token
PAYLOAD_KEYS = {"name", "snapshot", "origin", "holder", "note", "read_seconds", "state", "state_label", "rate", "now",
                "checked", "age", "error", "interval", "keep", "control", "actions", "history", "rate_seconds",
                "rate_window", "idle", "error_kinds", "disk_bytes", "log"}


def server_of(target, crawl=None, token=None, interval=0.2):
    def make():
        dashboard = Dashboard(open_source(target, crawl), interval=interval)
        return DashboardServer(dashboard, target=target, crawl=crawl, token=token).app()

    return make


def test_the_page_its_files_and_the_json(jobdir):
    async def check(client):
        page = await client.get("/")
        html = await page.text()
        assert page.status == 200 and page.content_type == "text/html"
        assert "/static/app.js" in html and "/static/style.css" in html
        assert re.findall(r'(?:src|href)="(?!/static/)', html) == []  # nothing loaded from elsewhere
        assert "default-src 'self'" in page.headers["Content-Security-Policy"]
        for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css"), ("favicon.svg", "image/svg+xml")):
            answer = await client.get(f"/static/{name}")
            assert answer.status == 200 and answer.content_type == kind and await answer.read() == static_file(name)
        assert (await client.get("/static/../server.py")).status == 404
        assert (await client.get("/static/nothing.js")).status == 404
        stats = await client.get("/api/stats")
        data = await stats.json()
        assert stats.status == 200 and set(data) == PAYLOAD_KEYS
        assert data["origin"] == "files" and data["state"] == "stopped" and data["control"] is False
        assert data["snapshot"]["stats"]["done"] == DONE and data["history"][-1]["done"] == DONE
        assert data["snapshot"]["hosts"][0]["host"].endswith(".example")
        again = await (await client.get("/api/stats", params={"refresh": "1", "since": str(data["history"][-1]["t"])}))\
            .json()
        assert len(again["history"]) == 1 and again["history"][0]["t"] > data["history"][-1]["t"]
        assert (await client.get("/api/stats", params={"since": "soon"})).status == 400
        return data

    with_client(server_of(jobdir), check)


def test_every_host_and_the_error_kinds_and_disk_bytes_of_a_job_directory(jobdir):
    """/api/hosts lists every host, the busiest first (the blocked one at the top); /api/stats groups the
    failures by kind and gives the directory's bytes on disk, which a history point keeps."""
    files = sum(os.path.getsize(os.path.join(folder, name)) for folder, _, names in os.walk(jobdir) for name in names)

    async def check(client):
        answer = await client.get("/api/hosts")
        hosts = await answer.json()
        assert answer.status == 200 and hosts["total"] == 7 and len(hosts["hosts"]) == 7
        names = [h["host"] for h in hosts["hosts"]]
        assert names[0] == "h3.example" and sorted(names) == [f"h{i}.example" for i in range(7)]
        busy = [h["pending"] + h["done"] for h in hosts["hosts"][1:]]
        assert busy == sorted(busy, reverse=True)
        assert {h["host"]: h["delay"] for h in hosts["hosts"]}["h2.example"] == 2.5
        data = await (await client.get("/api/stats")).json()
        assert data["error_kinds"] == {"HTTP 500": FAILED}
        assert data["disk_bytes"] == files and data["history"][-1]["disk_bytes"] == files
        assert data["rate_window"] == 60.0
        return data

    with_client(server_of(jobdir), check)


def test_the_log_tail_with_log_and_without(jobdir, tmp_path):
    """/api/log sends the last lines of the file given to --log (the end of a large one only, without the line
    cut by where the read began), says what to do when the file cannot be read, and 404 without --log."""
    from diskfrontier.live.logtail import TAIL_BYTES, TAIL_LINES

    log = tmp_path / "crawl.log"
    lines = [f"line {n} " + "x" * 90 for n in range(2000)]  # about 200 KB: more than is read
    log.write_text("\n".join(lines) + "\n")

    def make(path):
        def app():
            dashboard = Dashboard(open_source(jobdir, None), interval=0.2)
            return DashboardServer(dashboard, target=jobdir, crawl=None, log=path).app()
        return app

    async def check(client):
        answer = await client.get("/api/log")
        data = await answer.json()
        assert answer.status == 200 and data["size"] == log.stat().st_size and data["path"] == str(log)
        assert data["lines"] == lines[-TAIL_LINES:] and TAIL_LINES * 100 < TAIL_BYTES
        assert (await (await client.get("/api/stats")).json())["log"] == str(log)
        log.write_text("one\ntwo <b>bold</b>\n")
        assert (await (await client.get("/api/log")).json())["lines"] == ["one", "two <b>bold</b>"]
        log.unlink()
        answer = await client.get("/api/log")
        assert answer.status == 503 and "--log" in (await answer.json())["error"]

    async def without(client):
        answer = await client.get("/api/log")
        assert answer.status == 404 and "--log FILE" in (await answer.json())["error"]
        assert (await (await client.get("/api/stats")).json())["log"] is None

    with_client(make(str(log)), check)
    with_client(make(None), without)


def test_a_short_log_is_sent_whole_and_a_long_one_cut_at_a_line(tmp_path):
    from diskfrontier.live.logtail import tail_lines

    log = tmp_path / "crawl.log"
    log.write_bytes(b"first\nsecond \xff\n")
    assert tail_lines(str(log)) == (["first", "second \ufffd"], 15)
    log.write_bytes(b"abcdef\nghij\nkl")
    assert tail_lines(str(log), limit=8) == (["ghij", "kl"], 14)  # "ef" began before the bytes read
    assert tail_lines(str(log), lines=1) == (["kl"], 14)


def test_the_page_forever_blocked_host_is_valid_json(jobdir):
    with Frontier(jobdir) as frontier:
        frontier.block("h4.example", float("inf"))

    async def check(client):
        text = await (await client.get("/api/stats")).text()
        assert "Infinity" not in text
        hosts = {h["host"]: h for h in (await (await client.get("/api/stats")).json())["snapshot"]["hosts"]}
        assert hosts["h4.example"]["blocked_until"] == "forever"

    with_client(server_of(jobdir), check)


def test_metrics_endpoint(jobdir):
    async def check(client):
        answer = await client.get("/metrics")
        assert answer.status == 200 and answer.headers["Content-Type"].startswith("text/plain")
        return await answer.text()

    text = with_client(server_of(jobdir), check)
    values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}
    assert values["diskfrontier_pending"] == PUSHED - DONE - FAILED and values["diskfrontier_done_total"] == DONE


def test_control_is_refused_without_allow_control(jobdir):
    async def check(client):
        for verb in ("pause", "resume", "host", "push"):
            answer = await client.post(f"/api/{verb}", json={"host": "h1.example", "action": "block"},
                                       headers={TOKEN_HEADER: TOKEN})
            assert answer.status == 403 and "--allow-control" in (await answer.json())["error"]
        assert (await (await client.get("/api/stats")).json())["control"] is False

    with_client(server_of(jobdir), check)


def test_control_needs_the_token_and_changes_the_crawl(jobdir):
    async def check(client):
        payload = await (await client.get("/api/stats")).json()
        assert payload["control"] is True and {"block", "unblock", "delay", "push"} <= set(payload["actions"])
        assert "pause" in payload["actions"]
        body: dict[str, Any]
        for headers, body in (({}, {}), ({TOKEN_HEADER: "wrong"}, {}), ({}, {"token": "wrong"}),
                              ({}, {"token": TOKEN})):  # the header only: the body is not read before it
            answer = await client.post("/api/host", json={"host": "h1.example", "action": "block", **body},
                                       headers=headers)
            assert answer.status == 403 and TOKEN_HEADER in (await answer.json())["error"]
        answer = await client.post("/api/host", json={"host": "h1.example", "action": "block", "seconds": 600},
                                   headers={TOKEN_HEADER: TOKEN})
        body = await answer.json()
        assert answer.status == 200 and body["host"]["blocked_until"] > time.time() + 500
        answer = await client.post("/api/host", json={"host": "h3.example", "action": "unblock"},
                                   headers={TOKEN_HEADER: TOKEN})
        assert answer.status == 200 and (await answer.json())["host"]["blocked_until"] in (None, 0, 0.0)
        answer = await client.post("/api/host", json={"host": "h5.example", "action": "delay", "seconds": "4",
                                                      "token": TOKEN}, headers={TOKEN_HEADER: TOKEN})
        assert answer.status == 200 and (await answer.json())["host"]["delay"] == 4
        answer = await client.post("/api/push", json={"urls": "https://new.example/a\nhttps://new.example/b\n"
                                                              "https://h1.example/p1", "priority": 3},
                                   headers={TOKEN_HEADER: TOKEN})
        assert answer.status == 200 and (await answer.json()) == {"ok": True, "action": "push", "queued": 2,
                                                                  "duplicates": 1}
        for verb, body, status in (("host", {"host": "h1.example", "action": "explode"}, 400),
                                   ("host", {"action": "block"}, 400),
                                   ("host", {"host": "h1.example", "action": "block", "seconds": "-1"}, 400),
                                   ("push", {"urls": []}, 400),
                                   ("push", {"urls": ["not a url"]}, 400),
                                   ("pause", {}, 200), ("resume", {}, 200)):
            answer = await client.post(f"/api/{verb}", json=body, headers={TOKEN_HEADER: TOKEN})
            assert answer.status == status, (verb, body, await answer.text())
        refreshed = await (await client.get("/api/stats", params={"refresh": "1"})).json()
        hosts = {h["host"]: h for h in refreshed["snapshot"]["hosts"]}
        assert refreshed["snapshot"]["stats"]["pending"] == PUSHED - DONE - FAILED + 2
        assert hosts["h1.example"]["blocked_until"] > time.time() and not hosts["h3.example"]["blocked_until"]

    with_client(server_of(jobdir, token=TOKEN), check)


def test_control_of_a_held_job_directory_goes_through_its_inbox(jobdir):
    async def check(client):
        answers = []
        for verb, body in (("host", {"host": "h1.example", "action": "block", "seconds": "600"}),
                           ("pause", {}), ("push", {"urls": ["https://inbox.example/1"]})):
            answer = await client.post(f"/api/{verb}", json=body, headers={TOKEN_HEADER: TOKEN})
            answers.append((answer.status, await answer.json()))
        return answers

    with Frontier(jobdir) as held:  # its watcher thread applies the commands
        answers = with_client(server_of(jobdir, token=TOKEN), check)
        assert [status for status, _ in answers] == [200, 200, 200], answers
        assert all(body["applied_by"] == os.getpid() for _, body in answers)
        assert answers[2][1]["queued"] == 1
        assert held.paused_since is not None
        info = held.host("h1.example")
        assert info is not None and info.blocked_until is not None and info.blocked_until > time.time() + 500


def test_control_of_a_redis_crawl(redis_url, crawl_name):
    with RedisFrontier(redis_url, crawl=crawl_name) as frontier:
        frontier.push(Request("https://a.example/"))

    async def check(client):
        data = await push_block_pause(client, TOKEN, "https://a.example/")
        assert data["origin"] == "redis" and data["snapshot"]["stats"]["pending"] == 2

    with_client(server_of(redis_url, crawl_name, token=TOKEN), check)


def test_apply_control_refuses_a_folder_that_is_no_job_directory(tmp_path):
    with pytest.raises(ControlError) as caught:
        apply_control(str(tmp_path), None, "push", {"urls": ["https://a.example/"]})
    assert caught.value.status == 404 and os.listdir(tmp_path) == []
    with pytest.raises(ControlError) as caught:
        apply_control(str(tmp_path), None, "dance", {})
    assert caught.value.status == 400


def test_hostile_field_values_are_a_400_never_a_500(jobdir):
    odd = [None, True, -1, 10**400, 1e308, float("inf"), float("nan"), "", "x" * 5000, [], {}, ["a"], {"a": 1}]
    fields = {"host": ["action", "host", "seconds"], "push": ["urls", "priority"], "pause": ["anything"]}

    async def check(client):
        statuses = set()
        for verb, names in fields.items():
            for name in names:
                for value in odd:
                    body = {"host": "h1.example", "action": "delay", "urls": ["https://odd.example/"], name: value}
                    answer = await client.post(f"/api/{verb}", headers={TOKEN_HEADER: TOKEN, "Content-Type":
                                               "application/json"}, data=json.dumps(body).encode())
                    assert answer.status in (200, 400), (verb, name, value, answer.status, await answer.text())
                    assert "error" in (await answer.json()) or answer.status == 200
                    statuses.add(answer.status)
        return statuses

    assert with_client(server_of(jobdir, token=TOKEN), check) == {200, 400}
