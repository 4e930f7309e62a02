"""Hook implementations of the ``oml_pml`` plugin: pytorch-metric-learning's losses and miners, and their default
configs.

Factories are lazy ``"oml_pml.losses:<name>"`` / ``"oml_pml.miners:<name>"`` strings taken from the static
tables of :mod:`oml_pml.names`: registering imports neither torch nor PML. Every name has its PML class name as
an alias, so a loss's config may name its miner as PML does (``miner: {name: MultiSimilarityMiner}``). The
default config of a component ``name`` of kind ``kind`` is ``oml_pml/configs/<kind>/<name>.yaml``.
"""

from __future__ import annotations

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback, RegisterConfigDirCallback
from oml_pml.names import LOSS_NAMES, LOSSES, MINER_NAMES, MINERS


@hookimpl
def oml_register_losses(register: RegisterCallback) -> None:
    """Register every loss of :data:`oml_pml.names.LOSSES` as ``pml_<name>`` (alias: the PML class name)."""
    for name, class_name in LOSS_NAMES.items():
        description, paper = LOSSES[class_name]
        register(
            name,
            f"oml_pml.losses:{name}",
            aliases=(class_name,),
            description=f"PML {class_name}: {description} ({paper})",
        )


@hookimpl
def oml_register_miners(register: RegisterCallback) -> None:
    """Register every miner of :data:`oml_pml.names.MINERS` as ``pml_<name>`` (alias: the PML class name)."""
    for name, class_name in MINER_NAMES.items():
        description, paper = MINERS[class_name]
        register(
            name,
            f"oml_pml.miners:{name}",
            aliases=(class_name,),
            description=f"PML {class_name}: {description} ({paper})",
        )


@hookimpl
def oml_register_config_dirs(register: RegisterConfigDirCallback) -> None:
    """The default configs: ``loss/pml_<name>.yaml`` and ``miner/pml_<name>.yaml``."""
    register("pkg://oml_pml.configs")
