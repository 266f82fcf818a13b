import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def pytest_report_header(config):
    # Which diskfrontier is under test: the source tree, or an installed wheel (.ci/run).
    try:
        import diskfrontier
    except Exception as exc:  # reported again, in full, by the tests that import it
        return f"diskfrontier: not importable ({exc!r})"
    return f"diskfrontier: {os.path.dirname(os.path.realpath(diskfrontier.__file__))}"
