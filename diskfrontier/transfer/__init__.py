"""Moving crawls: copy between backends, export and import as JSON lines, adopting a Scrapy JOBDIR."""
