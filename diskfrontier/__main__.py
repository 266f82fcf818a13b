"""``python -m diskfrontier``: the same as the ``diskfrontier`` command."""

from .cli.commands import main

main()
