"""``scrapy.Item`` values in a request's meta and cb_kwargs: stored as their fields and class path.

msgpack knows no Item. ``store_items`` replaces every Item in a stored Scrapy request
(in its meta, its cb_kwargs, lists, tuples, dicts and other Items) by an ``ObjectFields``:
the Item's fields and the dotted path of its class (``module.QualName``), and marks the
request (``ITEMS``) so that ``load_items`` is run only on the requests that need it.

``load_items`` gives the Items back. An Item's class is looked up only among the modules
already imported (the spider's module imports its items), and must be a ``scrapy.Item``
subclass: a job directory is data, and a class path in it must not make the crawl import
(run) a module. A path that is not found, or that names something other than an Item, and
an Item class that refuses the stored fields (a field removed since), leave the fields as
the ``ObjectFields`` (a ``dict``, whose ``class_path`` is kept if the request is stored
again); each such class path is logged once and counted in ``diskfrontier/items_as_dicts``.

An Item whose class cannot be found by its path when it is stored (a class defined inside
a function) is left as it is, so that the request stays unstorable rather than come back as
a dict. So is an Item used as a dict key or in a set (an ``ObjectFields`` is not hashable).
"""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Callable
from typing import Any

from scrapy import Item

from ..request.model import MAX_DEPTH
from ..request.model import Request as StoredRequest
from ..request.values import ObjectFields

logger = logging.getLogger("diskfrontier.scrapy")

ITEMS = "_items"  # key of a stored Scrapy request's extras: its values hold Items as ObjectFields


def class_path(cls: type) -> str:
    """The path an Item class is stored under: its module and qualified name."""
    return f"{cls.__module__}.{cls.__qualname__}"


def item_class(path: str) -> type[Item] | str:
    """The ``scrapy.Item`` subclass that ``path`` names, found without importing anything; or why not.

    The longest prefix of ``path`` that is an imported module is looked in, through the
    ``__dict__`` of the module and of each class on the way, and nothing else (a module's
    ``__getattr__`` could import, another object's attributes could run code).
    """
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        found: Any = module
        for name in parts[cut:]:
            # only modules and classes are looked into (isinstance would read another object's __class__)
            if not issubclass(type(found), (types.ModuleType, type)):
                return "it is not a scrapy.Item subclass"
            found = found.__dict__.get(name)
            if found is None:
                return f"the module {module.__name__!r} has no {'.'.join(parts[cut:])!r}"
        if isinstance(found, type) and issubclass(found, Item):
            return found
        return "it is not a scrapy.Item subclass"
    return ("its module is not imported (a job directory never makes diskfrontier import a module: import it in "
            "your project, for example in the spider's module)")


def store_items(stored: StoredRequest) -> bool:
    """Replace the Items in the extras of ``stored`` (a Scrapy request as ``frontier_request`` stores it)
    by ``ObjectFields`` and mark it; False, with nothing changed, if it holds no Item that can be."""
    extras = stored.meta
    changed = {}
    for key, value in extras.items():
        new = _to_fields(value, MAX_DEPTH)
        if new is not value:
            changed[key] = new
    if not changed:
        return False
    stored.meta = {**extras, **changed, ITEMS: 1}
    return True


def load_items(data: dict[str, Any], refused: Callable[[str, str], None]) -> dict[str, Any]:
    """Scrapy's request dict ``data`` with its Items rebuilt, if it is marked; ``refused(path, why)``
    for each class path left as fields."""
    if not data.get(ITEMS):
        return data
    return {key: _to_items(value, MAX_DEPTH, refused) for key, value in data.items() if key != ITEMS}


def _to_fields(value: Any, depth: int) -> Any:
    """``value`` with its Items as ObjectFields: the same object if it holds none (nothing is copied)."""
    if depth <= 0:
        return value  # the codec refuses what is too deep
    if isinstance(value, Item):
        cls = type(value)
        path = class_path(cls)
        if item_class(path) is not cls:
            return value
        return ObjectFields({name: _to_fields(field, depth - 1) for name, field in value.items()}, path)
    if isinstance(value, dict):
        new = {key: _to_fields(item, depth - 1) for key, item in value.items()}
        if all(new[key] is item for key, item in value.items()):
            return value
        return ObjectFields(new, value.class_path) if isinstance(value, ObjectFields) else new
    if isinstance(value, (list, tuple)):
        items = [_to_fields(item, depth - 1) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


def _to_items(value: Any, depth: int, refused: Callable[[str, str], None]) -> Any:
    if depth <= 0:
        return value
    if isinstance(value, ObjectFields):
        fields = {name: _to_items(field, depth - 1, refused) for name, field in value.items()}
        found = item_class(value.class_path)
        if isinstance(found, str):
            refused(value.class_path, found)
            return ObjectFields(fields, value.class_path)
        try:
            return found(fields)
        except (KeyError, TypeError, ValueError) as exc:  # a field the class no longer has
            refused(value.class_path, f"the class refuses its stored fields ({exc})")
            return ObjectFields(fields, value.class_path)
    if isinstance(value, dict):
        return {key: _to_items(item, depth - 1, refused) for key, item in value.items()}
    if isinstance(value, list):
        return [_to_items(item, depth - 1, refused) for item in value]
    if isinstance(value, tuple):
        return tuple(_to_items(item, depth - 1, refused) for item in value)
    return value
