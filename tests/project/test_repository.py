"""The repository holds only what is meant to be there: no file a run leaves behind (a pid file, as a
lock or a hand-started holder writes one) at its root or among its committed files. Tests write in
their own temporary folders."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from paths import REPO


def test_no_pid_file_is_left_at_the_root():
    assert sorted(name for name in os.listdir(REPO) if name.endswith(".pid")) == []


def test_no_pid_file_is_committed():
    if shutil.which("git") is None or not os.path.exists(os.path.join(REPO, ".git")):
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "-C", REPO, "ls-files", "*.pid", "**/*.pid"], capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == []
