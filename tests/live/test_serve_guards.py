"""What a real ``diskfrontier serve`` answers to hostile requests: a control body read only after
the token and within bounds (a deep or huge one is a 4xx in JSON, never a 500 or a traceback), a
Host that is not one of its names refused on every route (DNS rebinding), and a control request
from another site's page refused (Origin, Sec-Fetch-Site, form bodies)."""

from __future__ import annotations

import http.client
import json
import socket

from click.testing import CliRunner
from servekit import Served

from diskfrontier.cli import main
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
        assert served.token is not None
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


def test_a_host_that_is_not_a_name_of_the_server_is_refused_on_every_route(jobdir):
    with Served(jobdir, "--allow-control") as served:
        port = port_of(served)
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", f"localhost:{port + 1}",
                     f"evil.example:{port}@127.0.0.1", "", f"[::2]:{port}"):
            for method, path in ROUTES:
                status, kind, body = call(served, method, path, b"{}" if method == "POST" else None, {
                    "Content-Type": "application/json", "X-Diskfrontier-Token": served.token}, host=host)
                assert status == 421 and kind.startswith("text/plain"), (host, path, status, body[:200])
                assert b"--allowed-host" in body and b"snapshot" not in body
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}"):
            status, _, body = call(served, "GET", "/api/stats", host=host)
            assert status == 200 and b"snapshot" in body, host
        with socket.create_connection(("127.0.0.1", port), timeout=60) as raw:  # HTTP/1.0: no Host at all
            raw.sendall(b"GET /api/stats HTTP/1.0\r\n\r\n")
            assert raw.makefile("rb").readline().split()[1] == b"421"
        stopped_cleanly(served)


def test_allowed_host_lets_a_name_in(jobdir):
    with Served(jobdir, "--allow-control", "--allowed-host", "crawler.lan", "--allowed-host",
                "forwarded.lan:9000") as served:
        port = port_of(served)
        for host, expected in ((f"crawler.lan:{port}", 200), ("CRAWLER.LAN", 200), ("forwarded.lan:9000", 200),
                               (f"forwarded.lan:{port + 1}", 421), (f"evil.example:{port}", 421)):
            for method, path in ROUTES[:4]:
                status, _, body = call(served, method, path, host=host)
                assert status == expected, (host, path, status, body[:200])
        status, answer = control(served, "/api/host", {"host": "h1.example", "action": "block"},
                                 f"crawler.lan:{port}", Origin=f"http://crawler.lan:{port}")
        assert status == 200 and answer["host"]["blocked_until"] == "forever"
        stopped_cleanly(served)


def test_a_bad_allowed_host_is_a_usage_error(jobdir):
    for value in ("evil example", "a.example:http", "a.example:0", "[not-ipv6]", "http://a.example/"):
        result = CliRunner().invoke(main, ["serve", jobdir, "--allowed-host", value])
        assert result.exit_code == 2 and "--allowed-host" in result.output, (value, result.output)
        assert "not a host name" in result.output or "no valid port" in result.output, result.output


def test_a_control_request_from_another_site_is_refused(jobdir):
    with Served(jobdir, "--allow-control") as served:
        port = port_of(served)
        for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"},
                        {"Origin": f"http://127.0.0.1:{port + 1}"}, {"Origin": f"http://localhost:{port}"},
                        {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
                        {"Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "cross-site"}):
            status, answer = control(served, "/api/host", {"host": "h1.example", "action": "block"}, **headers)
            assert status == 403 and answer["error"].startswith("refused"), (headers, status, answer)
        token = served.token
        assert token is not None
        form = f"host=h1.example&action=block&token={token}".encode()
        multipart = (b"--b\r\nContent-Disposition: form-data; name=\"host\"\r\n\r\nh1.example\r\n--b\r\n"
                     b"Content-Disposition: form-data; name=\"action\"\r\n\r\nblock\r\n--b--\r\n")
        for kind, body in (("application/x-www-form-urlencoded", form), ("multipart/form-data; boundary=b", multipart),
                           ("text/plain;charset=UTF-8", b'{"host": "h1.example", "action": "block"}')):
            for origin in ({}, {"Origin": f"http://127.0.0.1:{port}"}):  # a form is refused whatever its origin
                status, _, raw = call(served, "POST", "/api/host", body, {
                    "Content-Type": kind, "X-Diskfrontier-Token": token, **origin})
                assert status == 403 and b"JSON" in raw, (kind, status, raw[:200])
        assert not blocked(served, "h1.example")
        status, answer = control(served, "/api/host", {"host": "h1.example", "action": "block"},
                                 Origin=f"http://127.0.0.1:{port}", **{"Sec-Fetch-Site": "same-origin"})
        assert status == 200 and answer["host"]["blocked_until"] == "forever"
        assert blocked(served, "h1.example")
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


def test_header_bytes_that_are_not_utf8_are_refused_never_a_500(jobdir):
    with Served(jobdir, "--allow-control") as served:
        assert served.token is not None
        port = port_of(served)
        host = f"127.0.0.1:{port}".encode()
        for name, value, expected in ((b"X-Diskfrontier-Token", b"\xff\xfe\xed", b"403"),
                                      (b"Host", b"\xff.example", b"421"), (b"Origin", b"http://\xff.example", b"403"),
                                      (b"Sec-Fetch-Site", b"\xff", b"403")):
            headers = {b"Host": host, b"X-Diskfrontier-Token": served.token.encode(), name: value}
            lines = b"".join(k + b": " + v + b"\r\n" for k, v in headers.items())
            with socket.create_connection(("127.0.0.1", port), timeout=60) as raw:
                raw.sendall(b"POST /api/pause HTTP/1.1\r\n" + lines + b"Content-Length: 0\r\nConnection: close\r\n\r\n")
                assert raw.makefile("rb").readline().split()[1] == expected, name
        stopped_cleanly(served)
