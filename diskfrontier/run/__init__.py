"""Layer 8: a crawl run on a frontier: ``crawl`` (threads) and ``acrawl`` (asyncio), what a run does with a
request after its handler (``policy``, ``failurekinds``), robots.txt (``robots``, ``robotsfetch``) and the demo
crawl of loopback sites (``demo``)."""
