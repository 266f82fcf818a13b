"""Worker processes that hold leases of a crawl on a server (Redis or PostgreSQL) for the tests of ``clients``
and ``release``: each leases HOLD requests, says its client id, and then works on them for ever (its leases are
renewed in the background while it runs), until the test kills (SIGKILL) or freezes (SIGSTOP) it."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

HOLDER = textwrap.dedent("""
    import sys, time
    from diskfrontier import PostgresFrontier, RedisFrontier
    backend = {"redis": RedisFrontier, "postgres": PostgresFrontier}[sys.argv[1]]
    f = backend(sys.argv[2], crawl=sys.argv[3], lease=float(sys.argv[4]))
    held = f.pop_many(int(sys.argv[5]))
    assert len(held) == int(sys.argv[5]), held
    print(f.client_id, flush=True)
    time.sleep(3600)
""")


class Workers:
    """Worker processes of ``backend`` ("redis" or "postgres"), each holding leases; every one is killed at the
    end."""

    def __init__(self, backend: str, url: str, crawl: str) -> None:
        self.backend, self.url, self.crawl = backend, url, crawl
        self.procs: list[subprocess.Popen] = []

    def start(self, hold: int, lease: float) -> tuple[subprocess.Popen, str]:
        """A worker holding ``hold`` requests with leases of ``lease`` seconds: its process and client id."""
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, self.backend, self.url, self.crawl, str(lease),
                                 str(hold)], stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        assert proc.stdout is not None
        client = proc.stdout.readline().strip()
        assert client.endswith(f"-{proc.pid}"), client
        return proc, client

    def end(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGCONT)  # a frozen one too
            proc.kill()
            proc.wait()
