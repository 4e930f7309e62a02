"""oml core: interfaces, the plugin registry, data, metrics, retrieval and pipelines.

Plugins implement the hooks of :mod:`oml_core.registry.hookspecs` with :data:`hookimpl`::

    from oml_core import hookimpl

    @hookimpl
    def oml_register_losses(register):
        register("my_loss", "my_pkg.losses:MyLoss")
"""

from oml_core.markers import PROJECT_NAME, hookimpl, hookspec

__version__ = "0.1.0"

__all__ = ["PROJECT_NAME", "__version__", "hookimpl", "hookspec"]
