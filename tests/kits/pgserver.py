"""A real PostgreSQL server for the tests: a private cluster (``initdb`` + ``pg_ctl``) in a temporary folder,
listening on a free loopback port, stopped at the end of the session.

Debian keeps the server's programs in ``/usr/lib/postgresql/<version>/bin`` (not on PATH);
``DISKFRONTIER_PG_BINDIR`` names another folder. ``initdb`` and the server refuse to run as root: a test
run as root runs them as the ``postgres`` user the Debian package makes, in a folder that user owns.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable

import pytest
from serverprocess import PORT_TRIES, die_with_parent, free_port, wait_until_up


def pg_bindir() -> str | None:
    """The folder of ``initdb``, ``pg_ctl`` and ``postgres``, or None if the server is not installed."""
    chosen = os.environ.get("DISKFRONTIER_PG_BINDIR")
    if chosen:
        return chosen if os.path.exists(os.path.join(chosen, "initdb")) else None
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[-3]))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def require_pg_bindir() -> str:
    bindir = pg_bindir()
    if bindir is None:
        if os.environ.get("DISKFRONTIER_REQUIRE_POSTGRES"):
            pytest.fail("the PostgreSQL server is not installed (DISKFRONTIER_REQUIRE_POSTGRES is set: .ci/run "
                        "installs it)")
        pytest.skip("the PostgreSQL server is not installed (apt-get install postgresql)")
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        if os.environ.get("DISKFRONTIER_REQUIRE_POSTGRES"):
            pytest.fail("psycopg is not installed (pip install 'diskfrontier[postgres]')")
        pytest.skip("psycopg is not installed (pip install 'diskfrontier[postgres]')")
    return bindir


def _as_user(user: pwd.struct_passwd | None, then: Callable[[], None] | None) -> Callable[[], None] | None:
    """A preexec_fn that drops to ``user`` (None: stays who it is), then runs ``then``."""
    if user is None:
        return then

    def preexec() -> None:
        os.setgid(user.pw_gid)
        os.initgroups(user.pw_name, user.pw_gid)
        os.setuid(user.pw_uid)
        if then is not None:  # after the change of user, which clears a parent-death signal set before it
            then()

    return preexec


class PgServer:
    """One private PostgreSQL cluster: ``start()`` makes it (first time) and starts it, ``stop()`` stops it
    (``pg_ctl stop -m fast``), ``restart_immediate()`` is ``pg_ctl restart -m immediate`` (a crash and a
    recovery from the WAL). The server dies with the thread that started it, however the test process ends.
    """

    def __init__(self, folder: str | None = None) -> None:
        self.bindir = require_pg_bindir()
        self.user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        self.folder = folder or tempfile.mkdtemp(prefix="df-pg-")
        os.makedirs(self.folder, exist_ok=True)
        if self.user is not None:
            os.chmod(self.folder, 0o700)
            os.chown(self.folder, self.user.pw_uid, self.user.pw_gid)
        self.data = os.path.join(self.folder, "data")
        self.log = os.path.join(self.folder, "server.log")
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def role(self) -> str:
        return self.user.pw_name if self.user is not None else pwd.getpwuid(os.geteuid()).pw_name

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.role}@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        done = subprocess.run([os.path.join(self.bindir, args[0]), *args[1:]], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, preexec_fn=_as_user(self.user, None), cwd=self.folder)
        if done.returncode:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")

    def _initdb(self) -> None:
        self._run("initdb", "-D", self.data, "-A", "trust", "-E", "UTF8", "--locale=C", "-U", self.role)
        with open(os.path.join(self.data, "pg_hba.conf"), "w") as f:  # trust on loopback and the socket only
            f.write("local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n")

    def start(self, timeout: float = 60.0) -> None:
        """Make the cluster if it is not made, start the server and wait until it takes connections."""
        if not os.path.exists(os.path.join(self.data, "PG_VERSION")):
            self._initdb()
        for _ in range(PORT_TRIES if self.proc is None else 1):
            if self._start(timeout):
                return
            self.port = free_port()
        raise RuntimeError(f"postgres found no free port in {PORT_TRIES} tries")

    def _start(self, timeout: float) -> bool:
        with open(self.log, "a") as f:
            f.write(f"-- start on port {self.port}\n")
            begun = f.tell()
        if self.user is not None:
            os.chown(self.log, self.user.pw_uid, self.user.pw_gid)
        args = [os.path.join(self.bindir, "postgres"), "-D", self.data, "-p", str(self.port),
                "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.folder}",
                "-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "max_connections=200",
                "-c", "shared_buffers=64MB", "-c", "logging_collector=off"]
        log = open(self.log, "a")  # noqa: SIM115  # the child keeps it
        try:
            self.proc = subprocess.Popen(args, stdout=log, stderr=log, cwd=self.folder,
                                         preexec_fn=_as_user(self.user, die_with_parent()))
        finally:
            log.close()
        return wait_until_up(self.proc, self.log, begun, self._answers,
                             taken=("could not bind", "Address already in use"), name="postgres",
                             never="did not take connections", timeout=timeout, poll=0.05)

    def _answers(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url(), connect_timeout=2) as conn:
                return conn.execute("select pg_backend_pid()").fetchone() is not None
        except psycopg.OperationalError:
            return False

    def create_database(self, name: str) -> str:
        """Make the database ``name`` (dropping any older one); its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')
            conn.execute(f'create database "{name}"')
        return self.url(name)

    def drop_schemas(self, database: str) -> None:
        """Drop every crawl of ``database`` (its ``df_`` schemas)."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            names = [row[0] for row in conn.execute(
                "select nspname from pg_namespace where nspname like 'df\\_%'").fetchall()]
            for name in names:
                conn.execute(f'drop schema "{name}" cascade')

    def kill(self) -> None:
        """SIGKILL the postmaster (its backends end when they find it gone)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def restart_immediate(self) -> None:
        """``pg_ctl restart -m immediate``'s effect: the server stops without a checkpoint (as in a crash) and
        starts again on the same port, recovering from its WAL."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # immediate shutdown
            self.proc.wait(60)
        self._start(60.0)

    def stop(self) -> None:
        """``pg_ctl stop -m fast``; a SIGKILL if that does not end it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self._run("pg_ctl", "stop", "-D", self.data, "-m", "fast", "-w", "-t", "30")
            self.proc.wait(30)
        except (RuntimeError, subprocess.TimeoutExpired):
            self.kill()

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
