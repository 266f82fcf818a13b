"""The old import path of ``diskfrontier.jobdir.reader`` (the read-only views of a job directory),
which keeps working."""

from .jobdir.reader import (  # noqa: F401 - re-exported
    FailedRequests,
    HostRow,
    JobInfo,
    PendingRequests,
    all_seen_fingerprints,
    failed_requests,
    host_table,
    inspect_jobdir,
    pending_requests,
    seen_fingerprints,
)
