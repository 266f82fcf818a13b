"""Fixtures of the job directory's tests."""

from __future__ import annotations

import subprocess
import uuid

import pytest


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs, unmounted at the end; skipped where mounting is not allowed."""
    point = tmp_path / f"disk-{uuid.uuid4().hex[:8]}"
    point.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)],
                              capture_output=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("cannot run mount")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield str(point)
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False, timeout=30)
