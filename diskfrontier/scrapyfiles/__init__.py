"""Scrapy's JOBDIR formats (its queues, its request records, queuelib's files), read without Scrapy."""
