"""Scrapy requests to and from Scrapy's own dict form, for one spider.

The dict is the one ``Request.to_dict(spider=...)`` gives and ``request_from_dict``
reads. It is built here the same way, except that the name of a callback or errback is
looked up once per function and cached: Scrapy scans every member of the spider on each
call (~30 us a request).
"""

from __future__ import annotations

import inspect
from typing import Any

from scrapy import Request, Spider
from scrapy.utils.request import request_from_dict


class RequestDicts:
    """Converts requests of ``spider`` to dicts and back."""

    def __init__(self, spider: Spider) -> None:
        self.spider = spider
        self._names: dict[Any, str] = {}

    def to_dict(self, request: Request) -> dict[str, Any]:
        """Scrapy's dict of ``request``; ``ValueError`` if a callback is not a spider method."""
        data: dict[str, Any] = {
            "url": request.url,
            "callback": self._method_name(request.callback),
            "errback": self._method_name(request.errback),
            "headers": dict(request.headers),
        }
        for attribute in request.attributes:
            if attribute not in data:
                data[attribute] = getattr(request, attribute)
        if type(request) is not Request:
            data["_class"] = f"{type(request).__module__}.{type(request).__name__}"
        return data

    def from_dict(self, data: dict[str, Any]) -> Request:
        """The request of a dict made by ``to_dict``, its callbacks bound to the spider."""
        return request_from_dict(data, spider=self.spider)

    def _method_name(self, func: Any) -> Any:
        if not callable(func):
            return func  # None, or a name already
        function = getattr(func, "__func__", None)
        name = self._names.get(function) if function is not None else None
        if name is None:
            name = self._find(func, function)
            self._names[function] = name
        return name

    def _find(self, func: Any, function: Any) -> str:
        if function is not None:
            for name, member in inspect.getmembers(self.spider, predicate=inspect.ismethod):
                if member.__func__ is function:
                    return name
        raise ValueError(
            f"callback {func!r} is not a method of the spider {self.spider.name!r}, so it cannot be "
            f"stored on disk (use a spider method, with cb_kwargs for its arguments)"
        )
