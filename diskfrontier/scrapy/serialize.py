"""Scrapy requests to and from Scrapy's own dict form, for one spider.

The dict is the one ``Request.to_dict(spider=...)`` gives and ``request_from_dict``
reads. It is built here the same way, except that the name of a callback or errback is
looked up once per function and cached: Scrapy scans every member of the spider on each
call (~30 us a request).

A stored callback or errback name is data too: it is bound only to a method that the
spider's class defines as an ordinary function, never to a dunder (``__init__`` with
``cb_kwargs`` would rewrite the live spider), an instance attribute, a class or static
method, or the machinery of ``scrapy.Spider`` itself (``_set_crawler``, ``from_crawler``,
``start``...) other than its default callbacks. Anything else raises ``CallbackRefused``.

A stored ``_class`` (a subclass such as ``FormRequest``) is looked up only among modules
already imported, and must name a ``scrapy.Request`` subclass: a job directory is data,
and a record naming a module must not make the crawl import (run) it.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from scrapy import Request, Spider
from scrapy.utils.request import request_from_dict

from ..errors import CallbackRefused


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
        """The request of a dict made by ``to_dict``, its callbacks bound to the spider.

        Raises ``ValueError`` if its ``_class`` is not an imported ``scrapy.Request`` subclass.
        """
        if "_class" in data:
            # Scrapy's load_object imports a dotted path, but returns a class as it is
            data = {**data, "_class": request_class(data["_class"])}
        bound = {role: spider_method(self.spider, data[role], role)
                 for role in ("callback", "errback") if data.get(role)}
        request = request_from_dict({**data, "callback": None, "errback": None}, spider=self.spider)
        for role, method in bound.items():
            setattr(request, role, method)
        return request

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
                if member.__func__ is function and _refusal(self.spider, name) is None:
                    return name
        raise ValueError(
            f"callback {func!r} is not a method of the spider {self.spider.name!r}, so it cannot be "
            f"stored on disk (use a spider method, with cb_kwargs for its arguments)"
        )


_SPIDER_CALLBACKS = frozenset({"parse", "_parse"})  # scrapy.Spider's own methods that are callbacks


def _refusal(spider: Spider, name: Any) -> str | None:
    """Why ``name`` may not be a stored callback of ``spider``, or None if it may."""
    if not isinstance(name, str):
        return "it is not a name"
    if name.startswith("__"):
        return "it is a special or private name"
    for cls in type(spider).__mro__:
        if name in cls.__dict__:
            if not inspect.isfunction(cls.__dict__[name]):
                return "it is not a plain method of the spider's class"
            if cls in (Spider, object) and name not in _SPIDER_CALLBACKS:
                return "it is part of scrapy.Spider itself, not a callback"
            break
    else:
        return "the spider's class has no such method"
    bound = getattr(spider, name, None)
    if getattr(bound, "__func__", None) is not cls.__dict__[name] or not callable(bound):
        return "the spider instance has replaced it with something else"
    return None


def spider_method(spider: Spider, name: Any, role: str = "callback") -> Any:
    """The bound method of ``spider`` that a stored callback (or errback) ``name`` names.

    Raises ``CallbackRefused`` unless ``name`` is an ordinary method of the spider's class
    (see the module): a job directory must not make the crawl call anything else.
    """
    problem = _refusal(spider, name)
    if problem is not None:
        raise CallbackRefused(name, role, getattr(spider, "name", None), problem)
    return getattr(spider, name)


def request_class(path: Any) -> type[Request]:
    """The ``scrapy.Request`` subclass that the stored ``_class`` path names, without importing anything.

    Only modules already in ``sys.modules`` are looked at, and only their own attributes (a
    module's ``__getattr__`` could import). Raises ``ValueError`` saying why otherwise.
    """
    if not isinstance(path, str) or "." not in path:
        raise ValueError(f"the stored request class {path!r} is not a dotted path such as 'scrapy.FormRequest'")
    module_name, _, name = path.rpartition(".")
    module = sys.modules.get(module_name)
    if module is None:
        raise ValueError(
            f"the stored request class {path!r} is in the module {module_name!r}, which is not imported; "
            f"a job directory never makes diskfrontier import a module: import it in your project "
            f"(for example in the spider's module) if the class is yours"
        )
    cls = getattr(module, "__dict__", {}).get(name)
    if not (isinstance(cls, type) and issubclass(cls, Request)):
        raise ValueError(
            f"the stored request class {path!r} is not a scrapy.Request subclass, so the request is not rebuilt"
        )
    return cls
