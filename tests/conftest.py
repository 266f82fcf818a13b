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


if os.environ.get("DISKFRONTIER_TEST_POLITE"):
    # The behaviour suite again with the host layer on (per_host set, so pop goes through the
    # per-host buffers and heaps) but holding nothing back: every promise must still hold.
    import diskfrontier.frontier as _frontier

    _plain_init = _frontier.Frontier.__init__

    def _polite_init(self, *args, **kwargs):
        kwargs.setdefault("per_host", 1 << 30)
        _plain_init(self, *args, **kwargs)

    _frontier.Frontier.__init__ = _polite_init
