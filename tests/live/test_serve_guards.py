"""What a real ``diskfrontier serve`` answers to hostile requests: a control body read only after
the token and within bounds (a deep or huge one is a 4xx in JSON, never a 500 or a traceback)."""

from __future__ import annotations

import http.client
import json

from servekit import Served

from diskfrontier.live.server import MAX_BODY

DEEP = b"[" * 100_000 + b"]" * 100_000
ROUTES = [("GET", "/"), ("GET", "/static/app.js"), ("GET", "/api/stats"), ("GET", "/metrics"),
          ("GET", "/nothing"), ("POST", "/api/pause"), ("POST", "/api/host")]


def port_of(served: Served) -> int:
    return int(served.url.rsplit(":", 1)[1].strip("/"))


def call(served: Served, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
         *, host: str | None = None) -> tuple[int, str, bytes]:
    """``method path`` sent to ``served`` with ``headers`` and Host ``host`` (None: the one of its URL):
    the status, the content type and the body of the answer."""
    connection = http.client.HTTPConnection("127.0.0.1", port_of(served), timeout=60)
    try:
        connection.putrequest(method, path, skip_host=host is not None, skip_accept_encoding=True)
        if host is not None:
            connection.putheader("Host", host)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        answer = connection.getresponse()
        return answer.status, answer.getheader("Content-Type", ""), answer.read()
    finally:
        connection.close()


def control(served: Served, path: str, fields: dict, host: str | None = None, **headers: str) -> tuple[int, dict]:
    """A JSON control request with the token and ``headers``: the status and the JSON answer."""
    sent = {"Content-Type": "application/json", "X-Diskfrontier-Token": served.token or "", **headers}
    status, kind, body = call(served, "POST", path, json.dumps(fields).encode(), sent, host=host)
    assert kind.startswith("application/json"), (status, kind, body[:200])
    return status, json.loads(body)


def blocked(served: Served, host: str) -> bool:
    status, _, body = call(served, "GET", "/api/stats?refresh=1")
    assert status == 200
    hosts = {h["host"]: h for h in json.loads(body)["snapshot"]["hosts"]}
    return bool(hosts[host]["blocked_until"])


def stopped_cleanly(served: Served) -> None:
    code, stderr = served.stop()
    assert code == 0 and stderr == "", stderr[-3000:]


def test_a_deep_body_without_the_token_is_refused_before_it_is_read(jobdir):
    with Served(jobdir, "--allow-control") as served:
        for token in ({}, {"X-Diskfrontier-Token": "wrong"}):
            status, kind, body = call(served, "POST", "/api/push", DEEP, {"Content-Type": "application/json", **token})
            assert (status, kind) == (403, "application/json; charset=utf-8"), (status, body[:200])
            assert "X-Diskfrontier-Token" in json.loads(body)["error"]
        stopped_cleanly(served)


def test_a_bad_body_with_the_token_is_a_400_in_json(jobdir):
    with Served(jobdir, "--allow-control") as served:
        for body, expected in ((DEEP, "nest more than"), (b'{"urls": [[[[["x"]]]]]}', "nest more than"),
                               (b'{"urls": ', "not JSON"), (b'["https://a.example/"]', "JSON object"),
                               (b'{"urls": "\xff\xfe"}', "refused"), (b'{"priority": 1e999, "urls": ["https://a.example/"]}',
                                                                     "not a whole number")):
            status, kind, answer = call(served, "POST", "/api/push", body, {
                "Content-Type": "application/json", "X-Diskfrontier-Token": served.token})
            assert (status, kind) == (400, "application/json; charset=utf-8"), (body[:40], status, answer[:300])
            assert expected in json.loads(answer)["error"] and json.loads(answer)["ok"] is False
        stopped_cleanly(served)


def test_a_huge_body_is_a_413_in_json_sent_or_chunked(jobdir):
    urls = json.dumps({"urls": ["https://a.example/" + "x" * 1000] * (MAX_BODY // 1000)}).encode()
    assert len(urls) > MAX_BODY
    with Served(jobdir, "--allow-control") as served:
        status, kind, answer = call(served, "POST", "/api/push", urls, {
            "Content-Type": "application/json", "X-Diskfrontier-Token": served.token})
        assert (status, kind) == (413, "application/json; charset=utf-8"), (status, answer[:300])
        assert f"{MAX_BODY:,} bytes" in json.loads(answer)["error"]
        # without a Content-Length: the body read stops at the bound
        connection = http.client.HTTPConnection("127.0.0.1", port_of(served), timeout=60)
        connection.request("POST", "/api/push", body=iter([urls[i:i + 65536] for i in range(0, len(urls), 65536)]),
                           headers={"Content-Type": "application/json", "X-Diskfrontier-Token": served.token},
                           encode_chunked=True)
        answer_of_chunks = connection.getresponse()
        assert answer_of_chunks.status == 413 and "bytes" in json.loads(answer_of_chunks.read())["error"]
        connection.close()
        stopped_cleanly(served)


def test_a_body_that_is_not_json_is_a_415(jobdir):
    with Served(jobdir, "--allow-control") as served:
        for kind in ({"Content-Type": "application/octet-stream"}, {"Content-Type": "application/xml"}, {}):
            status, _, answer = call(served, "POST", "/api/pause", b"<pause/>", {
                "X-Diskfrontier-Token": served.token, **kind})
            assert status == 415 and "application/json" in json.loads(answer)["error"], (kind, status, answer)
        status, _, answer = call(served, "POST", "/api/pause", b"", {"X-Diskfrontier-Token": served.token})
        assert status == 200 and json.loads(answer) == {"ok": True, "action": "pause"}  # no body: no fields
        stopped_cleanly(served)
