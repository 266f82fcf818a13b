"""The contract on revisits, on every backend: a request's revisit state is stored with it when it is finished
with its next visit (``done(request, refetch_after=...)``), comes back with it, survives a reopen, and is
counted (revisits, changes found, 304s) in ``stats()``."""

from __future__ import annotations

import time

from backends import urls

from diskfrontier import RevisitState


def test_a_revisit_state_comes_back_with_its_request_and_is_counted(frontier_factory):
    now = time.time()
    states = [
        RevisitState(60, now, etag='"a"', signature=b"\x01" * 16),  # a first fetch: not a revisit
        RevisitState(80, now, etag='"b"', visits=2, changes=1, changed_at=now, last_status=200),  # changed
        RevisitState(90, now, visits=3, not_modified=1, last_status=304),  # answered 304
        RevisitState(120, now, visits=4, failures=1),  # a failed revisit: not counted
    ]
    f = frontier_factory()
    f.push_many(urls("r.example", len(states)))
    by_url = {}
    for _ in states:  # each comes back half a second later: popped once here
        request = f.pop()
        assert request is not None and request.revisit is None
        request.revisit = states[int(request.url.rsplit("/", 1)[1])]
        by_url[request.url] = request.revisit
        f.done(request, refetch_after=0.5)
    stats = f.stats()
    assert (stats["revisits"], stats["revisit_changes"], stats["revisit_not_modified"]) == (2, 1, 1)
    f.close()
    f = frontier_factory()
    back: dict[str, RevisitState | None] = {}
    while len(back) < len(states) and (request := f.pop(timeout=60)) is not None:
        back[request.url] = request.revisit
        f.done(request)
    assert back == by_url
