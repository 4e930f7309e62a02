"""lazy_exports and table_exports: plugin packages re-export names without importing them up front;
register_components: hooks register from the same table."""

import sys
import types
from functools import partial

import pytest

from oml_core.utils.lazy import Component, lazy_exports, register_components, table_exports


def test_names_are_imported_on_first_access_and_cached(monkeypatch):
    package = types.ModuleType("fake_pkg")
    monkeypatch.setitem(sys.modules, "fake_pkg", package)
    package.__getattr__, package.__dir__ = lazy_exports(
        "fake_pkg", {"sqrt": "math", "OrderedDict": "collections"}
    )
    assert "sqrt" not in vars(package)
    import math

    assert package.sqrt is math.sqrt
    assert vars(package)["sqrt"] is math.sqrt  # cached in the namespace after the first access
    assert {"OrderedDict", "sqrt"} <= set(package.__dir__())
    with pytest.raises(AttributeError, match="module 'fake_pkg' has no attribute 'cos'"):
        package.__getattr__("cos")


def test_table_exports_export_the_exported_components_and_the_extras(monkeypatch):
    package = types.ModuleType("fake_plugin")
    monkeypatch.setitem(sys.modules, "fake_plugin", package)
    components = (
        Component("loss", "root", "math:sqrt", "square root"),
        Component("loss", "ordered", "collections:OrderedDict", "not exported", export=False),
    )
    package.__getattr__, package.__dir__, package.__all__ = table_exports(
        "fake_plugin", components, {"pi": "math"}
    )
    import math

    assert package.__all__ == ["pi", "sqrt"]
    assert package.sqrt is math.sqrt
    assert package.pi == math.pi
    assert {"pi", "sqrt"} <= set(package.__dir__())
    with pytest.raises(AttributeError, match="module 'fake_plugin' has no attribute 'OrderedDict'"):
        package.__getattr__("OrderedDict")


def test_table_exports_refuse_a_name_exported_twice():
    components = (Component("loss", "root", "math:sqrt", "square root"),)
    with pytest.raises(ValueError, match="fake_plugin: 'sqrt' is exported twice"):
        table_exports("fake_plugin", components, {"sqrt": "cmath"})


def test_register_components_registers_the_components_of_one_kind_in_order():
    components = (
        Component("loss", "b", "pkg.losses:B", "second loss", aliases=("bee",)),
        Component("miner", "m", "pkg.miners:M", "a miner"),
        Component("loss", "a", "pkg.losses:A", "first loss"),
    )
    calls = []
    register_components(lambda *args, **kwargs: calls.append((args, kwargs)), components, "loss")
    assert calls == [
        (("b", "pkg.losses:B"), {"aliases": ("bee",), "description": "second loss", "every_run": False}),
        (("a", "pkg.losses:A"), {"aliases": (), "description": "first loss", "every_run": False}),
    ]
    assert Component("loss", "a", "pkg.losses:A", "first loss").export_name == "A"


def test_a_row_may_hold_the_factory_itself_but_only_a_string_factory_is_exported():
    factory = partial(dict, weights="w")
    row = Component("pretrained", "w", factory, "a checkpoint", export=False)
    calls = []
    register_components(lambda *args, **kwargs: calls.append((args, kwargs)), (row,), "pretrained")
    assert calls == [(("w", factory), {"aliases": (), "description": "a checkpoint", "every_run": False})]
    assert table_exports("fake_plugin", (row,), {})[2] == []
    with pytest.raises(TypeError, match="pretrained 'w': only a 'module:attr' factory can be exported"):
        table_exports("fake_plugin", (row._replace(export=True),), {})
