"""Layer 7: a frontier reached from a name (``targets``: a job directory or a Redis URL opened as a frontier or
a read-only view) and from asyncio code (``asyncfrontier``)."""
