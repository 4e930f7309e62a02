"""Hook implementations of the ``oml_pml`` plugin: pytorch-metric-learning's losses and miners, and their default
configs.

Factories are lazy ``"oml_pml.losses:<name>"`` / ``"oml_pml.miners:<name>"`` strings taken from the static
tables of :mod:`oml_pml.names`: registering imports neither torch nor PML. Every name has its PML class name as
an alias, so a loss's config may name its miner as PML does (``miner: {name: MultiSimilarityMiner}``). The
default config of a component ``name`` of kind ``kind`` is ``oml_pml/configs/<kind>/<name>.yaml``.
"""

from __future__ import annotations

from collections.abc import Mapping

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback, RegisterConfigDirCallback
from oml_pml.names import LOSS_NAMES, LOSSES, MINER_NAMES, MINERS


def _register_all(
    register: RegisterCallback, names: Mapping[str, str], table: Mapping[str, tuple[str, str]], module: str
) -> None:
    """Register every ``name -> PML class`` of ``names`` as ``<module>:<name>`` (alias: the PML class name),
    described by ``table[class]`` (what it does, the paper)."""
    for name, class_name in names.items():
        description, paper = table[class_name]
        register(
            name,
            f"{module}:{name}",
            aliases=(class_name,),
            description=f"PML {class_name}: {description} ({paper})",
        )


@hookimpl
def oml_register_losses(register: RegisterCallback) -> None:
    """Register every loss of :data:`oml_pml.names.LOSSES` as ``pml_<name>`` (alias: the PML class name)."""
    _register_all(register, LOSS_NAMES, LOSSES, "oml_pml.losses")


@hookimpl
def oml_register_miners(register: RegisterCallback) -> None:
    """Register every miner of :data:`oml_pml.names.MINERS` as ``pml_<name>`` (alias: the PML class name)."""
    _register_all(register, MINER_NAMES, MINERS, "oml_pml.miners")


@hookimpl
def oml_register_config_dirs(register: RegisterConfigDirCallback) -> None:
    """The default configs: ``loss/pml_<name>.yaml`` and ``miner/pml_<name>.yaml``."""
    register("pkg://oml_pml.configs")
