"""``HostTable``: every host's name, counts and last hand-out in flat arrays, about 60 bytes a host.

A crawl may know millions of hosts, most of them with a few pending requests and
nothing else going on. A Python object and a dict entry per host would cost ~250 bytes
each; here a host is an id into arrays: its name's bytes in one shared buffer, its
pending, in-flight and done counts, and its hash, found through an open-addressing
table of ids. Only the hosts that politeness is working on (requests buffered or in
flight under host rules, or a setting) also have a ``Host`` object (``politeness/schedule.py``).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

_EMPTY = -1
_HASH_MASK = 0xFFFFFFFF
_RECENT = 4096  # names looked up lately, kept in a dict for speed (emptied when full)


class HostTable:
    """Host names and their pending, in-flight and done counts, by id (ids are never reused)."""

    __slots__ = ("_blob", "_ends", "_hashes", "_slots", "_mask", "recent", "pending", "inflight", "done", "last")

    def __init__(self) -> None:
        self._blob = bytearray()  # every name, UTF-8, one after the other
        self._ends = array("Q")  # where each id's name ends in the blob
        self._hashes = array("I")  # the low 32 bits of hash() of each id's name bytes
        self._slots = array("i", [_EMPTY]) * 8  # ids by hash, open addressing, at most 3/4 full
        self._mask = 7
        # name -> id of the names looked up lately (a crawl's pushes and pops come back to the same
        # hosts); a hit here is the quick way, ``add`` the sure one
        self.recent: dict[bytes, int] = {}
        self.pending = array("I")
        self.inflight = array("I")
        self.done = array("Q")
        self.last = array("d")  # when each host last had a request handed out (time.time(); 0: never)

    def __len__(self) -> int:
        return len(self._ends)

    def find(self, name: bytes) -> int:
        """The id of the host whose name is ``name`` (UTF-8), or -1."""
        return self._probe(name, hash(name) & _HASH_MASK)[0]

    def _probe(self, name: bytes, h: int) -> tuple[int, int]:
        """(the id of ``name`` or -1, the slot where the search ended)."""
        slots, mask, hashes = self._slots, self._mask, self._hashes
        i = h & mask
        while True:
            hid = slots[i]
            if hid == _EMPTY or (hashes[hid] == h and self.name_bytes(hid) == name):
                return hid, i
            i = (i + 1) & mask

    def add(self, name: bytes) -> int:
        """The id of the host ``name`` (UTF-8), added with zero counts if it is new."""
        recent = self.recent
        hid = recent.get(name)
        if hid is not None:
            return hid
        if len(recent) >= _RECENT:
            recent.clear()
        hid = recent[name] = self._add(name)
        return hid

    def _add(self, name: bytes) -> int:
        h = hash(name) & _HASH_MASK
        hid, i = self._probe(name, h)
        if hid != _EMPTY:
            return hid
        hid = len(self._ends)
        self._blob += name
        self._ends.append(len(self._blob))
        self._hashes.append(h)
        self.pending.append(0)
        self.inflight.append(0)
        self.done.append(0)
        self.last.append(0.0)
        self._slots[i] = hid
        if 4 * len(self._ends) > 3 * self._mask:
            self._grow()
        return hid

    def _grow(self) -> None:
        self._mask = 2 * (self._mask + 1) - 1
        self._place_all(check=False)

    def _place_all(self, *, check: bool) -> None:
        """Fill a new slot table of ``_mask + 1`` slots; ``check``: raise ValueError for a name seen twice."""
        mask = self._mask
        slots = array("i", [_EMPTY]) * (mask + 1)
        hashes = self._hashes
        for hid, h in enumerate(hashes):
            i = h & mask
            while (other := slots[i]) != _EMPTY:
                if check and hashes[other] == h and self.name_bytes(other) == self.name_bytes(hid):
                    raise ValueError(f"the host name {self.name(hid)!r} appears twice")
                i = (i + 1) & mask
            slots[i] = hid
        self._slots = slots

    def name_bytes(self, hid: int) -> bytes:
        start = self._ends[hid - 1] if hid else 0
        return bytes(self._blob[start:self._ends[hid]])

    def name(self, hid: int) -> str:
        """The name of host ``hid``."""
        return self.name_bytes(hid).decode("utf-8", "replace")

    def ids(self) -> Iterator[int]:
        return iter(range(len(self._ends)))

    # ------------------------------------------------------------------ persistence
    def parts(self) -> tuple[bytes, array, array, array]:
        """(names blob, name ends, pending, done) for the host file (nothing is in flight at a close)."""
        return bytes(self._blob), self._ends, self.pending, self.done

    @classmethod
    def from_parts(cls, blob: bytes | bytearray, ends: array, pending: array, done: array) -> HostTable:
        """The inverse of ``parts``; raises ValueError if they do not fit together."""
        if not len(ends) == len(pending) == len(done):
            raise ValueError("the host arrays do not have the same length")
        previous = 0
        for end in ends:
            if end < previous:
                raise ValueError("the host names' ends are not in order")
            previous = end
        if previous != len(blob):
            raise ValueError("the host names do not fill their buffer")
        table = cls()
        table._blob = blob if isinstance(blob, bytearray) else bytearray(blob)
        table._ends = ends
        table.pending, table.done = pending, done
        table.inflight = array("I", bytes(4 * len(ends)))
        table.last = array("d", bytes(8 * len(ends)))
        hashes = table._hashes
        start = 0
        for end in ends:
            hashes.append(hash(bytes(blob[start:end])) & _HASH_MASK)
            start = end
        size = 8
        while 3 * size < 4 * len(ends) + 4:
            size *= 2
        table._mask = size - 1
        table._place_all(check=True)
        return table
