"""Where the files of OML's module paths that have no module of their own in the core are: the tree
``oml_core/compat/oml_paths/``, one tiny file per path (``losses/triplet.py`` is ``oml_core.losses.triplet``).

Python finds a package's submodules in the folders of its ``__path__``. ``oml_core`` and each core package with
such OML paths under it add the tree's folder of the same package after their own, in one line::

    __path__.append(oml_paths_folder(__name__))  # in oml_core/registry/__init__.py

so ``import oml_core.registry.models`` finds ``oml_core/compat/oml_paths/registry/models.py``, and a real module of
the core, found in the package's own folder first, always wins. Nothing is imported by that line: a file of the
tree runs (and imports ``oml_core.compat``) only when its OML path is imported. Which paths the tree holds is
:data:`oml_core.compat.modules.OML_MODULES`'s business (:mod:`oml_core.compat.tree`).
"""

from __future__ import annotations

import os

#: The root of the tree: the folder of OML's module paths directly under ``oml_core``.
OML_PATHS_ROOT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "compat", "oml_paths"
)


def oml_paths_folder(package: str) -> str:
    """The folder of the tree that holds OML's module paths under the core package ``package``
    (``oml_core`` -> ``.../oml_core/compat/oml_paths``, ``oml_core.lightning.pipelines`` ->
    ``.../oml_core/compat/oml_paths/lightning/pipelines``), to append to the package's ``__path__``."""
    return os.path.join(OML_PATHS_ROOT, *package.split(".")[1:])


__all__ = ["OML_PATHS_ROOT", "oml_paths_folder"]
