"""The named steps of a checkpoint and of a compaction's swap, for tests that stop a process at one of them.

``reached(name)`` is called as each step is reached; it does nothing unless ``HOOK`` is set (a test's
child process sets it to kill itself there, or to write the step to its log). The names, in order:
``job-started`` (a job of the background is under way), ``checkpoint-named`` (the checkpoint names
the new state; the frontier does not use it yet), ``checkpoint-done``, ``swap-caught-up`` (the
compacted journal holds all but the last records), ``swap-named`` (the checkpoint names both
journals' states), ``swap-queues`` (the new queue folder is in place; the old journal still the
truth), ``swap-installed`` (the new journal is the truth; the frontier not yet moved to it),
``swap-done``.
"""

from __future__ import annotations

from collections.abc import Callable

HOOK: Callable[[str], None] | None = None


def reached(name: str) -> None:
    """Step ``name`` is reached (see the module docstring)."""
    if HOOK is not None:
        HOOK(name)
