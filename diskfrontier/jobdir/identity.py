"""Which job directory a ``frontier.json`` belongs to: its ``id`` against the cursor's and the journal's.

Every cursor names the directory's id, and every journal record's checksums hold its salt
(``jobdir.salt_of``). When ``frontier.json`` and ``requests.cursor`` name different ids,
one of them was taken from another job directory; the journal's first record tells which:
if it checks with the cursor's id and not with ``frontier.json``'s, ``frontier.json`` is
the foreign one (an open refuses it, naming the id to put back); otherwise the cursor is
(it is read as damaged, and the queues are rebuilt from the journal).
"""

from __future__ import annotations

from . import checkpoint
from .journal import first_record_holds
from .layout import Layout, fold_id


def foreign_meta(layout: Layout, ident: str) -> str | None:
    """The id the directory's records hold, when ``frontier.json`` (which names ``ident``) is another
    directory's; None when ``frontier.json`` is the directory's own (or nothing can tell)."""
    named = checkpoint.named_id(layout.cursor)
    if named is None or named == ident:
        return None
    if first_record_holds(layout.journal, fold_id(named)) and not first_record_holds(layout.journal, fold_id(ident)):
        return named
    return None


def foreign_meta_problem(ident: str, named: str) -> tuple[str, str]:
    """The problem and the advice for a ``frontier.json`` that names ``ident`` in a directory whose id is ``named``."""
    return (f"it names the id {ident}, but the journal's records and requests.cursor hold {named}: it was taken "
            f"from another job directory",
            f'restore frontier.json from a backup, or set its "id" to "{named}" if the rest of it is right')
