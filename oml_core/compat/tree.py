"""The tree ``oml_core/compat/oml_paths/`` of the forwarding modules, written from
:data:`~oml_core.compat.modules.OML_MODULES`, the table of record: a file per path, nothing else.

A path with another path of the table under it (``losses``, ``models.meta``) is a package,
``<path>/__init__.py``; any other is a module, ``<path>.py``. Each file is the same three lines: its docstring and
the module ``__getattr__`` of :func:`~oml_core.compat.modules.forwarded_getattr`. The folders of the tree that
stand for real core packages (``registry/``, ``lightning/pipelines/``) hold no ``__init__.py``: the core package
is the package, and puts the folder on its ``__path__`` (:func:`core_packages_with_oml_paths`;
:mod:`oml_core.utils.oml_path_folders`).

The files are generated, never edited by hand: ``python -m tests.scripts.oml_paths`` writes them (and removes a
file no path asks for); ``tests/test_oml_paths.py`` fails when the tree differs from :func:`oml_path_files`.
"""

from __future__ import annotations

from oml_core.compat.modules import CORE_PACKAGE, OML_MODULES

_FILE = '''"""OML's ``{oml}``: its names are found where oml keeps them (oml_core.compat.modules).

Generated from ``OML_MODULES`` by ``python -m tests.scripts.oml_paths``: do not edit."""

from oml_core.compat.modules import forwarded_getattr

__getattr__ = forwarded_getattr(__name__)
'''


def oml_path_file(path: str) -> str:
    """The file of the tree, relative to its root and with ``/``, of the path ``path`` of ``OML_MODULES``
    (``losses`` -> ``losses/__init__.py``, ``losses.triplet`` -> ``losses/triplet.py``)."""
    folder = path.replace(".", "/")
    is_package = any(other.startswith(f"{path}.") for other in OML_MODULES)
    return f"{folder}/__init__.py" if is_package else f"{folder}.py"


def oml_path_files() -> dict[str, str]:
    """``{file relative to the tree's root: its text}`` for every path of ``OML_MODULES``, sorted by file."""
    files = {oml_path_file(path): _FILE.format(oml=f"oml.{path}") for path in OML_MODULES}
    return dict(sorted(files.items()))


def core_packages_with_oml_paths() -> list[str]:
    """The real core packages that hold a path of ``OML_MODULES`` directly (``oml_core``, ``oml_core.registry``,
    ...): each puts its folder of the tree on its ``__path__``, sorted."""
    parents = {path.rpartition(".")[0] for path in OML_MODULES}
    real = {parent for parent in parents if parent not in OML_MODULES}
    return sorted(CORE_PACKAGE if not parent else f"{CORE_PACKAGE}.{parent}" for parent in real)


__all__ = ["core_packages_with_oml_paths", "oml_path_file", "oml_path_files"]
