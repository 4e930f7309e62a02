"""OML's ``oml.functional.knn``: its names are found where oml keeps them (oml_core.compat.modules).

Generated from ``OML_MODULES`` by ``python -m tests.scripts.oml_paths``: do not edit."""

from oml_core.compat.modules import forwarded_getattr

__getattr__ = forwarded_getattr(__name__)
