"""Where things are, for tests in any folder: the tests, their kits and data, the repository, the example."""

from __future__ import annotations

import os

KITS = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(KITS)
REPO = os.path.dirname(TESTS)
DATA = os.path.join(TESTS, "data")
EXAMPLE = os.path.join(REPO, "jobdir-example", "job")
