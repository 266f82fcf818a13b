"""The ``diskfrontier`` command line: one click group; the commands and their shared helpers."""

from .commands import main

__all__ = ["main"]
