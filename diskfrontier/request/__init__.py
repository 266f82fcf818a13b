"""The request: its model, its msgpack codec, URL canonicalisation and Scrapy's fingerprint."""

from .model import Request

__all__ = ["Request"]
