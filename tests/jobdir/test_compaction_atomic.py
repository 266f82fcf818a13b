"""Guarantee 7: compaction killed with SIGKILL at any point leaves the old or the new job directory."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest
from popkit import take

from diskfrontier import Frontier, Request

pytestmark = pytest.mark.crash

COMPACT = ("import sys; from diskfrontier import Frontier; f = Frontier(sys.argv[1]); print('open', flush=True); "
           "f.compact(); print('done', flush=True); f.close()")


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    job = tmp_path_factory.mktemp("compact") / "job"
    with Frontier(job) as f:
        f.push_many(Request(f"https://a.example/{i}", priority=i % 4) for i in range(30000))
        for _ in range(24000):
            f.done(take(f))
    # reopen without compacting at close: crash-close leaves the long journal in place
    f = Frontier(job)
    pending = set(_peek_all(f))
    f._closing.release_files()
    f._lock.release()
    return job, pending


def _peek_all(frontier):
    out = []
    while (r := frontier.pop()) is not None:
        out.append(r.url)
    return out


@pytest.mark.parametrize("delay_ms", [0, 2, 5, 10, 20, 40, 80, 160])
def test_compaction_is_atomic_under_sigkill(tmp_path, template, delay_ms):
    source, pending = template
    job = tmp_path / "job"
    shutil.copytree(source, job)
    child = subprocess.Popen([sys.executable, "-c", COMPACT, str(job)], stdout=subprocess.PIPE)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == b"open"
    time.sleep(delay_ms / 1000)
    child.kill()
    child.wait()
    with Frontier(job) as f:
        got = _peek_all(f)
        for url in list(pending)[:100]:
            assert not f.push(Request(url))
        assert not f.push(Request("https://a.example/1"))  # a finished one stays seen
    assert len(got) == len(set(got))
    assert set(got) == pending
