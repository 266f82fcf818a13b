"""The ``diskfrontier`` command: one click group, with the commands of each family added to it.

Where a command takes JOBDIR it also takes a Redis URL (``redis://``, ``rediss://``, ``unix://``)
with ``--crawl NAME``; the commands that work on a job directory's files refuse one. The families:
``inspect`` (inspect, peek, hosts, failed), ``write`` (push, import, requeue-failed, host),
``maintain`` (verify, compact, adopt-scrapy), ``transfer`` (export, copy), ``demo`` and ``serve``
(a live dashboard, ``live/``)."""

from __future__ import annotations

import logging

import click

from . import demo, inspect, maintain, serve, steer, transfer, write


@click.group()
@click.version_option(package_name="diskfrontier")
@click.option("-v", "--verbose", is_flag=True, help="Log what the frontier does (recovery, compaction).")
def main(verbose: bool) -> None:
    """Inspect, verify, seed and compact diskfrontier job directories, and Redis crawls.

    Where a command takes JOBDIR, a Redis URL with --crawl NAME names a crawl of the Redis
    backend instead (diskfrontier inspect redis://localhost:6379/0 --crawl news).

    Example: diskfrontier demo crawls/demo && diskfrontier inspect crawls/demo
    """
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(name)s: %(message)s")


for command in (inspect.inspect, inspect.peek, inspect.hosts, inspect.failed_command,
                write.push, write.import_command, write.requeue_failed_command, write.host,
                steer.pause, steer.resume, steer.drop,
                maintain.verify_command, maintain.compact, maintain.adopt_scrapy_command,
                transfer.export_command, transfer.copy_command, demo.demo, serve.serve):
    main.add_command(command)
