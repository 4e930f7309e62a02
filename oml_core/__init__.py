"""oml core: interfaces, the plugin registry, data, metrics, retrieval and pipelines.

Plugins implement the hooks of :mod:`oml_core.registry.hookspecs` with :data:`hookimpl`::

    from oml_core import hookimpl

    @hookimpl
    def oml_register_losses(register):
        register("my_loss", "my_pkg.losses:MyLoss")

OML's import paths work with ``oml_core`` for ``oml``, also for the classes that live in plugins here
(``from oml_core.losses.triplet import TripletLossWithMiner``; see :mod:`oml_core.compat.modules`).
"""

from oml_core.compat.configs import install_plugin_config_dirs
from oml_core.compat.modules import install_oml_module_finder
from oml_core.markers import PROJECT_NAME, hookimpl, hookspec

__version__ = "0.1.0"

install_oml_module_finder()  # OML's module paths for what lives in plugins: oml_core.losses.triplet, ...
install_plugin_config_dirs()  # OML's CONFIGS_PATH / "extractor" / "vit.yaml" finds the plugins' configs too

__all__ = ["PROJECT_NAME", "__version__", "hookimpl", "hookspec"]
