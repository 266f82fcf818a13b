"""crawl() and acrawl() share their options, their checks and messages, their signal handling and their log
lines: each bad option refused by both with the same message, each function's own options refused by the
other as Python refuses an unknown keyword, the typed keywords the same as the options, real signals taken
the same way by both installers, and the same line at the end of a run."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import re
import subprocess
import sys
from typing import Any

import pytest

from diskfrontier import Frontier, Request, Revisit, RunOptions, acrawl, crawl
from diskfrontier.run.options import RunKeywords

RUNNERS = ["crawl", "acrawl"]


def plain(request, frontier):
    pass


async def coroutine(request, frontier):
    pass


def refusal(runner: str, frontier: Frontier, options: dict) -> BaseException:
    """What ``runner`` raises when called with ``options`` (an AssertionError if it raises nothing)."""
    try:
        if runner == "crawl":
            crawl(frontier, plain, progress=False, **options)
        else:
            asyncio.run(acrawl(frontier, coroutine, progress=False, **options))
    except (TypeError, ValueError) as exc:
        return exc
    raise AssertionError(f"{runner}() took {options}")


# the messages both functions gave before they shared their options; {f} is the function's name
BAD: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"workers": 0}, ValueError, "{f}(): workers must be a whole number of at least 1, got 0"),
    ({"workers": None}, ValueError, "{f}(): workers must be a whole number of at least 1, got None"),
    ({"duration": -1}, ValueError, "{f}(): duration must be a number of at least 0 or None, got -1"),
    ({"max_requests": 1.5}, ValueError, "{f}(): max_requests must be a whole number of at least 1 or None, got 1.5"),
    ({"retries": True}, ValueError, "{f}(): retries must be a whole number of at least 0, got True"),
    ({"backoff": float("nan")}, ValueError, "{f}(): backoff must be a number of at least 0, got nan"),
    ({"grace": -0.5}, ValueError, "{f}(): grace must be a number of at least 0 or None, got -0.5"),
    ({"progress_every": 0}, ValueError, "{f}(): progress_every must be a number of at least 0.1, got 0"),
    ({"classify": 3}, TypeError,
     "{f}(): classify must be a function (request, error) -> 'retry', 'fail', 'backoff' or None, got 3"),
    ({"host_errors": 0}, ValueError, "{f}(): host_errors must be a whole number of at least 1 or None, got 0"),
    ({"host_backoff": -1.0}, ValueError, "{f}(): host_backoff must be a number of at least 0, got -1.0"),
    ({"host_backoff_max": float("inf")}, ValueError, "{f}(): host_backoff_max must be a number of at least 0, got inf"),
    ({"robots": "yes"}, TypeError, "{f}(): robots must be True or False, got 'yes'"),
    ({"robots_ttl": None}, ValueError, "{f}(): robots_ttl must be a number of at least 0, got None"),
    ({"robots_timeout": 0}, ValueError, "{f}(): robots_timeout must be a number of at least 0.001, got 0"),
    ({"fetch_robots": "urllib"}, TypeError,
     "{f}(): fetch_robots must be a function (url, user_agent) -> (status, body), got 'urllib'"),
    ({"robots": True}, ValueError, "{f}(): robots=True needs user_agent=, the name your crawler gives in User-agent "
                                   "(the robots.txt rules for it are obeyed), e.g. user_agent='mybot/1.0'"),
    ({"robots": True, "user_agent": "  "}, ValueError, "{f}(): robots=True needs user_agent=, the name your crawler "
     "gives in User-agent (the robots.txt rules for it are obeyed), e.g. user_agent='mybot/1.0'"),
    ({"revisit": {"min": 60}}, TypeError, "{f}(): revisit must be a diskfrontier.Revisit or None, got {{'min': 60}}"),
    ({"worker": 8}, TypeError, "{f}() got an unexpected keyword argument 'worker'"),
]


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize(("options", "kind", "message"), BAD, ids=[" ".join(bad[0]) for bad in BAD])
def test_a_bad_option_is_refused_by_both_with_the_same_message(tmp_path, runner, options, kind, message):
    with Frontier(tmp_path / "job") as frontier:
        frontier.push(Request("https://a.example/"))
        error = refusal(runner, frontier, options)
        assert len(frontier) == 1  # refused before anything was taken
    assert type(error) is kind
    assert str(error) == message.format(f=runner)


@pytest.mark.parametrize(("runner", "options"), [("crawl", {"setup": None}), ("acrawl", {"every": 1.0}),
                                                 ("acrawl", {"times": 2})])
def test_each_refuses_the_others_own_options_as_python_refuses_a_keyword(tmp_path, runner, options):
    with Frontier(tmp_path / "job") as frontier:
        error = refusal(runner, frontier, options)
    assert type(error) is TypeError
    assert str(error) == f"{runner}() got an unexpected keyword argument {next(iter(options))!r}"


def test_the_typed_keywords_are_the_options_with_their_types():
    typed = {name: getattr(kind, "__forward_arg__", kind) for name, kind in RunKeywords.__annotations__.items()}
    assert typed == {field.name: field.type for field in dataclasses.fields(RunOptions)}
    assert RunKeywords.__optional_keys__ == frozenset(typed)  # every option may be left out


def test_a_good_set_of_options_is_taken_by_both(tmp_path):
    options: dict[str, Any]
    options = {"workers": 2, "duration": 30, "max_requests": 5, "retries": 0, "backoff": 0, "grace": None,
               "classify": lambda request, error: None, "host_errors": None, "host_backoff": 1, "host_backoff_max": 2,
               "robots": False, "user_agent": "testbot/1.0", "robots_ttl": 0, "fetch_robots": None,
               "robots_timeout": 0.001, "revisit": Revisit(), "progress_every": 0.1}
    assert set(options) | {"progress"} == {field.name for field in dataclasses.fields(RunOptions)}
    with Frontier(tmp_path / "job") as frontier:
        frontier.push_many(Request(f"https://a.example/{n}") for n in range(3))
        first = crawl(frontier, plain, progress=False, **options)
        frontier.push_many(Request(f"https://b.example/{n}") for n in range(3))
        second = asyncio.run(acrawl(frontier, coroutine, progress=False, **options))
    assert [(stats.stopped_by, stats.done) for stats in (first, second)] == [("finished", 3), ("finished", 3)]


def test_both_end_a_run_with_the_same_log_line(tmp_path, caplog):
    with Frontier(tmp_path / "job") as frontier, caplog.at_level(logging.INFO, logger="diskfrontier"):
        frontier.push_many(Request(f"https://a.example/{n}") for n in range(3))
        crawl(frontier, plain, workers=2, progress=False)
        frontier.push_many(Request(f"https://b.example/{n}") for n in range(3))
        asyncio.run(acrawl(frontier, coroutine, workers=2, progress=False))
    ended = [record.getMessage() for record in caplog.records if " ended (" in record.getMessage()]
    assert [line.split(" ended ")[0] for line in ended] == ["run 1", "acrawl"]
    shapes = {re.sub(r"[\d.]+ a second$", "N a second", line.split(" ended ")[1]) for line in ended}
    assert shapes == {"(finished): 3 handled, 3 done, 0 retried, 0 failed (0 at once), 0 host blocks, N a second"}


SIGNALS_CHILD = """
import asyncio, json, os, signal, sys
from diskfrontier.run.signals import StopSignals

installer, first = sys.argv[1], getattr(signal, sys.argv[2])
calls = []
stop = StopSignals(lambda name: calls.append(name), lambda: calls.append("again"))


def handlers():
    return [signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)]


def in_main_thread():
    with stop.in_main_thread():
        for number in (first, signal.SIGINT):
            os.kill(os.getpid(), number)  # its handler runs before the next line


async def on_loop():
    with stop.on_loop(asyncio.get_running_loop()):
        for count, number in enumerate((first, signal.SIGINT), 1):
            os.kill(os.getpid(), number)
            for _ in range(1000):  # the loop runs its handler soon after
                if len(calls) == count:
                    break
                await asyncio.sleep(0.01)


async def around(run):
    before = handlers()
    if asyncio.iscoroutinefunction(run):
        await run()
    else:
        run()
    return before == handlers()


put_back = asyncio.run(around(in_main_thread if installer == "main thread" else on_loop))
print(json.dumps({"calls": calls, "put back": put_back}))
"""


@pytest.mark.parametrize("installer", ["main thread", "loop"])
@pytest.mark.parametrize("first", ["SIGINT", "SIGTERM"])
def test_both_installers_take_a_first_signal_then_a_second_ctrl_c_and_put_back_what_they_found(installer, first):
    out = subprocess.run([sys.executable, "-c", SIGNALS_CHILD, installer, first], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == {"calls": [first, "again"], "put back": True}


def test_the_guide_names_every_option():
    guide = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "guide", "crawl.md")
    with open(guide, encoding="utf-8") as f:
        section = f.read().split("## Its options\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", section.split("[`RunOptions`]", 1)[0]))
    assert named == {field.name for field in dataclasses.fields(RunOptions)}
