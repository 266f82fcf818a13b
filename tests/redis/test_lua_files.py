"""The Redis backend's scripts as ``.lua`` files of the package: shipped with it, assembled from the fragments each
names, and a script's error named by its file and line."""

from __future__ import annotations

import os
from importlib import resources

import pytest
from paths import REPO

from diskfrontier import FrontierError, RedisFrontier
from diskfrontier.redisfrontier import lua
from diskfrontier.redisfrontier.connection import talking

SOURCE = os.path.join(REPO, "diskfrontier", "redisfrontier", "lua")


def _source_files() -> set[str]:
    found = set()
    for folder, _dirs, files in os.walk(SOURCE):
        found |= {os.path.relpath(os.path.join(folder, name), SOURCE).replace(os.sep, "/")
                  for name in files if name.endswith(".lua")}
    return found


def _package_files() -> set[str]:
    root = resources.files("diskfrontier.redisfrontier.lua")
    found = {entry.name for entry in root.iterdir() if entry.name.endswith(".lua")}
    return found | {f"fragments/{entry.name}" for entry in root.joinpath("fragments").iterdir()
                    if entry.name.endswith(".lua")}


def _file_lines(path: str) -> list[str]:
    return resources.files("diskfrontier.redisfrontier.lua").joinpath(path).read_text(encoding="utf-8").splitlines()


def _line_of(path: str, text: str) -> int:
    """The number of the one line of ``path`` (in the package) that holds ``text``."""
    found = [number for number, line in enumerate(_file_lines(path), 1) if text in line]
    assert len(found) == 1, (path, text, found)
    return found[0]


def test_the_package_as_imported_has_every_lua_file_of_the_source():
    # Under .ci/run the package is the installed wheel's: its package data must hold every script and fragment.
    files = _source_files()
    assert {"push.lua", "pop.lua", "host_failed.lua", "fragments/common.lua", "fragments/seen.lua"} <= files
    assert files - _package_files() == set()
    assert lua.names() == sorted(name[:-4] for name in files if "/" not in name)


def test_each_line_of_a_script_as_sent_is_named_by_its_file_and_line():
    for name in lua.names():
        script = lua.load(name)
        lines = script.text.splitlines()
        own = "\n".join(_file_lines(f"{name}.lua"))
        assert [part.path for part in script.parts] == [*(f"fragments/{each}.lua" for each in lua.uses(own)),
                                                        f"{name}.lua"]
        for number, line in enumerate(lines, 1):
            place = script.where(number)
            assert place is not None and place.startswith("lua/"), (name, number)
            path, _, at = place[len("lua/"):].rpartition(":")
            assert _file_lines(path)[int(at) - 1] == line, (name, number, place)
        assert script.where(len(lines) + 1) is None and script.where(0) is None
        assert getattr(lua, name.upper()) == script.text


def test_the_fragments_and_the_scripts_are_the_modules_texts():
    assert [name for name in ("seen", "drop", "clients") if lua.uses(lua.fragment(name)) == ["common"]] == [
        "seen", "drop", "clients"]  # each names what it needs: a script that uses it names that first
    assert lua.fragment("common") == lua._COMMON and lua.fragment("seen") == lua._SEEN
    assert lua.load("push").text == lua.fragment("common") + lua.fragment("seen") + "\n".join(
        _file_lines("push.lua")) + "\n"
    with pytest.raises(AttributeError):
        lua.NO_SUCH_SCRIPT  # noqa: B018


def test_a_script_error_names_the_lua_file_and_its_line(redis_server, redis_url, crawl_name):
    with RedisFrontier(redis_url, crawl=crawl_name, dedupe="exact"):
        pass
    meta = f"df:{{{crawl_name}}}:meta"
    client = redis_server.client()

    def error_of(name: str, args: list) -> str:
        script = client.register_script(getattr(lua, name))
        with pytest.raises(FrontierError) as caught, talking(redis_url, name.lower()):
            script(keys=[meta], args=args)
        return str(caught.value)

    # a Lua error in the script's own file: a count that is not a number
    line = _line_of("push.lua", "for k = 0, n - 1 do")
    assert f"answered with an error: lua/push.lua:{line}: attempt to perform arithmetic on local 'n'" in error_of(
        "PUSH", ["x"])
    # one in a fragment: a seen value that is not a number (the crawl keeps 64-bit keys)
    line = _line_of("fragments/seen.lua", "local b = low % (2 ^ SEEN.level)")
    assert f"answered with an error: lua/fragments/seen.lua:{line}: attempt to perform arithmetic" in error_of(
        "MARK_SEEN", [1, "1", "x"])
    # an error a Redis command gave, raised again by the fragment's call(): the place Redis names, in brackets
    line = _line_of("fragments/common.lua", "    error(r)")
    message = error_of("SET_DONE", ["a.example"])
    assert message.endswith(f"must be strings or integers (in lua/fragments/common.lua:{line})"), message
    # a script of no file (made here): Redis's own words, its place dropped
    with pytest.raises(FrontierError) as caught, talking(redis_url, "eval"):
        client.eval("local n = nil\nreturn n + 1", 0)
    assert str(caught.value).endswith("answered with an error: user_script:2: attempt to perform arithmetic on "
                                      "local 'n' (a nil value)")
