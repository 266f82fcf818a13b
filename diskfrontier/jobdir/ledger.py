"""``Ledger``: every write to the journal, and the bookkeeping that follows it.

PUSH (one request, or a group in one write), RETRY, REFETCH, DONE, FAIL and HOST
records are framed here with the directory's salt (the stored request through
``records.py``), appended in one ``write`` each, and then the seen file, the queues or
the delayed requests, the host counts, the pending counts and the record counts are
brought up to date. A write that fails is cut back by the journal and changes nothing;
an exception after it marks the shared state dirty (``Shared.interrupted``), so the
close leaves a rebuild to the next open. Requests that cannot be stored are kept in the
memory queue here too. The caller (the façade) holds the lock, has checked that the
frontier is open, and wakes waiting ``pop`` calls after a change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from ..contract.checks import MAX_ATTEMPTS, check_attempts, check_time
from ..contract.values import FailedRequest
from ..core.errors import FrontierError, NotInFlight
from ..politeness.schedule import Host
from ..request.codec import Unencodable, encode_request
from ..request.model import Request
from ..request.revisit import revisit_counters
from . import records
from .records import FRAME, REFETCH, RETRY, cap_error, done_body, done_frame, fail_body, frame, frame_all, host_body
from .seenindex import key_of
from .shared import Shared

log = logging.getLogger("diskfrontier")

_HEADER = FRAME.size
_REQUEUE_BATCH = 1024  # RETRY records per journal write in requeue_failed
_NAN = float("nan")


class Ledger:
    """The write side of a ``Frontier``: what goes into the journal, and the state it changes.

    A request's ``not_before`` and ``attempts`` are checked here (``contract/checks.py``): a value a
    record cannot hold raises ``ValueError`` before anything is written.
    """

    check_time = staticmethod(check_time)
    check_attempts = staticmethod(check_attempts)

    def __init__(self, state: Shared) -> None:
        self.state = state
        self.memory_seen: set[bytes] = set()  # fingerprints of the requests kept in memory only
        self.warned_unserializable = False

    # ------------------------------------------------------------------ accepting requests
    def seen(self, fingerprint: bytes) -> bool:
        """True if a request with this fingerprint was accepted, in this or an earlier run."""
        return key_of(fingerprint) in self.state.seen.index or fingerprint in self.memory_seen

    def push(self, request: Request, fingerprint: bytes, key: int, due: float, memory_only: bool) -> bool:
        """``Frontier.push`` once its arguments are checked: False for a duplicate."""
        st = self.state
        if not request.dont_filter and (key in st.seen.index or fingerprint in self.memory_seen):
            st.counters["duplicates"] += 1
            return False
        if memory_only:
            self.push_memory(request, None)
            return True
        try:
            record = encode_request(request)
        except Unencodable as exc:
            kept = "" if not due and request.not_before is None else "; its not_before is not kept"
            self.push_memory(request, f"{exc}{kept}")
            return True
        self.store_one(request, record, key, due)
        return True

    def push_record(self, request: Request, record: bytes, fingerprint: bytes, key: int) -> bool:
        """Store ``request`` already encoded as ``record``, unless it is a duplicate."""
        st = self.state
        if not request.dont_filter and (key in st.seen.index or fingerprint in self.memory_seen):
            st.counters["duplicates"] += 1
            return False
        self.store_one(request, record, key)
        return True

    def push_many(self, batch: list[Request]) -> int:
        """Store the new requests of ``batch`` in one write (those that cannot be stored: in memory)."""
        st = self.state
        stored: list[tuple[Request, bytes]] = []
        memory: list[tuple[Request, str]] = []
        counted = st.counters["duplicates"]
        try:
            for request, _ in self.fresh([(r, None) for r in batch]):
                try:
                    stored.append((request, encode_request(request)))
                except Unencodable as exc:
                    kept = "" if request.not_before is None else "; its not_before is not kept"
                    memory.append((request, f"{exc}{kept}"))
        except BaseException:
            st.counters["duplicates"] = counted  # nothing was pushed
            raise
        self.store(stored)
        for request, reason in memory:
            self.push_memory(request, reason)
        return len(stored) + len(memory)

    def fresh(self, batch: list[tuple[Request, Any]]) -> list[tuple[Request, Any]]:
        """The requests of ``batch`` that are neither seen nor repeated within it."""
        st = self.state
        index, memory_seen = st.seen.index, self.memory_seen
        fresh: set[int] = set()
        out = []
        for pair in batch:
            request = pair[0]
            if not request.dont_filter:
                fingerprint = request.fingerprint
                key = key_of(fingerprint)
                if key in index or key in fresh or fingerprint in memory_seen:
                    st.counters["duplicates"] += 1
                    continue
                fresh.add(key)
            out.append(pair)
        return out

    def mark_seen(self, batch: list[bytes]) -> int:
        """Add fingerprints to the seen file; return how many were new."""
        seen = self.state.seen
        added = sum(seen.add(fingerprint) for fingerprint in batch)
        if self.state.fsync:
            seen.sync()
        else:
            seen.flush()
        return added

    def store_one(self, request: Request, record: bytes, key: int, due: float = 0.0) -> None:
        """Append the PUSH record of one accepted request, then index it."""
        st = self.state
        priority = request.priority
        slot = request.slot.encode()
        journal = st.journal
        offset = journal.size
        if request.not_before is not None:
            due = max(due, self.check_time("Request.not_before", request.not_before))
        if (due and due > time.time()) or request.attempts:
            due = due if due > time.time() else 0.0
            attempts = self.check_attempts(request.attempts)
        else:
            due, attempts = 0.0, 0
        framed = records.framed(offset, request, slot, record, st.salt, attempts=attempts, not_before=due)
        journal.write(framed)
        try:  # the write went through; from here an exception must leave the frontier marked dirty
            if not request.dont_filter:
                st.seen.add(request.fingerprint, key)
            hid = st.hosts.counts.add(slot)
            if due:
                self.hold(due, offset, priority)
            else:
                self.enqueue(offset, priority, hid)
            pending = st.pending
            pending[priority] = pending.get(priority, 0) + 1
            st.hosts.counts.pending[hid] += 1
            st.counters["pushed"] += 1
            st.pushes += 1
            st.live_bytes += len(framed)
            st.last_record = offset
        except BaseException as exc:
            st.interrupted("push", exc)
            raise

    def store(self, accepted: list[tuple[Request, bytes]]) -> None:
        """Append PUSH records for accepted requests in one journal write, then index them."""
        if not accepted:
            return
        st = self.state
        offsets = []
        frames = []
        offset = st.journal.size
        now = time.time()
        held: dict[int, float] = {}  # offset -> due, for requests with a not_before still ahead
        salt = st.salt
        for request, record in accepted:
            due = request.not_before
            if due is None and not request.attempts:
                framed = records.framed(offset, request, request.slot.encode(), record, salt)
            else:
                due = self.check_time("Request.not_before", due) if due is not None and due > now else 0.0
                if due:
                    held[offset] = due
                framed = records.framed(offset, request, request.slot.encode(), record, salt,
                                        attempts=self.check_attempts(request.attempts), not_before=due)
            frames.append(framed)
            offsets.append(offset)
            offset += len(framed)
        st.journal.write(b"".join(frames))  # a failure here is cut back: nothing has changed
        try:
            seen_add = st.seen.add
            groups: dict[int, list[int]] = {}  # offsets per priority, in push order
            hosts = st.hosts
            counts = hosts.counts
            add_host, host_pending = counts.add, counts.pending
            buffering = hosts.lifo and hosts.hot.count  # see enqueue
            for (request, _), at in zip(accepted, offsets, strict=True):
                if not request.dont_filter:
                    seen_add(request.fingerprint)
                hid = add_host(request.slot.encode())
                host_pending[hid] += 1
                if held and at in held:
                    self.hold(held[at], at, request.priority)
                    st.count_pending(request.priority, 1)
                    continue
                if buffering and (host := hosts.hot.get(hid)) is not None and host.buffer:
                    hosts.buffer(host, request.priority, at, now)
                    st.count_pending(request.priority, 1)
                    continue
                group = groups.get(request.priority)
                if group is None:
                    group = groups[request.priority] = []
                group.append(at)
            for priority, group in groups.items():
                st.queues.push_many(group, priority)
                st.count_pending(priority, len(group))
            st.counters["pushed"] += len(accepted)
            st.pushes += len(accepted)
            st.live_bytes += offset - offsets[0]
            st.last_record = offsets[-1]
        except BaseException as exc:
            st.interrupted("push_many", exc)
            raise

    def enqueue(self, offset: int, priority: int, hid: int) -> None:
        """Queue a request pushed or given back now. LIFO: a host with buffered requests takes it
        into its buffer, where it comes before them as it would in a LIFO queue (in the queues it
        would wait behind them)."""
        st = self.state
        hosts = st.hosts
        if hosts.hot.count and hosts.lifo:
            host = hosts.hot.get(hid)
            if host is not None and host.buffer:
                hosts.buffer(host, priority, offset, time.time())
                return
        st.queues.push(offset, priority)

    def hold(self, due: float, offset: int, priority: int) -> None:
        """Keep the request at ``offset`` out of the queues until ``due``."""
        st = self.state
        st.delayed.add(due, offset, priority)
        if st.delayed_due is None or due < st.delayed_due:
            st.delayed_due = due

    def push_memory(self, request: Request, reason: str | None) -> None:
        """Keep ``request`` in the memory queue (for this run only); ``reason``: why it cannot be stored."""
        # The fingerprint is kept out of requests.seen: after a restart this request is
        # gone, and a later push of it must be accepted, not rejected as a duplicate.
        st = self.state
        if not request.dont_filter:
            self.memory_seen.add(request.fingerprint)
        st.memq.push(request, -request.priority)
        st.count_pending(request.priority, 1)
        st.hosts.counts.pending[st.hosts.hid(request.slot)] += 1
        st.counters["unserializable"] += 1
        st.counters["pushed"] += 1
        if reason is not None and not self.warned_unserializable:
            self.warned_unserializable = True
            log.warning(
                "%r cannot be stored on disk (%s): it is kept in memory for this run only and will be "
                "lost if the crawl stops before it is done; further such requests are only counted "
                "(stats()['unserializable'])", request, reason)

    # ------------------------------------------------------------------ finishing requests
    def in_flight_seq(self, request: Request, what: str, taken: Iterable[int] = ()) -> int:
        """The seq of ``request`` if it is the very object ``pop`` handed out and not finished; else ``NotInFlight``."""
        seq = getattr(request, "_seq", None)
        # the very object pop() returned: a stale one's seq (an offset) may name another request by now
        if seq is None or self.state.inflight.get(seq) is not request or seq in taken:
            raise NotInFlight(
                f"{what}() was given {request!r}, which is not in flight: pass the Request object "
                f"pop() returned, once")
        return int(seq)

    def done(self, request: Request) -> None:
        """One DONE record for the in-flight ``request``."""
        st = self.state
        seq = getattr(request, "_seq", None)
        inflight = st.inflight
        if inflight.get(seq) is not request:  # type: ignore[arg-type]
            self.in_flight_seq(request, "done")  # raises NotInFlight
        assert isinstance(seq, int)  # it is in flight
        if seq >= 0:
            journal = st.journal
            offset = journal.size
            journal.write(done_frame(offset, seq, st.salt))
        try:
            if seq >= 0:
                st.dones += 1
                st.live_bytes -= inflight[seq]._size
                st.last_record = offset
            del inflight[seq]
            st.counters["done"] += 1
            hosts = st.hosts
            if hosts.hot.count:
                hosts.returned(request._hid, done=seq >= 0, pending=0)
            else:  # the counts alone, inline: this is every done
                counts = hosts.counts
                counts.inflight[request._hid] -= 1
                if seq >= 0:
                    counts.done[request._hid] += 1
        except BaseException as exc:
            st.interrupted("done", exc)
            raise

    def done_many(self, batch: list[Request]) -> None:
        """DONE records for many in-flight requests in one write; all are checked first."""
        st = self.state
        seqs: list[int] = []
        for request in batch:
            seqs.append(self.in_flight_seq(request, "done_many", seqs))
        on_disk = [seq for seq in seqs if seq >= 0]
        if on_disk:
            data, offsets = frame_all(st.journal.size, [done_body(seq) for seq in on_disk], st.salt)
            st.journal.write(data)
        try:
            if on_disk:
                st.dones += len(on_disk)
                st.live_bytes -= sum(st.inflight[seq]._size for seq in on_disk)
                st.last_record = offsets[-1]
            for request, seq in zip(batch, seqs, strict=True):
                del st.inflight[seq]
                st.hosts.returned(request._hid, done=seq >= 0, pending=0)
            st.counters["done"] += len(seqs)
        except BaseException as exc:
            st.interrupted("done_many", exc)
            raise

    def requeue(self, request: Request, what: str, kind: int, after: float, more_attempts: int) -> None:
        """A RETRY (or REFETCH) record: the in-flight ``request`` finished, and pending again after ``after`` s."""
        st = self.state
        seq = self.in_flight_seq(request, what)
        priority = request.priority
        if isinstance(priority, bool) or not isinstance(priority, int) or not -(2**31) <= priority < 2**31:
            raise ValueError(f"{what}(): {request!r} has priority {priority!r}, not a 32-bit int")
        # a re-fetch is a new fetch: its retries count from 0 again
        attempts = 0 if kind == REFETCH else min(self.check_attempts(request.attempts) + more_attempts, MAX_ATTEMPTS)
        if seq < 0:  # kept in memory only (this run): back into the memory queue at once, no time kept
            del st.inflight[seq]
            request.attempts = attempts
            st.memq.push(request, -priority)
            st.count_pending(priority, 1)
            st.counters["retried" if kind == RETRY else "refetch_scheduled"] += 1
            st.hosts.returned(request._hid, done=False, pending=1)  # no journal record: not counted as done
            return
        try:
            record = encode_request(request)
        except Unencodable as exc:
            raise FrontierError(f"{what}(): {request!r} can no longer be stored ({exc}); it is still in "
                                f"flight: done() it, or fix its meta and try again") from None
        due = time.time() + after if after > 0 else 0.0
        journal = st.journal
        offset = journal.size
        framed = records.framed(offset, request, request.slot.encode(), record, st.salt, attempts=attempts,
                                not_before=due, kind=kind, target=seq)
        journal.write(framed)
        try:
            st.live_bytes += len(framed) - st.inflight.pop(seq)._size
            st.pushes += 1
            st.dones += 1
            st.last_record = offset
            if due:
                self.hold(due, offset, priority)
            else:
                self.enqueue(offset, priority, request._hid)
            st.count_pending(priority, 1)
            request.attempts = attempts
            request.not_before = due or None
            st.counters["retried" if kind == RETRY else "refetch_scheduled"] += 1
            if kind == REFETCH:
                st.counters["done"] += 1
                if request.revisit is not None:
                    for name in revisit_counters(request.revisit):
                        st.counters[name] += 1
            st.hosts.returned(request._hid, done=kind == REFETCH, pending=1)
        except BaseException as exc:
            st.interrupted(what, exc)
            raise

    # ------------------------------------------------------------------ failed requests
    def fail(self, request: Request, text: bytes) -> None:
        """One FAIL record for the in-flight ``request`` (a request kept in memory only: counted, no record)."""
        st = self.state
        seq = self.in_flight_seq(request, "fail")
        if seq < 0:
            del st.inflight[seq]
            st.memory_failed += 1
            st.hosts.returned(request._hid, done=False, pending=0)
            return
        journal = st.journal
        offset = journal.size
        framed = frame(offset, fail_body(seq, time.time(), text), st.salt)
        journal.write(framed)
        try:
            st.dones += 1
            size = st.inflight.pop(seq)._size
            st.live_bytes -= size
            st.failed_bytes += size + len(framed)
            st.last_record = offset
            st.failed[seq] = offset
            st.hosts.returned(request._hid, done=True, pending=0)
        except BaseException as exc:
            st.interrupted("fail", exc)
            raise

    def prepare_failed(self, entries: list[FailedRequest]) -> list[tuple[bytes, float, bytes]]:
        """The (PUSH body, failed_at, error) of each entry for ``record_failed``; the entries were checked by
        ``contract.checks.check_failed``, and here each request is encoded (refused if it cannot be stored)."""
        prepared: list[tuple[bytes, float, bytes]] = []
        for entry in entries:
            request = entry.request
            try:
                record = encode_request(request)
            except Unencodable as exc:
                raise ValueError(f"record_failed(): {request!r} cannot be stored: {exc}") from None
            prepared.append((records.body(request, record, attempts=self.check_attempts(request.attempts)),
                             float(entry.failed_at), cap_error(entry.error)))
        return prepared

    def record_failed(self, entries: list[FailedRequest], prepared: list[tuple[bytes, float, bytes]]) -> None:
        """A PUSH and a FAIL record naming it for each entry, all in one journal write."""
        st = self.state
        journal = st.journal
        bodies: list[bytes] = []
        offset = journal.size
        for pushed, at, error in prepared:  # each FAIL names the PUSH just before it
            bodies += [pushed, fail_body(offset, at, error)]
            offset += _HEADER + len(bodies[-2]) + _HEADER + len(bodies[-1])
        data, offsets = frame_all(journal.size, bodies, st.salt)
        journal.write(data)
        try:
            hosts = st.hosts
            counts = hosts.counts
            touched: set[int] = set()
            for entry, at, fail_at in zip(entries, offsets[0::2], offsets[1::2], strict=True):
                request = entry.request
                if not request.dont_filter:
                    st.seen.add(request.fingerprint)
                hid = counts.add(request.slot.encode())
                counts.done[hid] += 1
                touched.add(hid)
                st.failed[at] = fail_at
                st.pushes += 1
                st.dones += 1
            st.failed_bytes += len(data)
            st.last_record = offsets[-1]
            now = time.time()
            for hid in touched:  # a budget counts done requests
                if (host := hosts.hot.get(hid)) is not None:
                    hosts.place(host, now)
                    hosts.cool(host, now)
        except BaseException as exc:
            st.interrupted("record_failed", exc)
            raise

    def requeue_failed(self, limit: int | None) -> int:
        """RETRY records making failed requests pending again, oldest failure first; how many."""
        failed = self.state.failed
        chosen = list(failed)[:limit] if limit is not None else list(failed)
        for start in range(0, len(chosen), _REQUEUE_BATCH):
            self._requeue_failed(chosen[start:start + _REQUEUE_BATCH])
        return len(chosen)

    def _requeue_failed(self, targets: list[int]) -> None:
        """One journal write of a RETRY record for each failed request of ``targets``, then their bookkeeping."""
        st = self.state
        journal = st.journal
        bodies: list[bytes] = []
        heads: list[tuple[int, bytes]] = []  # (priority, slot) of each
        leaving = 0  # the bytes of the failed requests' records and FAIL records
        for target in targets:
            stored = journal.read_body(target)
            body, priority, slot = records.retried(stored, target)
            bodies.append(body)
            heads.append((priority, slot))
            error = journal.read_fail(st.failed[target], target).error.encode("utf-8")
            leaving += 2 * _HEADER + len(stored) + len(fail_body(target, 0.0, error))
        data, offsets = frame_all(journal.size, bodies, st.salt)
        journal.write(data)
        try:
            counts = st.hosts.counts
            for target, offset, body, (priority, slot) in zip(targets, offsets, bodies, heads, strict=True):
                del st.failed[target]
                hid = counts.add(slot)
                self.enqueue(offset, priority, hid)
                st.count_pending(priority, 1)
                counts.pending[hid] += 1
                st.pushes += 1
                st.live_bytes += _HEADER + len(body)
            st.failed_bytes -= leaving
            st.last_record = offsets[-1]
        except BaseException as exc:
            st.interrupted("requeue_failed", exc)
            raise

    # ------------------------------------------------------------------ hosts
    def host(self, name: str) -> Host:
        """The schedule's entry of host ``name`` (made if it has none)."""
        hosts = self.state.hosts
        return hosts.host(hosts.hid(name))

    def set_host(self, host: Host, delay: float | None, blocked_until: float, budget: int | None) -> None:
        """Write a HOST record with these settings, then apply them."""
        st = self.state
        hosts = st.hosts
        body = host_body(hosts.counts.name_bytes(host.hid), _NAN if delay is None else delay, blocked_until,
                         -1 if budget is None else budget, hosts.counts.done[host.hid])
        journal = st.journal
        offset = journal.size
        journal.write(frame(offset, body, st.salt))
        try:
            st.last_record = offset
            host.delay, host.blocked_until, host.budget = delay, blocked_until, budget
            hosts.active = True
            now = time.time()
            hosts.place(host, now)
            hosts.cool(host, now)
        except BaseException as exc:
            st.interrupted("a host setting", exc)
            raise

    def set_paused(self, paused: bool) -> bool:
        """Write a PAUSE record (paused, or running again) unless the crawl is so already; True if written."""
        st = self.state
        if (st.paused_since is not None) == paused:
            return False
        at = time.time()
        journal = st.journal
        offset = journal.size
        journal.write(frame(offset, records.pause_body(paused, at), st.salt))
        st.last_record = offset
        st.paused_since = at if paused else None
        return True

    def mark(self, phase: int, ident: str, result: bytes = b"") -> None:
        """Write the MARK record that begins or ends the records of inbox command ``ident``."""
        st = self.state
        journal = st.journal
        offset = journal.size
        journal.write(frame(offset, records.mark_body(phase, ident, result), st.salt))
        st.last_record = offset

    def set_done_count(self, host: Host, done: int) -> None:
        """Set the host's done count, kept in a HOST record with its settings (undone if the write fails)."""
        counts = self.state.hosts.counts
        before = counts.done[host.hid]
        counts.done[host.hid] = done
        try:
            self.set_host(host, host.delay, host.blocked_until, host.budget)
        except BaseException:
            counts.done[host.hid] = before
            raise
