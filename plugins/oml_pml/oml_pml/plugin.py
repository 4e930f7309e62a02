"""The plugin module of the ``oml_pml`` plugin: pytorch-metric-learning's losses and miners, and their default
configs.

:data:`COMPONENTS` is the plugin's one table, made from the static tables of :mod:`oml_pml.names`, declared as
``OML_COMPONENTS`` (the registry registers it), and the package ``oml_pml`` takes its lazy exports and ``__all__``
from it and from :data:`EXTRA_EXPORTS`. Factories are lazy ``"oml_pml.losses:<name>"`` / ``"oml_pml.miners:<name>"``
strings: registering imports neither torch nor PML. Every name has its PML class name as an alias, so a loss's
config may name its miner as PML does (``miner: {name: MultiSimilarityMiner}``). The default config of a component
``name`` of kind ``kind`` is ``oml_pml/configs/<kind>/<name>.yaml``."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from oml_core.utils.lazy import Component
from oml_pml.names import LOSS_NAMES, LOSSES, MINER_NAMES, MINERS

#: The one factory that is a function of the plugin, not built from a PML class: ``oml_pml`` exports it.
_EXPORTED_FACTORIES = frozenset({"pml_cross_batch_memory"})


def _components(
    kind: str, module: str, names: Mapping[str, str], described: Mapping[str, tuple[str, str]]
) -> tuple[Component, ...]:
    """Every ``name -> PML class`` of ``names`` as a component ``<module>:<name>`` of ``kind`` (alias: the PML class
    name), described by ``described[class]`` (what it does, the paper)."""
    return tuple(
        Component(
            kind,
            name,
            f"{module}:{name}",
            f"PML {class_name}: {described[class_name][0]} ({described[class_name][1]})",
            aliases=(class_name,),
            export=name in _EXPORTED_FACTORIES,
        )
        for name, class_name in names.items()
    )


#: Every component of the plugin: the losses of :data:`oml_pml.names.LOSSES` and the miners of
#: :data:`oml_pml.names.MINERS`, as ``pml_<name>``.
COMPONENTS: tuple[Component, ...] = (
    *_components("loss", "oml_pml.losses", LOSS_NAMES, LOSSES),
    *_components("miner", "oml_pml.miners", MINER_NAMES, MINERS),
)

#: The other public names of ``oml_pml`` (the wrappers and helpers): ``{name: module}``.
EXTRA_EXPORTS: MappingProxyType[str, str] = MappingProxyType(
    {
        "PMLLoss": "oml_pml.losses",
        "loss_factory": "oml_pml.losses",
        "PMLMiner": "oml_pml.miners",
        "miner_factory": "oml_pml.miners",
        "resolve_miner": "oml_pml.miners",
        "build_component": "oml_pml.components",
    }
)

#: The declarations the registry reads (no hook function): the table, and the package of the default configs
#: (``<kind>/<name>.yaml``).
OML_COMPONENTS = COMPONENTS
OML_CONFIG_DIRS = ("pkg://oml_pml.configs",)
