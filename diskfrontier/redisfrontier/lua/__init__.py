"""The Lua scripts of the Redis backend: every step that touches more than one key is one script.

Each script is a ``.lua`` file of this package (``push.lua``, ``pop.lua``, ...), read with
``importlib.resources``; the code several scripts share is in fragments (``fragments/common.lua``,
``fragments/seen.lua``, ...). A script names the fragments it uses on a line of its header,
``-- uses: common, seen``, and is sent to Redis as those fragments, in that order, followed by its
own text (a fragment names the fragments it needs the same way, and they must come before it).
Redis numbers the lines of that whole text (``user_script:57``); ``where`` gives the file and line
they are, and ``connection.talking`` words a script's error with them. luacheck lints each file
knowing the names its fragments define (``.luacheckrc``). ``lua.PUSH`` is the text of ``push.lua``
as sent (what ``register_script`` takes); ``lua._COMMON`` the text of the fragment ``common``.

Keys of one crawl share the hash tag ``{crawl}``: ``KEYS[1]`` is ``df:{crawl}:meta`` and the
others are named from it (all in the same cluster slot). See ``docs/format.md``, "Redis".
A request's body in the ``req`` hash is ``>iBHd`` (priority, flags, attempts, not_before), a
slot (u8 length), a fingerprint (u8 length) and the msgpack request record. Its id is its
sequence number as 12 hex digits (2**48 - seq for LIFO), so that ids sort in queue order.
Times are the Redis server's clock (``TIME``), so every client agrees on delays and leases.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from ...core.errors import FrontierError

FRAGMENTS = "fragments"  # the folder of the fragments, in this package
_USES = re.compile(r"--\s*uses:(.*)")
_FRAGMENT_NAMES = {"_COMMON": "common", "_SEEN": "seen", "_DROP": "drop", "_CLIENTS": "clients"}


@dataclass(frozen=True)
class Part:
    """One file of an assembled script: where it starts in the script's text (line 1 first) and how many lines."""

    path: str  # relative to this package: "push.lua", "fragments/common.lua"
    first: int
    lines: int


@dataclass(frozen=True)
class Script:
    """A script as it is sent to Redis: its fragments and its own file, one after the other."""

    name: str
    text: str
    parts: tuple[Part, ...]

    @property
    def sha(self) -> str:
        """The SHA-1 Redis knows the script by (``EVALSHA``)."""
        return hashlib.sha1(self.text.encode("utf-8")).hexdigest()  # noqa: S324 - the name Redis gives it

    def where(self, line: int) -> str | None:
        """Line ``line`` of the text as ``lua/FILE:LINE`` (None if the text has no such line)."""
        for part in self.parts:
            if part.first <= line < part.first + part.lines:
                return f"lua/{part.path}:{line - part.first + 1}"
        return None


def _read(path: str) -> str:
    try:
        text = resources.files(__name__).joinpath(path).read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        raise FrontierError(f"the Lua file {path} of diskfrontier.redisfrontier.lua is missing: the package is "
                            f"incomplete, install diskfrontier again") from None
    return text if text.endswith("\n") else text + "\n"


def uses(text: str) -> list[str]:
    """The fragments a file's header names (``-- uses: a, b``), in order; none if it names none."""
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        found = _USES.match(line)
        if found:
            return [name.strip() for name in found.group(1).split(",") if name.strip()]
    return []


@functools.cache
def fragment(name: str) -> str:
    """The text of the fragment ``name`` (``fragments/NAME.lua``)."""
    return _read(f"{FRAGMENTS}/{name}.lua")


@functools.cache
def load(name: str) -> Script:
    """The script ``name`` (``NAME.lua``, lower case) assembled: the fragments it uses, then its own text."""
    path = f"{name}.lua"
    own = _read(path)
    parts: list[Part] = []
    texts: list[str] = []
    line = 1
    named = uses(own)
    for at, each in enumerate(named):
        text = fragment(each)
        missing = [need for need in uses(text) if need not in named[:at]]
        if missing:
            raise FrontierError(f"lua/{path}: the fragment {each} needs {', '.join(missing)} before it in its "
                                f"'-- uses:' line")
        parts.append(Part(f"{FRAGMENTS}/{each}.lua", line, text.count("\n")))
        texts.append(text)
        line += text.count("\n")
    parts.append(Part(path, line, own.count("\n")))
    texts.append(own)
    script = Script(name, "".join(texts), tuple(parts))
    _BY_SHA[script.sha] = script
    return script


_BY_SHA: dict[str, Script] = {}  # the scripts loaded in this process, by the name Redis knows them by


def where(sha: str, line: int) -> str | None:
    """Line ``line`` of the script Redis knows as ``sha`` as ``lua/FILE:LINE``; None if it is no script
    loaded here (or has no such line)."""
    script = _BY_SHA.get(sha)
    return None if script is None else script.where(line)


def names() -> list[str]:
    """The scripts of the package (the ``.lua`` files outside ``fragments/``), by name."""
    return sorted(entry.name[:-4] for entry in resources.files(__name__).iterdir()
                  if entry.name.endswith(".lua") and entry.is_file())


def __getattr__(name: str) -> str:
    """``PUSH``: the text of ``push.lua`` as sent to Redis; ``_COMMON``: the fragment ``common`` (PEP 562)."""
    if name in _FRAGMENT_NAMES:
        return fragment(_FRAGMENT_NAMES[name])
    if not name.isupper() or not resources.files(__name__).joinpath(f"{name.lower()}.lua").is_file():
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    text = load(name.lower()).text
    globals()[name] = text
    return text
