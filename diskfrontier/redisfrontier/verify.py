"""``verify`` of a Redis crawl: check its indexes and counters against its stored requests;
``repair`` rebuilds them from the stored requests.

The ``req`` hash (request id -> body) is the crawl's truth, as the journal is a job
directory's. Everything else is an index of it (``q:HOST``, ``delayed``, ``lease`` with
``owner``, ``ready``, ``wait``, ``hosts``) or a count (``h:HOST`` fields ``p`` and ``i``,
``meta`` fields ``pending``, ``inflight``, ``delayed``, ``seq``, ``failed``, ``seen``). A pause (``meta``
field ``paused``, a time) and the ``dropped`` counter are checked to be numbers; they count nothing
that can be checked against the stored requests.
Verification only reads: the keys found by ``SCAN``, in one ``MULTI``/``EXEC``. Repair,
with the crawl's clients stopped, writes in one ``MULTI``/``EXEC``
(refused if a client changed the crawl meanwhile): bodies that cannot be decoded are set
aside in the ``bad`` hash, keys of a wrong type that hold what cannot be rebuilt are
renamed to ``bad:KEY``, a leased request whose lease or token is gone becomes pending,
every index and count is written anew, and then every host is placed again.

What repair cannot bring back (seen fingerprints of buckets that went, requests counted but not
stored, a shard lost whole) it records in the shard's ``meta`` (``lost_seen``, ``lost_requests``,
``lost_shard``) and says so; every later verify names the record, so such a crawl is never sound
again. The crawl's shards, their sentinels and the seen buckets that must be there are checked
with ``wholeness.py`` (``verify_layout.py`` reads and repairs the shards as a whole).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import CrawlDamaged, FrontierError
from . import lua
from .connection import RedisMisconfigured, connect, node_client, servers, shown_url, talking
from .opening import format_of, without_revisits
from .records import unpack_body
from .shards import Shard
from .verify_layout import Said, check_layout, mend_layout, shard_missing
from .verify_meta import Place, mended, order_of
from .verify_meta import losses as recorded_losses
from .wholeness import LOSS_FIELDS, bloom_parts, has_bit, losses, sentinel_value

BATCH = 500  # hosts a REPLACE script call places
_ID = re.compile(rb"[0-9a-f]{12}\Z")
_LIFO_BASE = 2**48
# The kind of each fixed key; None: a key the crawl may lack.
_KINDS = {b"meta": b"hash", b"req": b"hash", b"ready": b"zset", b"wait": b"zset", b"delayed": b"zset",
          b"lease": b"zset", b"owner": b"hash", b"hosts": b"set", b"sentinel": b"string", b"failed": b"hash",
          b"failinfo": b"hash", b"bad": b"hash", b"clients": b"hash", b"robots": b"hash", b"seen_map": b"string"}
_DERIVED = {b"ready", b"wait", b"delayed", b"lease", b"owner", b"hosts", b"sentinel"}  # rebuilt from req
_COUNTERS = (b"pending", b"inflight", b"delayed", b"seq", b"done", b"seen", b"pushed", b"duplicates", b"retried",
             b"refetch_scheduled", b"reclaimed", b"failed", b"leases", b"dropped", b"revisits", b"revisit_changes",
             b"revisit_not_modified")
_HOST_NUMBERS = (b"p", b"i", b"d", b"dl", b"b", b"bu", b"t", b"f")
_REQUIRED = (b"seq", b"pending", b"inflight", b"seen")  # counters every crawl has had from its start


@dataclass
class Finding:
    """One problem: the key (and field) where it is, and what is wrong."""

    key: str
    problem: str

    def __str__(self) -> str:
        return f"{self.key}: {self.problem}"


@dataclass
class RedisReport:
    """What verify found in a crawl (and, with repair, what it did)."""

    crawl: str
    requests: int = 0
    kept: int = 0  # stored requests repair kept (those that decode)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    set_aside: list[str] = field(default_factory=list)  # the keys or hash fields repair moved aside
    repaired: bool = False

    @property
    def sound(self) -> bool:
        return not self.findings


def _name(key: bytes) -> str:
    return key.decode(errors="replace")


def _number(value: bytes | None) -> float | None:
    """``value`` as a finite number, None if it is not one."""
    try:
        number = float(value) if value is not None else None
    except ValueError:
        return None
    return number if number is not None and number - number == 0 else None


def _is_time(value: bytes) -> bool:
    """True if ``value`` is a time a script stores (a finite number of seconds, not negative)."""
    number = _number(value)
    return number is not None and number >= 0


@dataclass
class _Stored:
    """A stored request, as its body tells."""

    host: bytes
    priority: int
    not_before: float  # 0.0: none


class _Crawl:
    """Every key of one crawl, read once, and what they should hold."""

    def __init__(self, client: Any, url: str, crawl: str, report: RedisReport, place: Place | None = None) -> None:
        self.client = client
        self.shown_url = shown_url(url)
        self.prefix = f"df:{{{crawl}}}:".encode()
        self.report = report
        self.place = place or Place(crawl)
        self.types: dict[bytes, bytes] = {}
        self.renamed: list[bytes] = []  # keys of a wrong type that repair sets aside whole

    def key(self, suffix: bytes) -> bytes:
        return self.prefix + suffix

    def problem(self, suffix: bytes, problem: str) -> None:
        self.report.findings.append(Finding(_name(self.key(suffix)), problem))

    # ------------------------------------------------------------------ reading
    def read(self) -> None:
        """Read every key of the crawl (``FrontierError`` if there is no crawl to check)."""
        c, p = self.client, self.prefix
        pattern = re.sub(rb"([*?\[\]\\])", rb"\\\1", p) + b"*"
        keys = [k[len(p):] for k in c.scan_iter(match=pattern, count=1000)]
        pipe = c.pipeline(transaction=False)
        for suffix in keys:
            pipe.type(p + suffix)
        self.types = dict(zip(keys, pipe.execute(), strict=True))
        if b"meta" not in self.types:
            raise FrontierError(f"there is no crawl {self.report.crawl!r} in Redis at {self.shown_url} (no key "
                                f"{_name(self.key(b'meta'))})")
        for suffix, kind in self.types.items():
            want = _KINDS.get(suffix) or self._kind_of(suffix)
            if want is not None and kind != want:
                self.problem(suffix, f"is a {kind.decode()}, not a {want.decode()}")
                if suffix not in _DERIVED and not suffix.startswith(b"q:"):
                    self.renamed.append(suffix)
        if b"meta" in self.renamed:
            raise CrawlDamaged(_name(self.key(b"meta")), f"is a {self.types[b'meta'].decode()}, not a hash",
                               hint="the crawl's settings are lost and verify cannot rebuild them: copy out what "
                                    "is left (diskfrontier export) into a new crawl")
        self._snapshot()

    def _snapshot(self) -> None:
        """Every key of a usable type, read in one ``MULTI``/``EXEC``: what clients running meanwhile
        change is seen wholly before or wholly after each of their steps."""
        snap = _Snapshot(self.client.pipeline(transaction=True), self.prefix, self.types)
        meta, bodies, owner, failed, failinfo = (snap.hash(s) for s in (b"meta", b"req", b"owner", b"failed",
                                                                            b"failinfo"))
        lease, delayed, ready, wait = (snap.zset(s) for s in (b"lease", b"delayed", b"ready", b"wait"))
        hosts, seen_map = snap.members(b"hosts"), snap.get(b"seen_map")
        sentinel = snap.get(b"sentinel")
        queues = {s[2:]: snap.zset(s) for s in self.types if s.startswith(b"q:")}
        host_hashes = {s[2:]: snap.hash(s) for s in self.types if s.startswith(b"h:")}
        buckets = [snap.size(s) for s, kind in self.types.items() if s.startswith((b"s:", b"x:")) and kind == b"hash"]
        buckets += [snap.cardinality(s) for s, kind in self.types.items() if s.startswith(b"k:") and kind == b"set"]
        got = snap.run()
        self.meta, self.bodies, self.owner, self.failed, self.failinfo = (got(x, {}) for x in (
            meta, bodies, owner, failed, failinfo))
        self.lease, self.delayed, self.ready, self.wait = (got(x, {}) for x in (lease, delayed, ready, wait))
        self.hosts: set[bytes] = got(hosts, set())
        self.seen_map: bytes | None = got(seen_map, None)
        self.sentinel: bytes | None = got(sentinel, None)
        self.queues = {host: got(x, {}) for host, x in queues.items()}
        self.host_hashes = {host: got(x, {}) for host, x in host_hashes.items()}
        self.seen = sum(got(x, 0) for x in buckets)

    @staticmethod
    def _kind_of(suffix: bytes) -> bytes | None:
        if suffix.startswith(b"q:"):
            return b"zset"
        if suffix.startswith((b"h:", b"s:", b"x:")):
            return b"hash"
        if suffix.startswith(b"k:"):
            return b"set"
        if suffix.startswith(b"b:"):
            return b"string"
        return None


    # ------------------------------------------------------------------ checking
    def read_and_check(self, now: float) -> None:
        self.read()
        self.check(now)

    def check(self, now: float) -> None:
        """Compare every index and count with the stored requests; each difference is a finding."""
        self.lifo = order_of(self) == b"lifo"
        self._check_meta()
        self.good: dict[bytes, _Stored] = {}
        self.bad: dict[bytes, bytes] = {}
        for rid, body in sorted(self.bodies.items()):
            self._decode(rid, body)
        self.report.requests = len(self.bodies)
        self._check_failed()
        self.leased = {rid for rid in self.good if rid in self.owner and rid in self.lease}
        for rid in sorted(self.owner.keys() | self.lease.keys()):
            where = b"owner" if rid in self.owner else b"lease"
            if rid not in self.good:
                self.problem(where, f"names request {_name(rid)}, which is not stored")
            elif rid not in self.leased:
                self.problem(where, f"holds request {_name(rid)} but "
                                    f"{'lease has no expiry' if where == b'owner' else 'owner has no token'} for it")
        self.pending = {rid: s for rid, s in self.good.items() if rid not in self.leased}
        self._check_places()
        self._check_hosts(now)
        self._check_counts()

    def _check_meta(self) -> None:
        meta = self.meta
        layout = meta.get(b"seen_layout", b"hash").decode("utf-8", "replace")
        several = self.place.count > 1
        expected = format_of(layout, self.place.count).encode()
        # "1s"/"2s": a shard of a crawl of several shards; "2": a newer seen layout; without "r": not opened since
        if meta.get(b"v") not in (expected, without_revisits(expected.decode()).encode()):
            self.problem(b"meta", f"field v is {meta.get(b'v')!r}, not {expected.decode()} (the format of a crawl "
                                  f"of {'several shards' if several else 'one shard'} whose seen set is kept as "
                                  f"{layout!r}): not a crawl of this format")
        if meta.get(b"order") not in (b"lifo", b"fifo"):
            self.problem(b"meta", f"field order is {meta.get(b'order')!r}, not 'lifo' or 'fifo'")
        for name in _COUNTERS:
            value = meta.get(name)
            if value is not None and (_number(value) is None or not value.lstrip(b"-").isdigit()):
                self.problem(b"meta", f"field {name.decode()} is {value[:60]!r}, not a whole number")
        for name in _REQUIRED:
            if name not in meta:
                self.problem(b"meta", f"field {name.decode()} is missing (repair writes it again)")
        paused = meta.get(b"paused")
        if paused is not None and not _is_time(paused):
            self.problem(b"meta", f"field paused is {paused[:60]!r}, not a time (repair keeps the crawl paused, "
                                  f"since the time of the repair)")
        if self.place.index:
            self._check_shard_marks()
        for loss in losses({name: meta.get(name.encode()) for name in LOSS_FIELDS}):
            self.problem(b"meta", f"records what verify --repair could not bring back: {loss}")

    def _check_shard_marks(self) -> None:
        """Shard i > 0: its meta names its place, and its sentinel says so (shard 0's are the layout's)."""
        place, meta = self.place, self.meta
        if meta.get(b"shard") != str(place.index).encode() or meta.get(b"crawl") != place.crawl.encode():
            self.problem(b"meta", f"is not the meta of shard {place.index} of crawl {place.crawl!r} (it names shard "
                                  f"{meta.get(b'shard')!r} of crawl {meta.get(b'crawl')!r})")
        want = self.expected_sentinel.encode()
        have = self.sentinel
        if have == want or (not place.sealed and have in (None, b"1") and not (have is None and meta.get(b"sentinel"))):
            return
        if have is None:
            self.problem(b"sentinel", "is gone: Redis evicted keys of the crawl, or something deleted them")
        else:
            self.problem(b"sentinel", f"is {have[:60]!r}, not {want.decode()!r}: not the sentinel of shard "
                                      f"{place.index} of the crawl's {place.count} (the shard was made again after it "
                                      f"was lost, or its keys are another crawl's)")

    @property
    def expected_sentinel(self) -> str:
        return sentinel_value(self.place.index, self.place.count)

    def _decode(self, rid: bytes, body: bytes) -> None:
        where = f"{_name(self.key(b'req'))} field {_name(rid)}"
        if not _ID.match(rid):
            self.problem(b"req", f"field {_name(rid)!r} is not a request id (12 hex digits)")
            self.bad[rid] = body
            return
        try:
            request = unpack_body(body, where)
        except CrawlDamaged as exc:
            self.report.findings.append(Finding(exc.key, exc.problem))
            self.bad[rid] = body
            return
        self.good[rid] = _Stored(request.slot.encode(), request.priority, request.not_before or 0.0)

    def _check_failed(self) -> None:
        self.bad_failed: dict[bytes, bytes] = {}
        for rid, body in sorted(self.failed.items()):
            where = f"{_name(self.key(b'failed'))} field {_name(rid)}"
            try:
                unpack_body(body, where)
            except CrawlDamaged as exc:
                self.report.findings.append(Finding(exc.key, exc.problem))
                self.bad_failed[rid] = body
                continue
            if len(self.failinfo.get(rid, b"")) < 8:
                self.problem(b"failinfo", f"has no failure time for failed request {_name(rid)}")
        for rid in sorted(self.failinfo.keys() - self.failed.keys()):
            self.problem(b"failinfo", f"names failed request {_name(rid)}, which is not in failed")

    def _check_places(self) -> None:
        """Each pending request in its host's queue (score -priority) or in delayed, nothing else anywhere."""
        places: dict[bytes, list[bytes]] = {}
        for host, queue in sorted(self.queues.items()):
            for rid, score in queue.items():
                places.setdefault(rid, []).append(b"q:" + host)
                stored = self.pending.get(rid)
                if stored is None:
                    what = "is leased" if rid in self.leased else "is not stored"
                    self.problem(b"q:" + host, f"holds request {_name(rid)}, which {what}")
                elif stored.host != host or score != -stored.priority:
                    self.problem(b"q:" + host, f"holds request {_name(rid)} of {_name(stored.host)} with priority "
                                               f"{-score:g}; it has priority {stored.priority}")
        for rid in self.delayed:
            places.setdefault(rid, []).append(b"delayed")
            if rid not in self.pending:
                self.problem(b"delayed", f"holds request {_name(rid)}, which "
                                         f"{'is leased' if rid in self.leased else 'is not stored'}")
        for rid, stored in sorted(self.pending.items()):
            found = places.get(rid, [])
            if not found:
                self.problem(b"req", f"holds pending request {_name(rid)} of {_name(stored.host)}, which is in "
                                     f"neither {_name(self.key(b'q:' + stored.host))} nor "
                                     f"{_name(self.key(b'delayed'))}: it would never be handed out")
            elif len(found) > 1:
                self.problem(b"req", f"request {_name(rid)} is in {len(found)} places: "
                                     f"{', '.join(_name(k) for k in found)}")

    def _check_hosts(self, now: float) -> None:
        """The hosts set, each host's counts, and where each host with queued requests is placed."""
        self.pending_of = Counter(s.host for s in self.pending.values())
        self.leased_of = Counter(self.good[rid].host for rid in self.leased)
        for host in sorted(self.pending_of.keys() | self.leased_of.keys()):
            if host not in self.hosts:
                self.problem(b"hosts", f"lacks {_name(host)}, which has stored requests")
        for host, fields in sorted(self.host_hashes.items()):
            for name in _HOST_NUMBERS:
                if name in fields and _number(fields[name]) is None:
                    self.problem(b"h:" + host, f"field {name.decode()} is {fields[name][:60]!r}, not a number")
        wrong = {suffix[2:] for suffix in self.renamed if suffix.startswith(b"h:")}  # named already: its type
        for host in sorted((self.host_hashes.keys() | self.pending_of.keys() | self.leased_of.keys()) - wrong):
            fields = self.host_hashes.get(host, {})
            for name, want in ((b"p", self.pending_of[host]), (b"i", self.leased_of[host])):
                have = _number(fields.get(name)) or 0
                if have != want and _number(fields.get(name, b"0")) is not None:
                    self.problem(b"h:" + host, f"field {name.decode()} counts {have:g}; the crawl stores {want}")
        members: dict[bytes, bytes] = {}
        for member in sorted(self.ready):
            if member[12:] in members:
                self.problem(b"ready", f"holds both {_name(members[member[12:]])} and {_name(member)}: a host "
                                       f"has one entry")
            members[member[12:]] = member
        for host, member in sorted(members.items()):
            queue = self.queues.get(host, {})
            top = min(queue.items(), key=lambda item: (item[1], item[0]))[0] if queue else None
            if top is None or member[:12] != top:
                self.problem(b"ready", f"holds {_name(member)}, which is not the first request of "
                                       f"{_name(self.key(b'q:' + host))}")
            elif host not in wrong and self.host_hashes.get(host, {}).get(b"r") != member:
                self.problem(b"h:" + host, f"field r is not {_name(member)}, its entry in ready")
        for host, fields in sorted(self.host_hashes.items()):
            if b"r" in fields and fields[b"r"] not in self.ready:
                self.problem(b"ready", f"lacks {_name(fields[b'r'])}, which {_name(self.key(b'h:' + host))} names")
        for host, queue in sorted(self.queues.items()):
            if queue and host not in members and host not in self.wait and not self._held(host):
                self.problem(b"q:" + host, f"holds {len(queue)} requests but {_name(host)} is in neither ready nor "
                                           f"wait: they would never be handed out")

    def _held(self, host: bytes) -> bool:
        """True if a count holds ``host`` back (per_host, budget): it is then in neither ready nor wait."""
        fields = self.host_hashes.get(host, {})
        inflight = _number(fields.get(b"i")) or 0
        per_host = _number(self.meta.get(b"per_host")) or 0
        budget = _number(fields.get(b"bu"))
        if per_host > 0 and inflight >= per_host:
            return True
        return budget is not None and (_number(fields.get(b"d")) or 0) + inflight >= budget

    def _check_counts(self) -> None:
        meta = self.meta
        for name, want in ((b"pending", len(self.pending)), (b"inflight", len(self.leased)),
                           (b"delayed", len(self.delayed)), (b"failed", len(self.failed))):
            have = _number(meta.get(name, b"0"))
            if have is not None and have != want:
                self.problem(b"meta", f"field {name.decode()} counts {have:g}; the crawl holds {want}")
        self._check_seen(_number(meta.get(b"seen", b"0")))
        self.max_seq = max((self._seq(rid) for rid in [*self.good, *self.failed] if _ID.match(rid)), default=0)
        seq = _number(meta.get(b"seq", b"0"))
        if seq is not None and seq < self.max_seq:
            self.problem(b"meta", f"field seq is {seq:g}, behind request number {self.max_seq}: new requests "
                                  f"would overwrite stored ones")

    def _check_seen(self, seen: float | None) -> None:
        self.gone_buckets: list[tuple[bytes, float]] = []  # (bucket, about how many fingerprints it held)
        self.buckets_there: list[int] = []  # the seen_map bits of the buckets (or Bloom parts) that are there
        layout = self.meta.get(b"seen_layout")
        if layout in (b"set64", b"bloom") and self.meta.get(b"seen_map") and (seen or 0) > 0 and self.seen_map is None:
            self.problem(b"seen_map", "is gone: Redis evicted it or something deleted it (it tells which seen buckets "
                                      "must be there; repair makes it again from the buckets that are)")
        if layout == b"bloom":
            self._check_bloom(seen)
            return
        if layout == b"set64":
            self._check_set_buckets(seen)
        if seen is not None and seen != self.seen:
            self.problem(b"meta", f"field seen counts {seen:g} fingerprints; the seen buckets hold {self.seen}"
                                  + (" (buckets were evicted or deleted: the URLs they held would be accepted "
                                     "again, and repair cannot bring them back)" if seen > self.seen else ""))

    def _look_at_bucket(self, suffix: bytes, bit: int, about: float) -> None:
        """A seen bucket (or Bloom filter part) whose ``seen_map`` bit is ``bit``: there, or gone (damage) if its
        bit says it held something (about ``about`` fingerprints)."""
        if suffix in self.types:
            self.buckets_there.append(bit)
        elif has_bit(self.seen_map or b"", bit):
            self.gone_buckets.append((suffix, about))
            self.problem(suffix, "is gone: Redis evicted it or something deleted it, with the seen fingerprints it "
                                 "held: the URLs they stand for would be accepted again, and repair cannot bring them "
                                 "back")

    def _check_set_buckets(self, seen: float | None) -> None:
        """The linear-hashing state of a ``set64`` seen set: numbers, every bucket that must be there (it
        holds fingerprints for certain), and no bucket past the last one (its fingerprints would never be
        looked up)."""
        level, split = _number(self.meta.get(b"seen_level")), _number(self.meta.get(b"seen_split"))
        fill = _number(self.meta.get(b"seen_fill"))
        if level is None or split is None or fill is None or not 0 <= split < 2 ** level or fill < 1:
            self.problem(b"meta", "fields seen_level, seen_split and seen_fill are not a seen set's state (repair "
                                  "writes them again from the buckets there)")
            return
        count = 2 ** int(level) + int(split)
        for bucket in range(count):
            self._look_at_bucket(b"k:%x" % bucket, bucket, (seen or 0) / count)
        for suffix in sorted(self.types):
            if not suffix.startswith(b"k:"):
                continue
            try:
                number = int(suffix[2:], 16)
            except ValueError:
                number = -1
            if not 0 <= number < count:
                self.problem(suffix, f"is not one of the {count} seen buckets (seen_level {level:g}, seen_split "
                                     f"{split:g}): the fingerprints it holds are never looked up")

    def _check_bloom(self, seen: float | None) -> None:
        """A Bloom filter cannot be counted: ``seen`` is checked against the filters' own counts (each full
        filter holds its capacity), and each filter's settings against what the scripts write."""
        meta = self.meta
        filters = _number(meta.get(b"bloom_filters"))
        last = _number(meta.get(b"bloom_last"))
        if filters is None or last is None or _number(meta.get(b"bloom_rate")) is None:
            self.problem(b"meta", "fields bloom_rate, bloom_filters and bloom_last are not all numbers: the Bloom "
                                  "filters cannot be read (repair writes them again from the filters there)")
            return
        held = 0.0
        offset = 0  # the seen_map bit of the filter's part 0
        for i in range(1, int(filters) + 1):
            parts = meta.get(b"bloom_%d" % i, b"").split()
            if len(parts) != 3 or not all(part.isdigit() for part in parts):
                self.problem(b"meta", f"field bloom_{i} is {meta.get(b'bloom_%d' % i)!r}, not a Bloom filter's "
                                      f"settings (capacity, bits, hashes)")
                return
            adds = last if i == filters else int(parts[0])
            held += adds
            pieces = bloom_parts(int(parts[1]))
            for piece in range(pieces):
                self._look_at_bucket(b"b:%d:%d" % (i, piece), offset + piece, adds / pieces)
            offset += pieces
        if seen is not None and seen != held:
            self.problem(b"meta", f"field seen counts {seen:g} fingerprints; the Bloom filters count {held:g}")

    def _seq(self, rid: bytes) -> int:
        number = int(rid, 16)
        return _LIFO_BASE - number if self.lifo else number


class _Snapshot:
    """Reads queued on one transaction; each read's place in the answer, or None for a key of another
    type (read as empty)."""

    def __init__(self, pipe: Any, prefix: bytes, types: dict[bytes, bytes]) -> None:
        self.pipe, self.prefix, self.types = pipe, prefix, types
        self.count = 0

    def _queue(self, suffix: bytes, kind: bytes, read: Any) -> int | None:
        if self.types.get(suffix) != kind:
            return None
        read(self.prefix + suffix)
        self.count += 1
        return self.count - 1

    def hash(self, suffix: bytes) -> int | None:
        return self._queue(suffix, b"hash", self.pipe.hgetall)

    def zset(self, suffix: bytes) -> int | None:
        return self._queue(suffix, b"zset", lambda key: self.pipe.zrange(key, 0, -1, withscores=True))

    def members(self, suffix: bytes) -> int | None:
        return self._queue(suffix, b"set", self.pipe.smembers)

    def get(self, suffix: bytes) -> int | None:
        return self._queue(suffix, b"string", self.pipe.get)

    def size(self, suffix: bytes) -> int | None:
        return self._queue(suffix, b"hash", self.pipe.hlen)

    def cardinality(self, suffix: bytes) -> int | None:
        return self._queue(suffix, b"set", self.pipe.scard)

    def run(self) -> Any:
        """Run the reads; returns ``got(place, empty)``, the answer of the read at ``place``."""
        answers = self.pipe.execute() if self.count else []

        def got(place: int | None, empty: Any) -> Any:
            if place is None:
                return empty
            answer = answers[place]
            return dict(answer) if isinstance(answer, list) else answer

        return got


def verify_crawl(url: str, crawl: str, *, repair: bool = False) -> RedisReport:
    """Check the crawl ``crawl`` at ``url`` (its shards as a whole, then each of them); with ``repair``,
    rebuild its indexes and counts from its stored requests (stop the crawl's clients first), and record
    what cannot be rebuilt."""
    report = RedisReport(crawl)
    said = Said()
    client = connect(url)
    try:
        with talking(url, "verify"):
            for server in servers(client):
                policy = server.info("memory").get("maxmemory_policy", "noeviction")
                if policy != "noeviction":
                    report.findings.append(Finding("maxmemory-policy", f"is {policy}: Redis may drop keys of the "
                                                                       f"crawl; set noeviction"))
                    if repair:
                        raise RedisMisconfigured(f"verify --repair: Redis has maxmemory-policy {policy} and may drop "
                                                 f"keys again; set 'maxmemory-policy noeviction' first")
            layout = check_layout(client, url, crawl, said, repair)
            first = node_client(client, f"df:{{{crawl}}}:meta").hgetall(f"df:{{{crawl}}}:meta") if layout else {}
            for index, tag in enumerate(layout.tags if layout else []):
                assert layout is not None
                place = Place(crawl, index, layout.count, layout.sealed, first)
                if index and shard_missing(client, url, crawl, Shard(index, tag), layout, said, repair):
                    continue
                _verify_shard(client, url, place, tag, report, repair)
            if repair and layout is not None:
                mend_layout(client, url, crawl, layout, said)
    finally:
        client.close()
    report.findings[:0] = [Finding(key, problem) for key, problem in said.findings]
    report.notes += said.notes
    if said.findings and repair:
        report.repaired = True
    return report


def _verify_shard(client: Any, url: str, place: Place, tag: str, report: RedisReport, repair: bool) -> None:
    """Check (and with ``repair`` rebuild) the keys of one shard of the crawl (``tag``: its hash tag)."""
    node = node_client(client, f"df:{{{tag}}}:meta")  # every key of a shard is on one node
    watcher = node.pipeline(transaction=True)
    shard = RedisReport(place.crawl)
    keys = _Crawl(node, url, tag, shard, place)
    if repair:
        watcher.watch(keys.key(b"meta"), keys.key(b"req"))
    now = float(node.time()[0])
    keys.read_and_check(now)
    report.findings += shard.findings
    report.requests += shard.requests
    if repair and not shard.sound:
        _rebuild(keys, watcher, now)
        _place_all(node, keys)
        report.repaired = True
        report.set_aside += shard.set_aside
        again = RedisReport(place.crawl)
        _Crawl(node, url, tag, again, place).read_and_check(float(node.time()[0]))
        shard.notes += [f"left after repair: {finding}" for finding in again.findings]
    if repair:
        report.kept += len(keys.good)  # (a sound shard keeps every one too)
    report.notes += shard.notes
    watcher.reset()


def _rebuild(keys: _Crawl, pipe: Any, now: float) -> None:
    """Write every index and count of the crawl anew from its stored requests, in one transaction."""
    import redis.exceptions as rx

    report, k = keys.report, keys.key
    written, notes = mended(keys)
    report.notes += notes
    pipe.multi()
    for suffix in keys.renamed:
        pipe.rename(k(suffix), k(b"bad:" + suffix))
        report.set_aside.append(_name(k(b"bad:" + suffix)))
    if b"req" in keys.renamed:
        keys.good, keys.bad, keys.leased, keys.pending = {}, {}, set(), {}
    for suffix, bodies in ((b"req", keys.bad), (b"failed", keys.bad_failed)):
        for rid, body in bodies.items():
            pipe.hdel(k(suffix), rid)
            pipe.hset(k(b"bad"), suffix + b":" + rid, body)
            report.set_aside.append(f"{_name(k(b'bad'))} field {_name(suffix + b':' + rid)}")
    for rid in keys.bad_failed:
        pipe.hdel(k(b"failinfo"), rid)
    for rid in keys.failinfo.keys() - keys.failed.keys():
        pipe.hdel(k(b"failinfo"), rid)
    for rid in keys.failed.keys() - keys.bad_failed.keys():
        if len(keys.failinfo.get(rid, b"")) < 8:
            pipe.hset(k(b"failinfo"), rid, b"\0" * 8 + b"(its failure was lost; set again by verify --repair)")
    derived = [k(s) for s in (b"ready", b"wait", b"delayed", b"lease", b"owner")]
    derived += [k(b"q:" + host) for host in keys.queues]
    if b"hosts" in keys.renamed or keys.types.get(b"hosts", b"set") != b"set":
        derived.append(k(b"hosts"))
    pipe.delete(*derived)
    for rid in keys.leased:
        pipe.zadd(k(b"lease"), {rid: keys.lease[rid]})
        pipe.hset(k(b"owner"), rid, keys.owner[rid])
    delayed = 0
    for rid, stored in keys.pending.items():
        if stored.not_before > now:
            pipe.zadd(k(b"delayed"), {rid: stored.not_before})
            delayed += 1
        else:
            pipe.zadd(k(b"q:" + stored.host), {rid: -stored.priority})
    hosts = _hosts(keys)
    if hosts:
        pipe.sadd(k(b"hosts"), *hosts)
    pending_of = Counter(s.host for s in keys.pending.values())
    leased_of = Counter(keys.good[rid].host for rid in keys.leased)
    for host in hosts:
        fields = {} if b"h:" + host in keys.renamed else keys.host_hashes.get(host, {})
        pipe.hset(k(b"h:" + host), mapping={b"p": pending_of[host], b"i": leased_of[host]})
        garbage = [name for name in _HOST_NUMBERS[2:] if name in fields and _number(fields[name]) is None]
        pipe.hdel(k(b"h:" + host), b"r", *garbage)
    failed = len(keys.failed) - len(keys.bad_failed) if b"failed" not in keys.renamed else 0
    counts: dict[bytes, Any] = {b"pending": len(keys.pending), b"inflight": len(keys.leased), b"delayed": delayed,
                                b"failed": failed, b"sentinel": 1}
    counts.update(written)
    counts.update(recorded_losses(keys, pipe))
    if keys.meta.get(b"seen_layout") != b"bloom":
        counts[b"seen"] = keys.seen
    seq = _number(keys.meta.get(b"seq"))
    if seq is None or seq < keys.max_seq:
        counts[b"seq"] = keys.max_seq
    for name in _COUNTERS:
        value = keys.meta.get(name)
        if name not in counts and value is not None and not value.lstrip(b"-").isdigit():
            counts[name] = 0
    if b"paused" in keys.meta and not _is_time(keys.meta[b"paused"]):
        counts[b"paused"] = f"{now:.6f}"
    pipe.hset(k(b"meta"), mapping=counts)
    pipe.hdel(k(b"meta"), b"audited")
    pipe.set(k(b"sentinel"), keys.expected_sentinel)
    try:
        pipe.execute()
    except rx.WatchError:
        raise FrontierError(f"verify --repair: crawl {report.crawl!r} changed while it was being checked (a client "
                            f"is running): stop its clients and run verify --repair again") from None


def _hosts(keys: _Crawl) -> list[bytes]:
    """Every host the crawl knows of: in its hosts set, with a host hash, or with stored requests."""
    hosts = set(keys.hosts) | {s.host for s in keys.good.values()}
    hosts |= {h for h in keys.host_hashes if b"h:" + h not in keys.renamed}
    return sorted(hosts)


def _place_all(client: Any, keys: _Crawl) -> None:
    """Place every host again (ready or waiting) with the scripts' own rule, ``BATCH`` hosts a call."""
    script = client.register_script(lua.REPLACE)
    hosts = _hosts(keys)
    for chunk in _chunks(hosts, BATCH):
        script(keys=[keys.key(b"meta")], args=chunk)


def _chunks(items: list[bytes], size: int) -> Iterable[list[bytes]]:
    for at in range(0, len(items), size):
        yield items[at:at + size]
