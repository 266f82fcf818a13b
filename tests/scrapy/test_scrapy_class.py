"""A stored ``_class`` is data: it never makes the crawl import a module.

Scrapy's ``request_from_dict`` imports whatever dotted path ``_class`` names. The
scheduler looks the class up among modules already imported and accepts only a
``scrapy.Request`` subclass; any other record is counted in ``diskfrontier/undecodable``,
logged, and kept for a later run.
"""

from __future__ import annotations

import logging
import sys
import uuid

import pytest
import scrapy
from popkit import take
from scrapy.http import FormRequest, JsonRequest
from test_scrapy_scheduler import Session, drain

from diskfrontier import Frontier
from diskfrontier.scrapy.serialize import request_class
from diskfrontier.scrapyfiles.records import frontier_request


def store(jobdir, *dicts):
    """Write Scrapy request dicts into ``jobdir`` as a crawl (or someone editing the directory) would."""
    with Frontier(jobdir) as frontier:
        for data in dicts:
            assert frontier.push(frontier_request(data, None))


@pytest.fixture
def marker_module(tmp_path, monkeypatch):
    """The name of an importable module, not yet imported, that writes a marker file when it is."""
    name = f"diskfrontier_marker_{uuid.uuid4().hex}"
    marker = tmp_path / "imported"
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / f"{name}.py").write_text(
        f"import pathlib, scrapy\n"
        f"pathlib.Path({str(marker)!r}).write_text('imported')\n"
        f"class Evil(scrapy.Request):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "modules"))
    yield name, marker
    sys.modules.pop(name, None)


def test_a_stored_class_in_a_module_not_imported_is_not_imported(tmp_path, marker_module, caplog):
    name, marker = marker_module
    caplog.set_level(logging.ERROR, logger="diskfrontier")
    store(tmp_path / "job",
          {"url": "https://shop.example/evil", "_class": f"{name}.Evil", "priority": 1},
          {"url": "https://shop.example/fine"})
    s = Session(tmp_path / "job", False)
    assert [r.url for r in drain(s.scheduler)] == ["https://shop.example/fine"]
    assert not marker.exists() and name not in sys.modules
    assert s.stats()["diskfrontier/undecodable"] == 1
    logged = [r.getMessage() for r in caplog.records if "cannot rebuild https://shop.example/evil" in r.getMessage()]
    assert len(logged) == 1 and f"is in the module {name!r}, which is not imported" in logged[0]
    s.close()
    with Frontier(tmp_path / "job") as frontier:  # kept for a later run
        assert take(frontier).url == "https://shop.example/evil"
    assert not marker.exists() and name not in sys.modules


@pytest.mark.parametrize("path,words", [
    ("os.system", "is not a scrapy.Request subclass"),
    ("subprocess.Popen", "is not a scrapy.Request subclass"),
    ("builtins.dict", "is not a scrapy.Request subclass"),
    ("scrapy.Spider", "is not a scrapy.Request subclass"),
    ("scrapy.http.no_such_name", "is not a scrapy.Request subclass"),
    ("scrapy", "is not a dotted path"),
    ("", "is not a dotted path"),
])
def test_a_stored_class_that_is_not_a_request_class_is_refused(tmp_path, path, words, caplog):
    caplog.set_level(logging.ERROR, logger="diskfrontier")
    store(tmp_path / "job", {"url": "https://shop.example/odd", "_class": path})
    s = Session(tmp_path / "job", False)
    assert drain(s.scheduler) == []
    assert s.stats()["diskfrontier/undecodable"] == 1
    assert any(words in r.getMessage() for r in caplog.records)
    s.close()


def test_a_module_getattr_is_not_asked():
    # a module-level __getattr__ may import on demand; only a module's own attributes are looked at
    module = type(sys)("diskfrontier_lazy_module")
    module.__getattr__ = lambda attribute: pytest.fail(f"__getattr__({attribute!r}) was called")  # type: ignore[method-assign]
    sys.modules[module.__name__] = module
    try:
        with pytest.raises(ValueError, match=r"not a scrapy\.Request subclass"):
            request_class("diskfrontier_lazy_module.Anything")
    finally:
        del sys.modules[module.__name__]


@pytest.mark.parametrize("path,cls", [
    ("scrapy.http.FormRequest", FormRequest),
    ("scrapy.http.JsonRequest", JsonRequest),
    ("scrapy.http.request.form.FormRequest", FormRequest),
    ("scrapy.FormRequest", FormRequest),
])
def test_scrapy_request_classes_are_rebuilt(tmp_path, path, cls):
    assert request_class(path) is cls
    store(tmp_path / "job", {"url": "https://shop.example/form", "method": "POST", "body": b"q=red", "_class": path})
    s = Session(tmp_path / "job", True)
    [request] = drain(s.step())
    assert type(request) is cls and request.body == b"q=red"
    s.close()


class ProjectRequest(scrapy.Request):
    """A project's own request class, imported with the spider."""


def test_a_request_subclass_of_the_project_is_rebuilt(tmp_path):
    s = Session(tmp_path / "job", True)
    assert s.scheduler.enqueue_request(ProjectRequest("https://shop.example/own"))
    [request] = drain(s.step())
    assert type(request) is ProjectRequest
    s.close()
