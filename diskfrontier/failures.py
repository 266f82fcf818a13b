"""The old import path of ``FailedRequest`` (a request recorded as failed): now ``diskfrontier.contract.values``,
which keeps working."""

from .contract.values import FailedRequest

__all__ = ["FailedRequest"]
