"""The old import path of ``diskfrontier.jobdir.maintenance.verify`` (verify and repair of a job
directory), which keeps working."""

from .jobdir.maintenance.verify import Finding, Report, verify  # noqa: F401 - re-exported
