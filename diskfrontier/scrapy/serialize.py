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

Rebuilding a plain ``scrapy.Request`` whose URL is already in the form Scrapy gives it
(``PLAIN_URL``: ASCII, lowercase scheme and host, nothing ``safe_url_string`` would
change) skips ``Request.__init__``: most of its cost is ``safe_url_string`` of a URL that
went through it when the request was made. The fields are set as ``__init__`` sets them,
and ``RequestDicts`` checks at its start that this gives what ``request_from_dict`` gives
on a request with every field set; if it does not (another Scrapy), every request takes
the ordinary way.
"""

from __future__ import annotations

import inspect
import logging
import re
import sys
from collections.abc import Callable
from typing import Any

from scrapy import Request, Spider
from scrapy.http.headers import Headers
from scrapy.utils.request import request_from_dict

from ..core.errors import CallbackRefused
from ..request.model import Request as StoredRequest
from ..scrapyfiles.records import frontier_request, scrapy_dict, stored_request
from .itemvalues import load_items

logger = logging.getLogger(__name__)

_URL_CHARS = r"A-Za-z0-9\-._~:/@!$&()*+,;=%"
# URLs that w3lib's safe_url_string returns unchanged (tests/scrapy/test_scrapy_rebuild.py checks it)
PLAIN_URL = re.compile(rf"[a-z][a-z0-9+.\-]*://[a-z0-9.\-]+(?::(?:0|[1-9][0-9]{{0,3}}))?"
                       rf"(?:/[{_URL_CHARS}]*(?:\?[{_URL_CHARS}?]+)?)?(?:#[{_URL_CHARS}?]+)?")
# keys of a stored request's extras that the quick way sets; any other key takes the ordinary way
_QUICK_KEYS = frozenset({"callback", "errback", "headers", "cookies", "meta", "encoding", "flags", "cb_kwargs",
                         "priority", "dont_filter"})


class RequestDicts:
    """Converts requests of ``spider`` to dicts and back."""

    def __init__(self, spider: Spider, item_refused: Callable[[str, str], None] | None = None) -> None:
        self.spider = spider
        self.item_refused = item_refused or _log_item_refused
        self._names: dict[Any, str] = {}
        self._bound: dict[tuple[str, Any], Any] = {}  # (role, stored name) -> the spider's method
        self.quick = True
        self.quick = self._quick_way_agrees()

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

    def to_stored(self, request: Request, fingerprint: bytes, *, dont_filter: bool, slot: str | None) -> StoredRequest:
        """``frontier_request(self.to_dict(request), ...)``, the quick way for a plain ``scrapy.Request``
        (its non-default fields read straight from it, no whole dict built and filtered)."""
        if not self.quick or type(request) is not Request:
            return frontier_request(self.to_dict(request), fingerprint, dont_filter=dont_filter, slot=slot)
        extras: dict[str, Any] = {}
        if request.callback is not None:
            extras["callback"] = self._method_name(request.callback)
        if request.errback is not None:
            extras["errback"] = self._method_name(request.errback)
        if request._headers:
            extras["headers"] = dict(request._headers)
        for name, value in (("cookies", request._cookies), ("meta", request._meta)):
            if value is not None and value != {}:
                extras[name] = value
        if request._encoding != "utf-8":
            extras["encoding"] = request._encoding
        if request._flags:
            extras["flags"] = request._flags
        if request._cb_kwargs:
            extras["cb_kwargs"] = request._cb_kwargs
        return stored_request(request._url, request.method, request._body, request.priority,
                              request.dont_filter, extras, fingerprint, dont_filter=dont_filter, slot=slot)

    def from_dict(self, data: dict[str, Any]) -> Request:
        """The request of a dict made by ``to_dict``, its callbacks bound to the spider.

        Raises ``ValueError`` if its ``_class`` is not an imported ``scrapy.Request`` subclass.
        Items stored as their fields (``itemvalues.py``) are rebuilt.
        """
        data = load_items(data, self.item_refused)
        if "_class" in data:
            # Scrapy's load_object imports a dotted path, but returns a class as it is
            data = {**data, "_class": request_class(data["_class"])}
        bound = {role: spider_method(self.spider, data[role], role)
                 for role in ("callback", "errback") if data.get(role)}
        request = request_from_dict({**data, "callback": None, "errback": None}, spider=self.spider)
        for role, method in bound.items():
            setattr(request, role, method)
        return request

    def from_stored(self, stored: StoredRequest) -> Request:
        """The Scrapy request a frontier request made by ``frontier_request`` stands for (as
        ``from_dict(scrapy_dict(stored))``, the quick way when it can)."""
        extras = stored.meta
        url = stored.url
        if not self.quick or not extras.keys() <= _QUICK_KEYS or PLAIN_URL.fullmatch(url) is None:
            return self.from_dict(scrapy_dict(stored))
        request = Request.__new__(Request)
        request.method = stored.method.upper()
        if len(extras) == 1 and "callback" in extras:  # what a spider mostly yields: a callback, nothing else
            request._encoding = "utf-8"
            request._meta = request._cookies = request._headers = request._cb_kwargs = request._flags = None
            request._url, request._body = url, stored.body
            request.priority, request.dont_filter = stored.priority, stored.dont_filter
            request.callback = self._method("callback", extras["callback"])
            request.errback = None
            return request
        encoding = extras.get("encoding", "utf-8")
        request._encoding = encoding
        meta = extras.get("meta")
        request._meta = dict(meta) if meta else None
        request._url = url
        request._body = stored.body
        request.priority = extras.get("priority", stored.priority)
        request.callback = self._method("callback", extras.get("callback"))
        request.errback = self._method("errback", extras.get("errback"))
        request._cookies = extras.get("cookies") or None
        headers = extras.get("headers")
        request._headers = Headers(headers, encoding=encoding) if headers else None
        request.dont_filter = extras.get("dont_filter", stored.dont_filter)
        cb_kwargs = extras.get("cb_kwargs")
        request._cb_kwargs = dict(cb_kwargs) if cb_kwargs else None
        flags = extras.get("flags")
        request._flags = list(flags) if flags else None
        return request

    def _method(self, role: str, name: Any) -> Any:
        if not name:
            return None
        method = self._bound.get((role, name))
        if method is None:
            method = self._bound[(role, name)] = spider_method(self.spider, name, role)
        return method

    def _quick_way_agrees(self) -> bool:
        """True if the quick ways store and rebuild, field for field, what ``to_dict`` with
        ``frontier_request`` and ``request_from_dict`` do (on a request with every field set, and on one
        with none)."""
        callbacks = [name for name in ("parse", "_parse") if _refusal(self.spider, name) is None][:1]
        full = Request("https://probe.example/a/b?c=d#e", method="post", headers={"Referer": "https://x.example/"},
                       body=b"k=v", cookies={"c": "1"}, meta={"depth": 2}, encoding="latin-1", priority=-7,
                       dont_filter=True, flags=["f"], cb_kwargs={"n": 1},
                       callback=getattr(self.spider, callbacks[0]) if callbacks else None)
        try:
            for probe in (full, Request("https://probe.example/")):
                ordinary = frontier_request(self.to_dict(probe), b"\0" * 20, dont_filter=False, slot=None)
                quick = self.to_stored(probe, b"\0" * 20, dont_filter=False, slot=None)
                if (quick.url, quick.method, quick.body, quick.priority, quick.dont_filter, quick.meta) != (
                        ordinary.url, ordinary.method, ordinary.body, ordinary.priority, ordinary.dont_filter,
                        ordinary.meta):
                    logger.debug("storing Scrapy requests the ordinary way: the quick way differs on this Scrapy")
                    return False
                slow, rebuilt = self.from_dict(scrapy_dict(ordinary)), self.from_stored(ordinary)
                if type(slow) is not type(rebuilt) or any(
                        getattr(slow, name) != getattr(rebuilt, name) for name in Request.attributes):
                    logger.debug("rebuilding Scrapy requests the ordinary way: the quick way differs on this Scrapy")
                    return False
        except Exception as exc:  # any surprise: the ordinary way
            logger.debug("storing and rebuilding Scrapy requests the ordinary way (%s: %s)", type(exc).__name__, exc)
            return False
        return True

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
        raise NotASpiderMethod(
            f"callback {func!r} is not a method of the spider {self.spider.name!r}, so it cannot be "
            f"stored on disk (use a spider method, with cb_kwargs for its arguments)"
        )


class NotASpiderMethod(ValueError):
    """A request's callback or errback is not a method of the spider: the request cannot be stored."""


def _log_item_refused(path: str, why: str) -> None:
    logger.warning("a stored scrapy.Item of class %r is given back as a dict of its fields: %s", path, why)


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
