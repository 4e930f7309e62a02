"""oml core: interfaces, the plugin registry, data, metrics, retrieval and pipelines.

Plugins implement the hooks of :mod:`oml_core.registry.hookspecs` with :data:`hookimpl`::

    from oml_core import hookimpl

    @hookimpl
    def oml_register_losses(register):
        register("my_loss", "my_pkg.losses:MyLoss")

OML's import paths work with ``oml_core`` for ``oml``, also for the classes that live in plugins here
(``from oml_core.losses.triplet import TripletLossWithMiner``): the paths without a module of their own in the core
are files of ``oml_core/compat/oml_paths/``, whose folder is on this package's ``__path__`` after its own (see
:mod:`oml_core.compat.modules`). Importing ``oml_core`` imports nothing of :mod:`oml_core.compat`.
"""

from oml_core.markers import PROJECT_NAME, hookimpl, hookspec
from oml_core.utils.oml_path_folders import oml_paths_folder

__version__ = "0.1.0"

__path__.append(oml_paths_folder(__name__))  # OML's paths that live elsewhere: oml_core.losses.triplet, ...

__all__ = ["PROJECT_NAME", "__version__", "hookimpl", "hookspec"]
