"""``resolve("module:attr")``: the object a dotted import path names."""

from __future__ import annotations

import importlib
from typing import Any


def resolve(path: str) -> Any:
    """The object ``path`` names: ``"package.module:attr"`` (``attr`` may be dotted: ``"mod:Class.method"``).

    Raises:
        ValueError: ``path`` is not of the form ``module:attr``.
        ImportError: the module cannot be imported, or has no such attribute; the message names ``path``.
    """
    module_name, sep, attr_path = path.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(f"expected 'module:attr', got {path!r}")
    obj: Any = importlib.import_module(module_name)
    for attr in attr_path.split("."):
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            raise ImportError(f"cannot resolve {path!r}: {obj!r} has no attribute {attr!r}") from None
    return obj


__all__ = ["resolve"]
