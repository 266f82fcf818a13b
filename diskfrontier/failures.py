"""A request recorded as failed (``fail``), as ``failed()`` lists it: now in ``diskfrontier.contract``."""

from .contract import FailedRequest

__all__ = ["FailedRequest"]
