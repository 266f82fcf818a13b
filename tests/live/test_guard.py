"""The rules of ``live/guard.py``: which Host names a ``serve`` answers to, and which control
requests may come from another site's page."""

from __future__ import annotations

import pytest

from diskfrontier.live.guard import HostCheck, bound_name, cross_site_refusal, same_origin, split_host

PORT = 8470


@pytest.mark.parametrize(("value", "expected"), [
    ("127.0.0.1:8470", ("127.0.0.1", 8470)), ("LocalHost", ("localhost", None)), ("localhost.:80", ("localhost", 80)),
    ("[::1]:8470", ("::1", 8470)), ("[0:0:0:0:0:0:0:1]", ("::1", None)), ("crawler-1.lan", ("crawler-1.lan", None)),
    (" a.example:65535 ", ("a.example", 65535)),
])
def test_split_host(value, expected):
    assert split_host(value) == expected


@pytest.mark.parametrize("value", ["", ":8470", "a.example:", "a.example:0", "a.example:65536", "a.example:80:80",
                                   "::1", "[::1", "[a.example]:80", "a b", "a.example/x", "user@a.example",
                                   "-a.example", "a..example", "a.example:\uff18\uff10", "a.example:+80"])
def test_split_host_refuses(value):
    with pytest.raises(ValueError, match=r"host name|port"):
        split_host(value)


def test_the_name_of_the_address_bound():
    assert [bound_name(b) for b in ("127.0.0.1", "::1", "[::1]", "192.168.1.10", "crawler.lan", "0.0.0.0", "::", "")] \
        == ["127.0.0.1", "::1", "::1", "192.168.1.10", "crawler.lan", None, None, None]  # noqa: S104


def test_the_loopback_names_at_the_port_served():
    check = HostCheck("127.0.0.1")
    host: str | None
    for host in ("127.0.0.1:8470", "localhost:8470", "[::1]:8470", "LOCALHOST.:8470", "localhost"):
        assert check.allows(host, PORT), host
    for host in (None, "", "evil.example:8470", "localhost:8471", "127.0.0.2:8470", "[::2]:8470", "localhost.evil:8470",
                 "127.0.0.1.evil.example:8470", "evil.example"):
        assert not check.allows(host, PORT), host


def test_the_address_bound_and_the_names_allowed():
    check = HostCheck("192.168.1.10", ["crawler.lan", "Forwarded.lan:9000"])
    for host in ("192.168.1.10:8470", "crawler.lan:8470", "crawler.lan", "forwarded.lan:9000", "forwarded.lan"):
        assert check.allows(host, PORT), host
    for host in ("forwarded.lan:8470", "crawler.lan:9000", "192.168.1.11:8470", "other.lan:8470"):
        assert not check.allows(host, PORT), host
    everywhere = HostCheck("0.0.0.0")  # noqa: S104
    assert not everywhere.allows("0.0.0.0:8470", PORT)
    assert everywhere.names == HostCheck("127.0.0.1").names


def test_the_address_the_connection_arrived_on():
    check = HostCheck("0.0.0.0")  # noqa: S104
    assert check.allows("192.168.1.10:8470", PORT, "192.168.1.10")
    assert check.allows("192.168.1.10:8470", PORT, "::ffff:192.168.1.10")  # a dual-stack socket's view of it
    assert check.allows("[fe80::1]:8470", PORT, "fe80::1%eth0")
    assert not check.allows("192.168.1.10:8470", PORT, "192.168.1.11")
    assert not check.allows("192.168.1.10:8471", PORT, "192.168.1.10")
    assert not check.allows("crawler.lan:8470", PORT, "192.168.1.10")  # a name is never taken from the socket


def test_the_refusal_says_what_is_answered_and_what_to_do():
    text = HostCheck("127.0.0.1", ["crawler.lan"]).refusal("evil.example:8470", PORT)
    assert "'evil.example:8470'" in text and "127.0.0.1, [::1], crawler.lan, localhost at port 8470" in text
    assert "--allowed-host NAME" in text
    assert "no Host header" in HostCheck().refusal(None, PORT)


def test_same_origin():
    assert same_origin("http://127.0.0.1:8470", "127.0.0.1:8470")
    assert same_origin("http://LOCALHOST:8470", "localhost:8470")
    assert same_origin("http://crawler.lan", "crawler.lan:80") and same_origin("http://crawler.lan:80", "crawler.lan")
    assert same_origin("https://dash.example", "dash.example")  # behind a proxy that keeps the Host
    for origin in ("null", "http://127.0.0.1:8471", "http://localhost:8470", "https://127.0.0.1",
                   "file://", "ftp://127.0.0.1:8470", "http://127.0.0.1:8470.evil.example", ""):
        assert not same_origin(origin, "127.0.0.1:8470"), origin


def test_cross_site_refusal():
    host = "127.0.0.1:8470"
    assert cross_site_refusal({}, host) is None  # a script: no Origin, no Sec-Fetch-Site
    assert cross_site_refusal({"Origin": "http://127.0.0.1:8470", "Sec-Fetch-Site": "same-origin",
                               "Content-Type": "application/json"}, host) is None
    assert cross_site_refusal({"Sec-Fetch-Site": "none", "Content-Type": "application/json; charset=utf-8"}, host) \
        is None
    for headers, words in (({"Sec-Fetch-Site": "cross-site"}, "another site"),
                           ({"Sec-Fetch-Site": "same-site"}, "another site"),
                           ({"Origin": "http://evil.example"}, "'http://evil.example'"),
                           ({"Content-Type": "application/x-www-form-urlencoded"}, "JSON"),
                           ({"Content-Type": "Multipart/Form-Data; boundary=x"}, "JSON"),
                           ({"Content-Type": "text/plain;charset=UTF-8"}, "JSON")):
        refusal = cross_site_refusal(headers, host)
        assert refusal is not None and refusal.startswith("refused") and words in refusal, headers
