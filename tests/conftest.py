import os
import sys
import threading


def pytest_report_header(config):
    # Which diskfrontier is under test: the source tree, or an installed wheel (.ci/run).
    try:
        import diskfrontier
    except Exception as exc:  # reported again, in full, by the tests that import it
        return f"diskfrontier: not importable ({exc!r})"
    return f"diskfrontier: {os.path.dirname(os.path.realpath(diskfrontier.__file__))}"


if os.environ.get("DISKFRONTIER_TEST_POLITE"):
    # The behaviour suite again with the host layer on (per_host set, so pop goes through the
    # per-host buffers and heaps) but holding nothing back: every promise must still hold.
    import diskfrontier.jobdir.frontier as _frontier

    _plain_init = _frontier.Frontier.__init__

    def _polite_init(self, *args, **kwargs):
        kwargs.setdefault("per_host", 1 << 30)
        _plain_init(self, *args, **kwargs)

    _frontier.Frontier.__init__ = _polite_init  # type: ignore[method-assign]  # the patch is the point


# ------------------------------------------------------------------ Ctrl-C, SIGTERM and child processes
import itertools as _itertools  # noqa: E402
import signal as _signal  # noqa: E402
import subprocess as _subprocess  # noqa: E402
from collections.abc import Callable as _Callable  # noqa: E402
from types import FrameType as _FrameType  # noqa: E402
from typing import Any as _Any  # noqa: E402

import pytest  # noqa: E402

# Every process the tests start (redis-server, crawl and Scrapy children, the diskfrontier script,
# pip) joins one process group led by a watchdog. The watchdog reads a pipe whose write end only
# this pytest process holds: however pytest ends (a clean exit, Ctrl-C, SIGTERM, SIGKILL, a crash)
# the pipe reaches end-of-file and the watchdog kills the whole group, grandchildren included.
# Outside the terminal's foreground group, the children do not get the Ctrl-C meant for pytest
# either (a redis-server stopped by it would fail every Redis test after it).
# In a distributed run (pytest -n) the same holds one floor up: the controller's watchdog leads
# the group of its workers (and passes them its SIGINT or SIGTERM); each worker, a pytest of its
# own, has its own watchdog leading the group of the processes its tests start.
_WATCHDOG = """
import os, signal
for name in ("SIGINT", "SIGTERM", "SIGHUP"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
while os.read(0, 4096):
    pass
os.killpg(0, signal.SIGKILL)
"""

_watchdog: _subprocess.Popen | None = None
_watchdog_pipe: int | None = None
_children_group: int | None = None
_forwards = False  # the controller of a distributed run: signals go on to its workers
_signals_came: list[str] = []  # SIGINT or SIGTERM, once one came: the run is over
_Handler = _Callable[[int, _FrameType | None], _Any] | int | None  # what signal.getsignal() returns
_saved_handlers: dict[int, _Handler] = {}
_wakeup: tuple[int, int] | None = None  # the pipe every caught signal writes its number to
_saved_wakeup = -1


def _group_kwargs(group: int) -> dict:
    """Popen arguments that put the child in process group ``group`` (0: a new group of its own)."""
    if sys.version_info >= (3, 11):
        return {"process_group": group}
    return {"preexec_fn": lambda: os.setpgid(0, group)}


_PlainPopen = _subprocess.Popen


class _GroupedPopen(_PlainPopen):
    """``subprocess.Popen`` (and so ``run``, ``check_output``...) putting the child in the
    watchdog's group, unless the caller chose a group or a session itself."""

    def __init__(self, *args, **kwargs):
        chose = kwargs.get("process_group") is not None or kwargs.get("start_new_session")
        if _children_group is not None and not chose:
            group = _group_kwargs(_children_group)
            if "preexec_fn" in group and kwargs.get("preexec_fn") is not None:
                first, then = group["preexec_fn"], kwargs["preexec_fn"]
                group["preexec_fn"] = lambda: (first(), then())
            kwargs.update(group)
        super().__init__(*args, **kwargs)


def _interrupt(signum, frame):
    """SIGINT and SIGTERM: a KeyboardInterrupt, so that pytest stops with its summary, exit code 2,
    after the fixtures' teardown (the session's redis-server is stopped). The controller of a
    distributed run (pytest-xdist) passes the signal on to its workers first: they run the tests
    and sit in the watchdog's group, out of reach of the terminal's Ctrl-C and of a plain
    ``kill``."""
    _signals_came.append(_signal.Signals(signum).name)
    if _forwards and _children_group is not None:
        os.killpg(_children_group, signum)  # the watchdog ignores it; each worker takes it once
    raise KeyboardInterrupt(_signal.Signals(signum).name)


def _distributing(config) -> bool:
    """Whether this process is the controller of a pytest-xdist run: it starts the workers and
    runs no test itself."""
    return not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") != "no" and bool(
        getattr(config.option, "tx", None))


def pytest_configure(config):
    global _watchdog, _watchdog_pipe, _children_group, _forwards
    read_end, _watchdog_pipe = os.pipe()  # not inheritable: no child holds the write end
    _watchdog = _subprocess.Popen([sys.executable, "-c", _WATCHDOG], stdin=read_end,
                                  **_group_kwargs(0))
    os.close(read_end)
    _children_group = _watchdog.pid
    _forwards = _distributing(config)  # the workers it starts join the group as any child does
    _subprocess.Popen = _GroupedPopen  # type: ignore[misc]  # every child joins the group
    if threading.current_thread() is threading.main_thread():
        global _wakeup, _saved_wakeup
        for signum in (_signal.SIGINT, _signal.SIGTERM):
            _saved_handlers[signum] = _signal.signal(signum, _interrupt)
        # A signal that a test's own handler took (an in-process crawl() stops on SIGINT) is seen
        # here all the same: Python writes the number of every signal it catches to this pipe.
        _wakeup = os.pipe()
        for fd in _wakeup:
            os.set_blocking(fd, False)
        _saved_wakeup = _signal.set_wakeup_fd(_wakeup[1], warn_on_full_buffer=False)


def pytest_unconfigure(config):
    global _watchdog, _watchdog_pipe, _children_group, _wakeup
    for signum, handler in _saved_handlers.items():
        _signal.signal(signum, handler)
    _saved_handlers.clear()
    if _wakeup is not None:
        _signal.set_wakeup_fd(_saved_wakeup)
        for fd in _wakeup:
            os.close(fd)
        _wakeup = None
    _subprocess.Popen = _PlainPopen  # type: ignore[misc]
    _children_group = None
    if _watchdog_pipe is not None:
        os.close(_watchdog_pipe)  # the watchdog kills whatever a test left running, then itself
        _watchdog_pipe = None
    if _watchdog is not None:
        _watchdog.wait(10)
        _watchdog = None


def _handlers() -> dict[int, _Handler]:
    """The handler of every signal but SIGALRM (pytest-timeout's: it sets and clears it around
    each test, and clears it early when a test fails)."""
    out: dict[int, _Handler] = {}
    for signum in _signal.valid_signals():
        if signum not in (_signal.SIGKILL, _signal.SIGSTOP, _signal.SIGALRM):
            out[signum] = _signal.getsignal(signum)
    return out


def _signal_came_since(count: int) -> bool:
    """Whether a SIGINT or SIGTERM came since ``_signals_came`` held ``count`` names, to this
    conftest's handler or to one a test installed."""
    if _wakeup is not None:
        _signal.set_wakeup_fd(_wakeup[1], warn_on_full_buffer=False)  # in case a test moved it
        try:
            numbers = os.read(_wakeup[0], 4096)
        except BlockingIOError:
            numbers = b""
        if len(_signals_came) == count:
            _signals_came.extend(_signal.Signals(n).name for n in numbers if n in (_signal.SIGINT, _signal.SIGTERM))
    return len(_signals_came) > count


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A Ctrl-C or SIGTERM that the test swallowed (some raise and catch KeyboardInterrupt on
    purpose; an in-process crawl() takes SIGINT as "stop the crawl") still ends the run."""
    _signal_came_since(len(_signals_came))  # empty the pipe
    came = len(_signals_came)
    try:
        result = yield
    except KeyboardInterrupt:
        raise
    except BaseException:
        if _signal_came_since(came):
            raise KeyboardInterrupt(_signals_came[-1]) from None
        raise
    if _signal_came_since(came):
        raise KeyboardInterrupt(_signals_came[-1])
    return result


@pytest.fixture(autouse=True)
def _signal_handlers_restored():
    """Every test leaves the signal handlers as it found them: an in-process crawl() or CLI run
    installs its own for SIGINT and SIGTERM and must put the previous ones back, or a Ctrl-C
    would no longer stop the run."""
    before = _handlers()
    yield
    if _signals_came:  # an interrupted run tears its fixtures down after pytest-timeout's own
        return
    after = _handlers()
    changed = {signum: (before[signum], after[signum]) for signum in before if after[signum] != before[signum]}
    for signum, (handler, _) in changed.items():
        _signal.signal(signum, handler)
    assert not changed, "the test left signal handlers changed: " + ", ".join(
        f"{_signal.Signals(signum).name} {old!r} -> {new!r}" for signum, (old, new) in changed.items())


# ------------------------------------------------------------------ distributed runs (pytest -n)
_SHARED_SCOPES = ("module", "class", "package")


def pytest_itemcollected(item):
    """Tests that share a fixture built once for their file (a Redis Cluster, a built wheel, a
    browser, a job directory that they only read) run on one worker of a distributed run
    (``--dist loadgroup``), so that it is built once: each gets the group of its file. A
    session's fixtures (the redis-server) are per worker."""
    if not item.config.pluginmanager.hasplugin("xdist"):
        return
    fixtures = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(definitions[-1].scope in _SHARED_SCOPES for definitions in fixtures.values()):
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


# ------------------------------------------------------------------ everyday and full volumes
@pytest.hookimpl(trylast=True)  # after -m and -k have deselected what they leave out
def pytest_collection_modifyitems(config, items):
    """A campaign in two forms (``volume.forms``: a short one for the everyday run, the full one
    marked slow) runs only its full form where both are selected: the full one does all that the
    short one does."""
    selected = {item.nodeid for item in items}
    covered = [item for item in items if item.get_closest_marker("everyday_form") is not None
               and _full_form(item.nodeid) in selected]
    if covered:
        config.hook.pytest_deselected(items=covered)
        left = set(map(id, covered))
        items[:] = [item for item in items if id(item) not in left]


def _full_form(nodeid: str) -> str:
    name, _, params = nodeid.partition("[")
    return f"{name}[{params.replace('everyday', 'full')}"


# ------------------------------------------------------------------ a real redis-server

_crawls = _itertools.count()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """One redis-server for the session (AOF on, fsync every second), stopped at the end."""
    from redisserver import RedisServer

    server = RedisServer(str(tmp_path_factory.mktemp("redis")))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server):
    """The session server's URL, with its data flushed before the test."""
    redis_server.client().flushall()
    return redis_server.url


@pytest.fixture
def crawl_name():
    """A crawl name no other test uses."""
    return f"t{next(_crawls)}"


# ------------------------------------------------------------------ a real PostgreSQL server

@pytest.fixture(scope="session")
def postgres_server():
    """One private PostgreSQL cluster for the session (each pytest-xdist worker has its own), with a database
    of its own; stopped (``pg_ctl stop -m fast``) and removed at the end."""
    from pgserver import PgServer

    server = PgServer()
    try:
        server.start()
        server.create_database("diskfrontier")
        yield server
    finally:
        server.stop()
        server.remove()


@pytest.fixture
def postgres_url(postgres_server):
    """The session server's database URL, with every crawl dropped before the test."""
    postgres_server.drop_schemas("diskfrontier")
    return postgres_server.url("diskfrontier")
