"""lazy_exports: plugin packages re-export names without importing them up front."""

import sys
import types

import pytest

from oml_core.utils.lazy import lazy_exports


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
