"""How much of a campaign a run does: the full volume (kills, rounds, examples) where the slow tests
run (CI runs every test), a share of it in the everyday run (``pytest -m "not slow"``).

``forms(share)`` parametrizes a test with its ``volume``: ``share`` (id ``everyday``) and 1.0 (id
``full``, marked slow). Where both are selected, the conftest runs only the full one, so a run of the
whole suite does the full volume once and nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings


def forms(share: float) -> list:
    """The ``volume`` parameters: ``share`` of the full volume in the everyday run, all of it (slow)."""
    return [pytest.param(share, id="everyday", marks=pytest.mark.everyday_form),
            pytest.param(1.0, id="full", marks=pytest.mark.slow)]


def scaled(full: int, volume: float, least: int = 1) -> int:
    """``volume`` of ``full`` (kills, rounds, examples), at least ``least``."""
    return max(least, round(full * volume))


def examples(full: int, volume: float) -> settings:
    """The settings of a property test of ``full`` examples, run at ``volume`` (at least 20 examples)."""
    return settings(max_examples=scaled(full, volume, 20), deadline=None)


def property_test(full: int, *strategies: Any, share: float = 0.1, **named: Any) -> Callable[[Callable], Callable]:
    """A property test of ``full`` examples in two forms (``forms(share)``): ``@property_test(1500, urls())``
    where one would write ``@settings(max_examples=1500, deadline=None)`` and ``@given(urls())``."""

    def decorate(check: Callable) -> Callable:
        @pytest.mark.parametrize("volume", forms(share))
        def test(volume: float) -> None:
            examples(full, volume)(given(*strategies, **named)(check))()

        test.__name__, test.__qualname__, test.__doc__ = check.__name__, check.__qualname__, check.__doc__
        test.__module__ = check.__module__
        return test

    return decorate
