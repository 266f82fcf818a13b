"""What tests that write journal records or cursors by hand need to know of a job directory: its id and salt."""

from __future__ import annotations

import os

from diskfrontier.jobdir.layout import Layout, read_meta, salt_of


def dir_salt(job: str | os.PathLike[str]) -> int:
    """The salt that the checksums of the job directory's records hold."""
    return salt_of(read_meta(Layout(os.fspath(job))))


def dir_id(job: str | os.PathLike[str]) -> str:
    """The job directory's id, which its cursor names."""
    ident: str = read_meta(Layout(os.fspath(job)))["id"]
    return ident
