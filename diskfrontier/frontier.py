"""The old import path of ``diskfrontier.jobdir.frontier`` (the job directory's ``Frontier``), which
keeps working."""

from .jobdir.frontier import Frontier  # noqa: F401 - re-exported
