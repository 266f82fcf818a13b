"""``drop``: removing pending requests of a job directory by host or by URL, as DROP records.

The pending requests are found by one scan of the journal (those in flight left out),
their DROP records are written in one write, and the queues, delayed requests and host
counts are then rebuilt from the journal as an open after a crash rebuilds them, keeping
what is in flight, the memory-only requests and each host's last hand-out time. So a drop
costs a scan of the journal (about a second per million records), and a crash at any
point leaves each request either pending or dropped, as its DROP record says.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from ..contract.values import Dropped
from ..request.model import Request
from . import records
from .records import FRAME
from .replay import read_state

if TYPE_CHECKING:
    from .dispatch import Dispatch
    from .opening import Opening
    from .shared import Shared


def matching(st: Shared, host: str | None, pattern: re.Pattern[str] | None) -> list[tuple[int, int, int, str]]:
    """(offset, priority, record size, URL) of each pending request on disk of ``host`` or whose URL
    ``pattern`` finds, in journal order (requests in flight and kept in memory only are not pending here)."""
    inflight = tuple(seq for seq in st.inflight if seq >= 0)
    state = read_state(st.layout.journal, salt=st.salt, hosts=True, prefix=(st.floor, st.floor_crc)
                       if st.floor_crc is not None else None, exclude=inflight)
    names, host_ids, priorities, codes = state.host_names, state.host_ids, state.priorities, state.codes
    wanted = None if host is None else host.encode()
    journal = st.journal
    out = []
    for i, (offset, alive) in enumerate(zip(state.order, state.alive_in_order(), strict=True)):
        if not alive:
            continue
        if wanted is not None and names[host_ids[i]] != wanted:
            continue
        body = journal.read_body(offset)
        url = records.request_of(body).url
        if pattern is not None and pattern.search(url) is None:
            continue
        out.append((offset, priorities[codes[i]], FRAME.size + len(body), url))
    return out


def drop(st: Shared, opening: Opening, dispatch: Dispatch, host: str | None, pattern: re.Pattern[str] | None,
         dry_run: bool, show: int) -> Dropped:
    """``Frontier.drop`` once its arguments are checked (the frontier's lock is held)."""
    found = matching(st, host, pattern)
    result = Dropped(len(found), [url for *_, url in found[:show]])
    if dry_run or not found:
        return result
    journal = st.journal
    data, offsets = records.frame_all(journal.size, [records.drop_body(offset) for offset, *_ in found], st.salt)
    journal.write(data)
    try:
        st.last_record = offsets[-1]
        st.counters["dropped"] += len(found)
        relist(st, opening, dispatch)
    except BaseException as exc:
        st.interrupted("drop", exc)
        raise
    return result


def relist(st: Shared, opening: Opening, dispatch: Dispatch) -> None:
    """Rebuild the queues, delayed requests and hosts from the journal, keeping what is in flight,
    the memory-only requests and when each host last handed out a request."""
    kept_counters = dict(st.counters)
    recovery = st.recovery
    old = st.hosts.counts
    last = {old.name_bytes(hid): old.last[hid] for hid in old.ids() if old.last[hid]}
    memory: list[Request] = []
    while (request := st.memq.pop()) is not None:
        memory.append(request)
    st.queues.close()
    opening.rebuild("a drop", None, exclude=tuple(seq for seq in st.inflight if seq >= 0))
    st.counters.update(kept_counters)
    st.recovery = recovery
    hosts = st.hosts
    counts = hosts.counts
    for name, at in last.items():
        counts.last[counts.add(name)] = at
    for request in reversed(memory):
        st.memq.push(request, -request.priority)
        st.count_pending(request.priority, 1)
        counts.pending[hosts.hid(request.slot)] += 1
    for request in st.inflight.values():
        hid = request._hid = hosts.hid(request.slot)
        counts.pending[hid] += 1  # handed_out counts it out of the pending ones again
        hosts.handed_out(hid, counts.last[hid] or time.time())
    hosts.active = hosts.active or bool(hosts.hot)
    st.delayed_due = st.delayed.next_due()
    dispatch.forget_reads()
