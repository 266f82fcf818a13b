"""The ``diskfrontier`` command line: one click group (``group.py``), one module per family of
commands (``inspect``, ``write``, ``maintain``, ``transfer``, ``demo``, ``serve``), and their shared helpers
(``options``, ``support``)."""

from .group import main

__all__ = ["main"]
