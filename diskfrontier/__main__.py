"""``python -m diskfrontier``: the same as the ``diskfrontier`` command."""

from .cli import main

main()
