"""Hosts and time, as data: the host schedule, the flat host table and the requests waiting for a time."""
