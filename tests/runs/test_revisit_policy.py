"""``Revisit``, the policy that learns each page's interval, checked against a model of its rule: an unchanged
page's interval grows by 1 + inc, a changed one's shrinks by 1 - dec, both kept within min and max, the first
rule that applies giving other bounds; 304, the same ETag or the same signature mean unchanged."""

from __future__ import annotations

import email.utils
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskfrontier import Fetched, Request, Revisit, RevisitRule, RevisitState
from diskfrontier.run.revisit import CHANGED, NEW, UNCHANGED, UNKNOWN, conditional_headers

NOW = 1_800_000_000.0

# each fetch of the model: the page's content version, and how the server answers
fetches = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["body", "etag", "304", "bare"])), min_size=1,
                   max_size=30)
policies = st.builds(Revisit, initial=st.floats(1, 10**6), min=st.floats(1, 1000), max=st.floats(1000, 10**7),
                     inc=st.floats(0, 0.99), dec=st.floats(0, 0.99))


def _answer(version: int, how: str, known: int | None) -> tuple[Fetched, str]:
    """What the server answers to a fetch, and how: a 304 only when the version the crawl knows is current."""
    if how == "304" and known == version:
        return Fetched(304), "304"
    if how == "etag":
        return Fetched(200, etag=f'"v{version}"'), "etag"
    if how == "bare":
        return Fetched(200), "bare"
    return Fetched(200, body=f"content {version}".encode()), "body"


@given(policy=policies, steps=fetches)
def test_the_interval_follows_the_model_of_the_rule(policy, steps):
    request = Request("https://a.example/page")
    interval = None
    known: int | None = None
    known_how: set[str] = set()
    changes = 0
    for n, (version, how) in enumerate(steps):
        fetched, how = _answer(version, how, known)
        verdict, state = policy.after_fetch(request, fetched, NOW + n)
        if interval is None:
            expected_verdict = NEW
            interval = min(max(policy.initial, policy.min), policy.max)
        else:
            if how == "304":
                expected_verdict = UNCHANGED
            elif how in known_how:  # the same kind of validator as the version the crawl knows
                expected_verdict = UNCHANGED if version == known else CHANGED
            else:
                expected_verdict = UNKNOWN
            factor = {CHANGED: 1 - policy.dec, UNCHANGED: 1 + policy.inc, UNKNOWN: 1.0}[expected_verdict]
            interval = min(max(interval * factor, policy.min), policy.max)
        assert verdict == expected_verdict, (n, version, how, known, known_how)
        assert state.interval == pytest.approx(interval)
        assert policy.min <= state.interval <= policy.max
        changes += verdict == CHANGED
        assert (state.visits, state.changes, state.fetched_at) == (n + 1, changes, NOW + n)
        request.revisit = state
        if how != "304":
            known, known_how = version, {how} - {"bare"}


def test_a_changed_page_comes_back_sooner_and_an_unchanged_one_later():
    policy = Revisit(initial=1000, min=10, max=10**6)
    request = Request("https://a.example/")
    _, first = policy.after_fetch(request, Fetched(200, body=b"one"), NOW)
    request.revisit = first
    verdict, changed = policy.after_fetch(request, Fetched(200, body=b"two"), NOW + 1)
    assert verdict == CHANGED and changed.interval == pytest.approx(800) and changed.changed_at == NOW + 1
    request.revisit = changed
    verdict, same = policy.after_fetch(request, Fetched(304), NOW + 2)
    assert verdict == UNCHANGED and same.interval == pytest.approx(1120)
    assert (same.visits, same.changes, same.not_modified) == (3, 1, 1)
    assert same.signature == hashlib.blake2b(b"two", digest_size=16).digest()  # a 304 keeps what the page was


def test_the_validators_are_kept_and_sent_back_as_conditional_headers():
    policy = Revisit()
    request = Request("https://a.example/")
    assert conditional_headers(request) == {}
    _, state = policy.after_fetch(request, Fetched(200, etag='W/"7"', last_modified="Tue, 01 Dec 2026 10:00:00 GMT"),
                                  NOW)
    request.revisit = state
    assert conditional_headers(request) == {"If-None-Match": 'W/"7"',
                                            "If-Modified-Since": "Tue, 01 Dec 2026 10:00:00 GMT"}
    verdict, again = policy.after_fetch(request, Fetched(200, etag='W/"7"', body=b"whatever"), NOW + 5)
    assert verdict == UNCHANGED and again.etag == 'W/"7"'


def test_the_first_rule_that_applies_gives_the_bounds():
    policy = Revisit(initial=86400, min=3600, max=30 * 86400, rules=(
        RevisitRule(match=r"^https://news\.example/$", min=60, max=3600, initial=600),
        RevisitRule(host="news.example", min=86400),
        RevisitRule(match="/archive/", min=7 * 86400, max=60 * 86400),
    ))
    assert policy.bounds(Request("https://news.example/")) == (600, 60, 3600)
    assert policy.bounds(Request("https://news.example/a")) == (86400, 86400, 30 * 86400)
    assert policy.bounds(Request("https://b.example/archive/1")) == (7 * 86400, 7 * 86400, 60 * 86400)
    assert policy.bounds(Request("https://b.example/x")) == (86400, 3600, 30 * 86400)
    _, state = policy.after_fetch(Request("https://news.example/"), Fetched(200, body=b"x"), NOW)
    assert state.interval == 600


def test_failed_revisits_back_off_then_give_up():
    policy = Revisit(initial=100, min=10, max=1000, give_up=3)
    request = Request("https://a.example/")
    assert policy.after_failure(request, NOW) is None  # never fetched: fails as any request does
    request.revisit = RevisitState(400, NOW - 400, signature=b"\x01" * 16)
    first = policy.after_failure(request, NOW)
    assert first is not None and first.interval == 800 and first.failures == 1
    request.revisit = first
    second = policy.after_failure(request, NOW)
    assert second is not None and second.interval == 1000 and second.failures == 2
    request.revisit = second
    assert policy.after_failure(request, NOW) is None
    _, fetched = policy.after_fetch(request, Fetched(200, body=b"back"), NOW)
    assert fetched.failures == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"min": 10, "max": 5}, r"Revisit\.min"), ({"inc": 1.0}, r"Revisit\.inc"), ({"dec": -0.1}, r"Revisit\.dec"),
    ({"initial": -1}, r"Revisit\.initial"), ({"give_up": 0}, r"Revisit\.give_up"),
])
def test_bad_settings_are_refused_naming_them(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Revisit(**kwargs)


def test_bad_rules_and_fetches_are_refused():
    with pytest.raises(ValueError, match="host= or match="):
        RevisitRule(min=5)
    with pytest.raises(ValueError, match="not a regular expression"):
        RevisitRule(match="(")
    with pytest.raises(TypeError, match=r"Revisit\.rules"):
        Revisit(rules=("x",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Fetched\.status"):
        Fetched(42)
    with pytest.raises(TypeError, match=r"Fetched\.body"):
        Fetched(200, body="text")  # type: ignore[arg-type]


def _http_date(when: float) -> str:
    return email.utils.formatdate(when, usegmt=True)


@pytest.mark.parametrize(("modified", "interval"), [
    (NOW + 100 - 30, 30.0),  # a version 30 s old, after the last fetch: its age is the interval
    (NOW + 100 - 95, 80.0),  # 95 s old: more than 1 - dec of the interval, which the rule keeps
    (NOW - 50, 80.0),  # from before the last fetch: not a new version, the server's date is ignored
    (NOW + 200, 80.0),  # after now: a server clock ahead of ours, ignored
    (None, 80.0),
])
def test_a_changed_pages_interval_is_at_most_the_age_of_the_version_fetched(modified, interval):
    policy = Revisit(initial=100, min=10, max=10**6)
    request = Request("https://a.example/")
    _, request.revisit = policy.after_fetch(request, Fetched(200, body=b"one"), NOW)
    last = None if modified is None else _http_date(modified)
    verdict, state = policy.after_fetch(request, Fetched(200, body=b"two", last_modified=last), NOW + 100)
    assert verdict == CHANGED and state.interval == pytest.approx(interval)
    without = Revisit(initial=100, min=10, max=10**6, by_age=False)
    assert without.after_fetch(request, Fetched(200, body=b"two", last_modified=last), NOW + 100)[1].interval == (
        pytest.approx(80.0))


def test_the_age_of_a_version_is_kept_within_the_bounds_and_ignored_when_unchanged_or_unreadable():
    policy = Revisit(initial=100, min=20, max=10**6)
    request = Request("https://a.example/")
    _, request.revisit = policy.after_fetch(request, Fetched(200, body=b"one", etag='"1"'), NOW)
    assert policy.after_fetch(request, Fetched(200, body=b"two", last_modified=_http_date(NOW + 95)),
                              NOW + 100)[1].interval == 20  # 5 s old: held at min
    assert policy.after_fetch(request, Fetched(200, body=b"one", last_modified=_http_date(NOW + 95)),
                              NOW + 100)[1].interval == pytest.approx(140)  # unchanged: the rule alone
    assert policy.after_fetch(request, Fetched(200, body=b"two", last_modified="not a date"),
                              NOW + 100)[1].interval == pytest.approx(80)
    with pytest.raises(TypeError, match="by_age must be True or False"):
        Revisit(by_age="yes")  # type: ignore[arg-type]
