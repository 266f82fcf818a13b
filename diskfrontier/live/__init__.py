"""``diskfrontier serve``: a crawl watched live over HTTP.

``sources`` (where a crawl's state is read: a Redis crawl, a job directory's ``status.json`` or
its files), ``dashboard`` (the latest reading and the history kept in this process), ``metrics``
(a snapshot as Prometheus metric families), ``control`` (pause, resume, host settings, seeds),
``guard`` (the Host names a server answers to; the control requests refused as another site's),
``server`` (the aiohttp application; the only module that needs aiohttp) and ``static/`` (the
page: HTML, CSS and our own JavaScript drawing the charts as SVG).
"""
